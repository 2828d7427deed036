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

// TestSumsGoToJoinersAlone: a state carries the owners' sums its node
// holds only in a join (a joiner takes them, and a periodic push/pull has
// no use for them), and only while every live peer reads them (its
// delegate protocol max 6 or more); the joiner gets them before Join
// returns.
func TestSumsGoToJoinersAlone(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	seed := start(t, fn, "seed", nil)
	snap := heldSnap()
	snap.Sums = []packet.Count{{Hash: 9, Bucket: 1000, Value: 300}}
	seed.rec.mu.Lock()
	seed.rec.snap = snap
	seed.rec.mu.Unlock()
	j := start(t, fn, "j", func(c *Config) { c.Join = []string{seed.Addr()} })
	if got := j.rec.count(func(p *packet.Packet) bool {
		return p.From == "seed" && p.Full && p.Join && len(p.Sums) == 1 && p.Sums[0].Value == 300
	}); got == 0 {
		t.Fatal("the joiner's state from its seed carried no sums")
	}
	for _, tc := range []struct {
		join bool
		want int
	}{{false, 0}, {true, 1}} {
		p, err := packet.DecodeState((*delegate)(seed.Node).LocalState(tc.join))
		if err != nil || len(p.Sums) != tc.want || len(p.Held) != 1 {
			t.Fatalf("join=%v: state %+v, %v; want %d sums and the held origin", tc.join, p, err, tc.want)
		}
	}
	start(t, fn, "old", func(c *Config) {
		c.Join = []string{seed.Addr()}
		c.Tune = func(mc *memberlist.Config) {
			quick(mc)
			mc.DelegateProtocolMax = stateProtocol
		}
	})
	eventually(t, 10*time.Second, "the seed sees the member of an earlier release", func() bool { return seed.Live() == 3 && !seed.SumsInJoins() })
	p, err := packet.DecodeState((*delegate)(seed.Node).LocalState(true))
	if err != nil || len(p.Sums) != 0 || len(p.Held) != 1 {
		t.Fatalf("with a member that reads no sums: state %+v, %v; want the held origin and no sums", p, err)
	}
}

// TestAntiEntropyLeavesLiveOriginsOut: a periodic push/pull (not a join)
// passes on gone origins and earlier incarnations, not a live member's
// current counts, which it sends itself.
func TestAntiEntropyLeavesLiveOriginsOut(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, nil)
	a, b := nodes[0], nodes[1]
	var bInc uint64
	for _, p := range a.Peers() {
		if p.Name == b.Name() {
			bInc = p.Incarnation
		}
	}
	a.rec.mu.Lock()
	a.rec.snap = &packet.Packet{Full: true, Held: []packet.Held{
		{From: b.Name(), Incarnation: bInc, Counts: []packet.Count{{Hash: 1, Value: 1}}},     // live: left out
		{From: b.Name(), Incarnation: bInc - 1, Counts: []packet.Count{{Hash: 1, Value: 2}}}, // b's former self
		{From: "dead", Incarnation: 3, Counts: []packet.Count{{Hash: 1, Value: 3}}},
	}}
	a.rec.mu.Unlock()
	for _, tc := range []struct {
		join bool
		want int
	}{{false, 2}, {true, 3}} {
		p, err := packet.DecodeState((*delegate)(a.Node).LocalState(tc.join))
		if err != nil || len(p.Held) != tc.want {
			t.Fatalf("join=%v: state %+v, %v; want %d held origins", tc.join, p, err, tc.want)
		}
	}
}

// TestStateOverLimitLeavesHeldOut: a state that would pass memberlist's
// limit with every origin it holds leaves some out (the live ones first)
// rather than sending nothing.
func TestStateOverLimitLeavesHeldOut(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	a := start(t, fn, "a", nil)
	big := func(from string) packet.Held {
		h := packet.Held{From: from, Incarnation: 1}
		for i := range 450_000 { // about 9.3 MB each: two pass the limit, one fits
			h.Counts = append(h.Counts, packet.Count{Hash: uint64(i + 1), Slot: 1, Bucket: 1_700_000_000_000, Value: 1 << 40})
		}
		return h
	}
	a.rec.mu.Lock()
	a.rec.snap = &packet.Packet{Full: true, Held: []packet.Held{big("x"), big("y")}}
	a.rec.mu.Unlock()
	b := (*delegate)(a.Node).LocalState(true)
	if len(b) == 0 || len(b) > maxState {
		t.Fatalf("state of %d bytes, want one under %d", len(b), maxState)
	}
	p, err := packet.DecodeState(b)
	if err != nil || len(p.Held) != 1 {
		t.Fatalf("state %v; want one of the two held origins", err)
	}
	if s := a.Stats(); s.StatesTrimmed != 1 || s.StatesSkipped != 0 {
		t.Fatalf("stats %+v, want one state trimmed, none skipped", s)
	}
}

// TestResyncOnAsk: Resync(name) makes a push/pull with that member (its
// state reaches the asker), once per ResyncAfter.
func TestResyncOnAsk(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, func(c *Config) { c.ResyncAfter = time.Hour })
	a, b := nodes[0], nodes[1]
	before := a.rec.fulls(b.Name())
	a.Resync(b.Name())
	eventually(t, 5*time.Second, "b's state to reach a", func() bool { return a.rec.fulls(b.Name()) > before })
	a.Resync("nobody") // not a member: nothing, no error
	a.Resync(a.Name()) // itself: nothing
}

// TestResyncNow: ResyncNow makes its push/pulls before it returns, every
// time (no ResyncAfter), and passes over names that are not live members.
func TestResyncNow(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 3, func(c *Config) { c.ResyncAfter = time.Hour })
	a, b, c := nodes[0], nodes[1], nodes[2]
	for range 2 {
		fb, fc := a.rec.fulls(b.Name()), a.rec.fulls(c.Name())
		a.ResyncNow([]string{"nobody", a.Name(), b.Name(), c.Name()})
		if a.rec.fulls(b.Name()) <= fb || a.rec.fulls(c.Name()) <= fc {
			t.Fatalf("after ResyncNow: states from b %d (was %d), from c %d (was %d); want one more each",
				a.rec.fulls(b.Name()), fb, a.rec.fulls(c.Name()), fc)
		}
	}
}
