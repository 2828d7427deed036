package reconcile_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/reconcile"
)

// repairing is a memSender whose peers repair loss (reconcile.Repairer).
type repairing struct {
	memSender
	on bool
}

func (r *repairing) Repairs() bool { return r.on }

// sentSince returns the packets sent since the first n.
func sentSince(net *memNet, n int) []*packet.Packet {
	net.mu.Lock()
	defer net.mu.Unlock()
	return append([]*packet.Packet(nil), net.sent[n:]...)
}

func sentCount(net *memNet) int {
	net.mu.Lock()
	defer net.mu.Unlock()
	return len(net.sent)
}

// TestShipOnceWhenPeersRepair: with a Repairer sender a change ships on
// the next tick and never again; the key's name rides its first shipment
// only; a tier entry ships when it changes, not with every count; the
// first idle tick sends one empty packet (its seq shows a lost last
// message), the next ones only the heartbeat. Without repair the
// same change is resent.
func TestShipOnceWhenPeersRepair(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	rs := &repairing{memSender: memSender{net, "a"}, on: true}
	a.c.SetSender(rs)
	tick := func() []*packet.Packet {
		n := sentCount(net)
		fc.Advance(250 * time.Millisecond)
		a.c.Step(fc.Now())
		return sentSince(net, n)
	}
	tick() // the first Step counts the live nodes
	for range 3 {
		req(t, a, fc.Now(), "t/prison", "u", 1) // 5 a second: the second hit enters tier 2
	}
	first := tick()
	if len(first) != 1 || len(first[0].Counts) == 0 || len(first[0].Names) != 1 || len(first[0].Marks) == 0 {
		t.Fatalf("the first tick shipped %+v; want one packet with counts, a mark and the name", first)
	}
	if d := req(t, b, fc.Now(), "t/prison", "u", 0); d.TierHits != 3 {
		t.Fatalf("b counts %d hits, want 3", d.TierHits)
	}
	idle := tick()
	if len(idle) != 1 || len(idle[0].Counts)+len(idle[0].Marks)+len(idle[0].Names)+len(idle[0].Gauges) != 0 {
		t.Fatalf("the first idle tick sent %+v, want one empty packet", idle)
	}
	for i := range 6 {
		for _, p := range tick() {
			if len(p.Counts)+len(p.Marks)+len(p.Names)+len(p.Gauges) != 0 {
				t.Fatalf("idle tick %d sent %+v, want nothing but heartbeats (no resends)", i+2, p)
			}
		}
	}
	shipped := func(dom string) (counts, names int) {
		for _, p := range tick() {
			for _, c := range p.Counts {
				if c.Hash == reconcile.KeyHash("t/one", dom) {
					counts++
				}
			}
			names += len(p.Names)
		}
		return counts, names
	}
	req(t, a, fc.Now(), "t/one", "v", 1)
	if c, n := shipped("v"); c == 0 || n != 1 {
		t.Fatalf("a new key shipped %d counts, %d names; want its counts and its name", c, n)
	}
	req(t, a, fc.Now(), "t/one", "v", 1)
	if c, n := shipped("v"); c == 0 || n != 0 {
		t.Fatalf("the key's next change shipped %d counts, %d names; want counts alone", c, n)
	}

	// Without repair the same kind of change is resent on the schedule.
	rs.on = false
	req(t, a, fc.Now(), "t/one", "w", 1)
	shipments := 0
	for range 20 {
		for _, p := range tick() {
			for _, c := range p.Counts {
				if c.Hash == reconcile.KeyHash("t/one", "w") {
					shipments++
					break
				}
			}
		}
	}
	if shipments != 3 {
		t.Fatalf("without repair the change shipped %d times, want 3 (1, 2 and 3 ticks after; at 5 its 1 s window is over)", shipments)
	}
}

// asking is a repairing sender that can ask peers for names
// (reconcile.NameAsker), answered at once from the origin's Names.
type asking struct {
	repairing
	asked []uint64
}

func (s *asking) AskNames(origin string, inc uint64, hashes []uint64) {
	s.asked = append(s.asked, hashes...)
	s.net.mu.Lock()
	o := s.net.nodes[origin]
	me := s.net.nodes[s.from]
	s.net.mu.Unlock()
	if o == nil || me == nil || o.Incarnation() != inc {
		return
	}
	if names := o.Names(hashes); len(names) > 0 {
		me.HandlePacket(&packet.Packet{From: origin, Incarnation: inc, Names: names})
	}
}

