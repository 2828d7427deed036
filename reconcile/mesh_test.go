package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip"
	"github.com/obol-dev/obol/internal/gossiptest"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// meshNode is an agent's cluster side in-process: engine, reconcile and a
// real memberlist node on 127.0.0.1, over the fault layer.
type meshNode struct {
	name string
	e    *local.Engine
	c    *reconcile.Cluster
	g    *gossip.Node
	tr   *gossiptest.FaultTransport
}

// fastProbes shortens memberlist's timers so deaths are seen in about a
// second.
func fastProbes(c *memberlist.Config) {
	c.GossipInterval = 20 * time.Millisecond
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 150 * time.Millisecond
	c.SuspicionMult = 2
	c.GossipToTheDeadTime = 2 * time.Second
	c.TCPTimeout = 2 * time.Second
}

const meshYAML = `
resources:
  m/tiers:
    kind: tiers
    tiers: "50,10,10,0"
  m/jobs:
    kind: copies
    domain_limit: 10
`

func startMesh(t *testing.T, fn *gossiptest.FaultNet, n int, sync time.Duration) []*meshNode {
	t.Helper()
	cfg, err := config.Parse([]byte(meshYAML))
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*meshNode
	var seeds []string
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		tr, err := fn.Listen()
		if err != nil {
			t.Fatal(err)
		}
		c := reconcile.New(reconcile.Options{Name: name, SyncInterval: sync})
		e := local.New(cfg)
		e.Attach(c)
		g, err := gossip.New(gossip.Config{Name: name, Transport: tr, Join: seeds, Tune: fastProbes,
			Incarnation: c.Incarnation(), RejoinInterval: -1, ResyncAfter: time.Second}, c)
		if err != nil {
			t.Fatal(err)
		}
		c.SetSender(g)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { c.Run(ctx); close(done) }()
		mn := &meshNode{name, e, c, g, tr}
		t.Cleanup(func() {
			cancel()
			<-done
			_ = g.Shutdown()
		})
		nodes = append(nodes, mn)
		seeds = append(seeds, tr.Addr())
	}
	waitMesh(t, 10*time.Second, "every node to see the whole mesh", func() bool {
		for _, m := range nodes {
			if m.g.Live() != n {
				return false
			}
		}
		return true
	})
	return nodes
}

func waitMesh(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func tierHits(t *testing.T, m *meshNode, dom string) int {
	t.Helper()
	d, err := m.e.Request(time.Now(), "m/tiers", dom, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.TierHits
}

// TestMeshConvergesUnderLossAndDelay: five agents over real memberlist, 20%
// of datagrams lost and 5 ms of delay; every node ends up counting every
// hit, never more.
func TestMeshConvergesUnderLossAndDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a five-node memberlist mesh")
	}
	fn := gossiptest.NewFaultNet()
	nodes := startMesh(t, fn, 5, 50*time.Millisecond)
	fn.SetDrop(0.2, nil)
	fn.SetDelay(5 * time.Millisecond)
	want := 0
	for i, m := range nodes {
		for range 4 + i {
			if d, _ := m.e.Request(time.Now(), "m/tiers", "u", 1, 1); d.Granted != 1 {
				t.Fatalf("%s rejected a hit under the limit: %+v", m.name, d)
			}
			want++
		}
	}
	took := waitMesh(t, 10*time.Second, "every node to count every hit", func() bool {
		for _, m := range nodes {
			if tierHits(t, m, "u") != want {
				return false
			}
		}
		return true
	})
	t.Logf("%d hits on 5 nodes counted everywhere %v later with 20%% loss", want, took.Round(time.Millisecond))
	for range 20 { // resends and duplicates never push a count past the truth
		time.Sleep(10 * time.Millisecond)
		for _, m := range nodes {
			if got := tierHits(t, m, "u"); got != want {
				t.Fatalf("%s counts %d hits, want %d", m.name, got, want)
			}
		}
	}
}

// TestMeshPartitionHealsAndDeadNodesLoseHolds: a node cut off keeps
// granting alone; after the heal the counts re-converge; a node that dies
// has its holds dropped everywhere.
func TestMeshPartitionHealsAndDeadNodesLoseHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node memberlist mesh")
	}
	fn := gossiptest.NewFaultNet()
	nodes := startMesh(t, fn, 3, 50*time.Millisecond)
	a, b, c := nodes[0], nodes[1], nodes[2]

	fn.Partition(c.tr.Addr())
	for range 7 {
		a.e.Request(time.Now(), "m/tiers", "p", 1, 1)
	}
	for range 5 {
		if d, _ := c.e.Request(time.Now(), "m/tiers", "p", 1, 1); d.Granted != 1 {
			t.Fatalf("the cut-off node stopped granting: %+v", d)
		}
	}
	time.Sleep(300 * time.Millisecond) // a few ticks ship into the void
	if got := tierHits(t, c, "p"); got != 5 {
		t.Fatalf("cut-off node counts %d, want its own 5", got)
	}
	fn.Heal()
	took := waitMesh(t, 10*time.Second, "counts to re-converge after the heal", func() bool {
		return tierHits(t, a, "p") == 12 && tierHits(t, b, "p") == 12 && tierHits(t, c, "p") == 12
	})
	t.Logf("re-converged %v after the heal", took.Round(time.Millisecond))

	s, _ := c.e.OpenSession(time.Now(), time.Minute)
	if r, err := c.e.Reserve(time.Now(), "m/jobs", "acme", 6, 6, s); err != nil || r.Granted != 6 {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	waitMesh(t, 5*time.Second, "a and b to count c's holds", func() bool {
		for _, m := range []*meshNode{a, b} {
			if ks, _ := m.e.State(time.Now(), "m/jobs", "acme"); ks.Holds != 6 {
				return false
			}
		}
		return true
	})
	_ = c.g.Shutdown() // dies without leaving
	took = waitMesh(t, 10*time.Second, "the dead node's holds to be dropped", func() bool {
		for _, m := range []*meshNode{a, b} {
			if ks, _ := m.e.State(time.Now(), "m/jobs", "acme"); ks.Holds != 0 {
				return false
			}
		}
		return true
	})
	t.Logf("holds of the dead node dropped %v after its death", took.Round(time.Millisecond))
}
