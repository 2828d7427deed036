package gossip

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// TestJoinFailOpenThenRejoin: a node whose seeds do not answer starts alone
// (New does not fail), and its rejoin loop, driven by a fake clock, joins
// the mesh once the seed is reachable.
func TestJoinFailOpenThenRejoin(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	seed := start(t, fn, "seed", nil)
	tr, err := fn.Listen()
	if err != nil {
		t.Fatal(err)
	}
	fn.Partition(tr.Addr()) // the seed is unreachable from the new node
	fake := clock.NewFake(time.Unix(0, 0))
	rec := &recorder{}
	n, err := New(Config{
		Name: "late", Transport: tr, Tune: quick, Logger: testLogger(t),
		Join: []string{seed.Addr()}, RejoinInterval: time.Second, Clock: fake,
		BeaconInterval: -1, // the fake clock drives the rejoin loop alone
	}, rec)
	if err != nil {
		t.Fatalf("New with an unreachable seed: %v", err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	if n.Live() != 1 {
		t.Fatalf("Live = %d, want 1 (alone)", n.Live())
	}
	fn.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal("the rejoin loop is not waiting on the clock")
	}
	fake.Advance(2 * time.Second)
	eventually(t, 10*time.Second, "the late node joins", func() bool { return n.Live() == 2 && seed.Live() == 2 })
	if !rec.has("seed", true, snapHash("seed"), 1) {
		t.Errorf("the rejoin carried no snapshot")
	}
	if got := n.rejoinStep(fake.Now()); got != 0 {
		t.Errorf("rejoin with every seed a member joined %d addresses", got)
	}
}

// TestBeaconRevivesAfterHeal: after a partition long enough for both sides
// to declare the other dead (and for memberlist's broadcasts about it to
// be spent), healing the network is noticed through the beacon: the cut
// node hears one, resyncs, and both sides see each other alive again. With
// beacons off (the control), nothing revives them within the same time:
// memberlist neither probes nor gossips to the dead, and push/pull and the
// rejoin loop are off here.
func TestBeaconRevivesAfterHeal(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("beacon=%v", on), func(t *testing.T) {
			t.Parallel()
			fn := gossiptest.NewFaultNet()
			nodes := mesh(t, fn, 3, func(c *Config) {
				c.Tune = func(mc *memberlist.Config) {
					fast(mc)
					mc.PushPullInterval = 0
				}
				if !on {
					c.BeaconInterval = -1
				}
			})
			fn.Partition(nodes[2].Addr())
			eventually(t, 15*time.Second, "both sides declare the other dead", func() bool {
				return nodes[0].Live() == 2 && nodes[1].Live() == 2 && nodes[2].Live() == 1
			})
			time.Sleep(time.Second) // memberlist's broadcasts about the deaths are spent
			before := nodes[2].Stats().Resyncs + nodes[0].Stats().Resyncs + nodes[1].Stats().Resyncs
			fn.Heal()
			healed := time.Now()
			revived := func() bool {
				return nodes[0].Live() == 3 && nodes[1].Live() == 3 && nodes[2].Live() == 3
			}
			if !on {
				time.Sleep(3 * time.Second)
				if revived() {
					t.Fatalf("without beacons the mesh revived anyway: the test does not isolate the beacon")
				}
				return
			}
			eventually(t, 3*time.Second, "every node sees the other two alive after the heal", revived)
			t.Logf("revived %v after the heal", time.Since(healed).Round(time.Millisecond))
			if after := nodes[2].Stats().Resyncs + nodes[0].Stats().Resyncs + nodes[1].Stats().Resyncs; after == before {
				t.Fatalf("no resync after the heal")
			}
		})
	}
}
