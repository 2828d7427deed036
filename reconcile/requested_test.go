package reconcile_test

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/gossiptest"
	"github.com/obol-dev/obol/local"
)

// A limit set by a request on one node is counted on every node: a peer
// that never saw the definition makes it from the name its counts carry,
// and decides the key from the cluster-wide count. Another definition of
// the same name counts apart.
func TestRequestLimitCountedOnEveryNode(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b", "c")
	a, b := nodes[0], nodes[1]
	gcra := local.LimitedName("rq/llm", "gcra:5/5/1s")
	tiers := local.LimitedName("rq/llm", "tiers:4/1s/1s/0s,1/10s/10s/0s")
	for range 5 {
		req(t, a, fc.Now(), gcra, "u", 1)
	}
	for range 5 { // the fifth enters the prison tier
		req(t, a, fc.Now(), tiers, "u", 1)
	}
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	for _, n := range nodes[1:] {
		if d := req(t, n, fc.Now(), gcra, "u", 1); d.Granted != 0 {
			t.Errorf("%s: gcra key granted %d after a spent the burst, want 0", n.name, d.Granted)
		}
		if d := req(t, n, fc.Now(), tiers, "u", 1); d.Granted != 0 || d.Tier != 2 {
			t.Errorf("%s: tiers key granted %d in tier %d after a entered tier 2 and filled it, want 0 in tier 2", n.name, d.Granted, d.Tier)
		}
	}
	other := local.LimitedName("rq/llm", "gcra:6/6/1s")
	if d := req(t, b, fc.Now(), other, "u", 0); d.Remaining != 6 {
		t.Errorf("another definition of the name: remaining %d, want 6 (counted apart)", d.Remaining)
	}
	if u := b.e.RequestLimitUsage(); len(u) != 1 || u[0].Definitions != 3 || u[0].Keys != 2 {
		t.Errorf("b's usage %+v, want 3 definitions and 2 keys (a peek makes none)", u)
	}
}

// A definition is forgotten, on every node, once its keys have reset and a
// minute has passed; a later count of it from a peer makes it again.
func TestRequestLimitForgottenWhenIdleAndMadeAgain(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	name := local.LimitedName("rq/llm", "gcra:3/3/1s")
	req(t, a, fc.Now(), name, "u", 3)
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	if d := req(t, b, fc.Now(), name, "u", 0); d.Remaining != 0 {
		t.Fatalf("b: remaining %d, want 0", d.Remaining)
	}
	for range 150 { // past the keys' life, then a minute idle
		fc.Advance(time.Second)
		step(fc, nodes)
		for _, n := range nodes {
			n.e.Step(fc.Now())
		}
	}
	for _, n := range nodes {
		if u := n.e.RequestLimitUsage(); len(u) != 1 || u[0].Definitions != 0 || u[0].Keys != 0 {
			t.Fatalf("%s after a minute idle: %+v, want nothing kept", n.name, u)
		}
	}
	req(t, a, fc.Now(), name, "u", 2)
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	if d := req(t, b, fc.Now(), name, "u", 0); d.Remaining != 1 {
		t.Fatalf("b after the definition came back: remaining %d, want 1", d.Remaining)
	}
}

// TestMeshRequestLimit: three agents over real memberlist with 20% of
// datagrams lost; a limit set by a request on one node is counted on the
// others, which never saw the definition, and a second definition of the
// name on another node counts apart everywhere.
func TestMeshRequestLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node memberlist mesh")
	}
	fn := gossiptest.NewFaultNet()
	m := startMesh(t, fn, 3, 50*time.Millisecond)
	fn.SetDrop(0.2, nil)
	a, b := m.nodes[0], m.nodes[1]
	tiers := local.LimitedName("rq/llm", "tiers:40/10s/10s/0s")
	wide := local.LimitedName("rq/llm", "tiers:100/10s/10s/0s")
	hits := func(n *meshNode, name string) int {
		d, err := n.e.Request(m.now(), name, "u", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return d.TierHits
	}
	for range 12 {
		if d, _ := a.e.Request(m.now(), tiers, "u", 1, 1); d.Granted != 1 {
			t.Fatalf("a rejected a hit under the limit: %+v", d)
		}
	}
	for range 7 {
		b.e.Request(m.now(), wide, "u", 1, 1)
	}
	waitMesh(t, m, 30*time.Second, "every node to count both definitions apart", true, func() bool {
		for _, n := range m.nodes {
			if hits(n, tiers) != 12 || hits(n, wide) != 7 {
				return false
			}
		}
		return true
	})
}
