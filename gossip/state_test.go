package gossip

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// heldSnap is a state holding another origin's counts, as a node that
// outlived that origin keeps them.
func heldSnap() *packet.Packet {
	return &packet.Packet{Full: true,
		Names:  []packet.Name{{Hash: 9, Resource: "r/x", Domain: "d"}},
		Counts: []packet.Count{{Hash: 9, Bucket: 1000, Value: 2}},
		Held:   []packet.Held{{From: "dead", Incarnation: 4, Counts: []packet.Count{{Hash: 9, Bucket: 1000, Value: 200}}}}}
}

// TestJoinerGetsHeldOrigins: a node that joins gets, in its seed's
// push/pull state, the counts the seed holds for other origins (a dead
// one here), before Join returns.
func TestJoinerGetsHeldOrigins(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	seed := start(t, fn, "seed", nil)
	seed.rec.mu.Lock()
	seed.rec.snap = heldSnap()
	seed.rec.mu.Unlock()
	j := start(t, fn, "j", func(c *Config) { c.Join = []string{seed.Addr()} })
	got := j.rec.count(func(p *packet.Packet) bool {
		return p.From == "seed" && p.Full && len(p.Held) == 1 && p.Held[0].From == "dead" && p.Held[0].Counts[0].Value == 200
	})
	if got == 0 {
		t.Fatal("the joiner's first state from its seed did not pass on the dead origin's counts")
	}
}

// TestHeldWaitsForEveryPeer: with a member of an earlier release (its
// delegate protocol max under 5) a state carries the node's own counts
// alone, in the form every release reads.
func TestHeldWaitsForEveryPeer(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	seed := start(t, fn, "seed", nil)
	seed.rec.mu.Lock()
	seed.rec.snap = heldSnap()
	seed.rec.mu.Unlock()
	old := start(t, fn, "old", func(c *Config) {
		c.Join = []string{seed.Addr()}
		c.Tune = func(mc *memberlist.Config) {
			quick(mc)
			mc.DelegateProtocolMax = heartbeatProtocol
		}
	})
	eventually(t, 10*time.Second, "the seed sees the old node", func() bool { return seed.Live() == 2 && !seed.HoldsForMesh() })
	st := (*delegate)(seed.Node).LocalState(false)
	if _, err := packet.Decode(st); err != nil {
		t.Fatalf("with an earlier release in the mesh the state must be one it reads: %v", err)
	}
	if err := old.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "with the old node gone, states pass on held origins again", func() bool { return seed.HoldsForMesh() })
	p, err := packet.DecodeState((*delegate)(seed.Node).LocalState(false))
	if err != nil || len(p.Held) != 1 {
		t.Fatalf("state: %+v, %v; want one held origin", p, err)
	}
}