// TestNamesOncePerKey: shipping once, a key's name is left out while its
// peers keep it (NameTTL since its last shipment), even after the sender
// forgot the key itself; a peer that lacks it anyway (it restarted) asks
// the origin, and counts what waited for the name.
func TestNamesOncePerKey(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	a.c.SetSender(&asking{repairing: repairing{memSender: memSender{net, "a"}, on: true}})
	bs := &asking{repairing: repairing{memSender: memSender{net, "b"}, on: true}}
	b.c.SetSender(bs)
	tick := func() []*packet.Packet {
		n := sentCount(net)
		fc.Advance(250 * time.Millisecond)
		a.c.Step(fc.Now())
		b.c.Step(fc.Now())
		return sentSince(net, n)
	}
	names := func(ps []*packet.Packet) int {
		n := 0
		for _, p := range ps {
			if p.From == "a" {
				n += len(p.Names)
			}
		}
		return n
	}
	tick()
	req(t, a, fc.Now(), "t/one", "u", 1)
	if n := names(tick()); n != 1 {
		t.Fatalf("the first shipment carried %d names, want 1", n)
	}
	for range 40 { // 10 s: the key's 1 s window is long over; a forgets it, b keeps its name
		tick()
	}
	req(t, a, fc.Now(), "t/one", "u", 1)
	if n := names(tick()); n != 0 {
		t.Fatalf("a shipment within NameTTL carried %d names, want none", n)
	}
	if d := req(t, b, fc.Now(), "t/one", "u", 0); d.TierHits != 1 {
		t.Fatalf("b counts %d hits of u in its window, want 1 (it kept the name)", d.TierHits)
	}
	if len(bs.asked) != 0 {
		t.Fatalf("b asked for %d names it had", len(bs.asked))
	}

	// b restarts: a new cluster under the same name, knowing no name.
	b2 := reconcile.New(reconcile.Options{Name: "b", Incarnation: 9, Clock: fc})
	b2.SetSender(bs)
	b.e.Attach(b2)
	net.mu.Lock()
	net.nodes["b"] = b2
	net.mu.Unlock()
	req(t, a, fc.Now(), "t/one", "u", 1)
	n := sentCount(net)
	fc.Advance(250 * time.Millisecond)
	a.c.Step(fc.Now())
	if got := names(sentSince(net, n)); got != 0 {
		t.Fatalf("a named u again (%d names) though within NameTTL", got)
	}
	if len(bs.asked) != 1 || bs.asked[0] != reconcile.KeyHash("t/one", "u") {
		t.Fatalf("the restarted b asked for %v, want u's hash", bs.asked)
	}
	if d := req(t, b, fc.Now(), "t/one", "u", 0); d.TierHits != 2 {
		t.Fatalf("b counts %d hits of u in its window, want 2: the one before the restart, and the one whose name it asked for", d.TierHits)
	}
	if got := b2.Stats().NamesAsked; got != 1 {
		t.Fatalf("NamesAsked = %d, want 1", got)
	}
}

// stretching is a memSender whose peers read a longer silence as normal
// (reconcile.HeartbeatStretcher).
type stretching struct {
	memSender
	stretch int
}

func (s *stretching) HeartbeatStretch() int { return s.stretch }

// TestHeartbeatStretched: an idle node sends its heartbeat every fourth
// tick, every 4 × HeartbeatStretch ticks (still on a fourth tick, on a
// phase of its own) when its sender stretches, and every fourth again when
// the stretch falls back to 1 (a member that does not stretch joined); a
// stretch under 1 counts as 1.
func TestHeartbeatStretched(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b")
	a := nodes[0]
	ss := &stretching{memSender: memSender{net, "a"}, stretch: 1}
	a.c.SetSender(ss)
	beats := func(ticks int) (at []int) {
		for i := 1; i <= ticks; i++ {
			n := sentCount(net)
			fc.Advance(250 * time.Millisecond)
			a.c.Step(fc.Now())
			if sentCount(net) > n {
				at = append(at, i)
			}
		}
		return at
	}
	beats(4) // line the ticks up: the node's fourth ticks are 4, 8, …
	for _, tc := range []struct {
		stretch, gap int
	}{
		{1, 4}, {3, 12}, {0, 4}, {-2, 4}, {5, 20}, {2, 8},
	} {
		ss.stretch = tc.stretch
		got := beats(60)
		if len(got) != 60/tc.gap {
			t.Errorf("stretch %d: heartbeats on ticks %v of 60, want one every %d", tc.stretch, got, tc.gap)
			continue
		}
		for i, at := range got {
			if at%4 != 0 || (i > 0 && at-got[i-1] != tc.gap) {
				t.Errorf("stretch %d: heartbeats on ticks %v of 60, want one every %d, on fourth ticks", tc.stretch, got, tc.gap)
				break
			}
		}
	}
	// The phase is the node's own: of 12 names, stretched by 3, not all
	// heartbeat on the same tick.
	phases := map[int]bool{}
	for i := range 12 {
		fc := clock.NewFake(t0)
		net, nodes := cluster(t, fc, "p"+strconv.Itoa(i), "q")
		ss := &stretching{memSender: memSender{net, "p" + strconv.Itoa(i)}, stretch: 3}
		nodes[0].c.SetSender(ss)
		for s := 1; s <= 12; s++ {
			n := sentCount(net)
			fc.Advance(250 * time.Millisecond)
			nodes[0].c.Step(fc.Now())
			if sentCount(net) > n {
				phases[s] = true
			}
		}
	}
	if len(phases) < 2 {
		t.Errorf("12 nodes stretched by 3 heartbeat on ticks %v of 12: want their phases spread", phases)
	}
}
