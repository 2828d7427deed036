package reconcile_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/gossiptest"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// sentFrom returns the packets net carried from index i on, of origin
// from.
func sentFrom(net *memNet, i int, from string) []*packet.Packet {
	var out []*packet.Packet
	for _, p := range sentSince(net, i) {
		if p.From == from {
			out = append(out, p)
		}
	}
	return out
}

func hasReset(p *packet.Packet) bool {
	for _, m := range p.Marks {
		if m.Slot == local.SlotReset {
			return true
		}
	}
	return false
}

// A reset made on one node clears the key on every node at the next
// shipment, and the counts made before it never come back: every packet
// sent before the reset, delivered again in any order, counts nothing.
func TestResetClearsEveryNodeAndOldCountsNeverReturn(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b", "c")
	a, b, c := nodes[0], nodes[1], nodes[2]
	for range 30 {
		req(t, a, fc.Now(), "t/one", "u", 1)
	}
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	before := sentSince(net, 0)
	for _, n := range nodes {
		if d := req(t, n, fc.Now(), "t/one", "u", 0); d.Remaining != 0 {
			t.Fatalf("%s before the reset: remaining %d, want 0", n.name, d.Remaining)
		}
	}
	if err := b.e.Reset(fc.Now(), "t/one", "u"); err != nil {
		t.Fatal(err)
	}
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	for _, n := range nodes {
		if d := req(t, n, fc.Now(), "t/one", "u", 0); d.Remaining != 30 {
			t.Fatalf("%s after the reset: remaining %d, want 30", n.name, d.Remaining)
		}
	}
	for i := len(before) - 1; i >= 0; i-- {
		b.c.HandlePacket(before[i])
		c.c.HandlePacket(before[i])
	}
	for _, n := range []*node{b, c} {
		if d := req(t, n, fc.Now(), "t/one", "u", 0); d.Remaining != 30 {
			t.Fatalf("%s after the old packets came again: remaining %d, want 30", n.name, d.Remaining)
		}
	}
	if s := b.c.Stats(); s.Resets != 1 || s.ResetsKept != 1 {
		t.Fatalf("b's stats: %d resets, %d kept, want 1 and 1", s.Resets, s.ResetsKept)
	}
	if s := a.c.Stats(); s.ResetsApplied != 1 {
		t.Fatalf("a applied %d peers' resets, want 1", s.ResetsApplied)
	}
}

// lateReset runs a reset that reaches node c only after counts made after
// it: a hits res 8 times, everyone learns them; c is cut off; b resets;
// 100 ms later a hits 3 more times; c hears a's new counts first, then
// b's reset. It returns the nodes, for the caller to check c against a.
func lateReset(t *testing.T, res string) (a, c *node, now time.Time) {
	t.Helper()
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b", "c")
	a, b, c := nodes[0], nodes[1], nodes[2]
	req(t, a, fc.Now(), res, "u", 8)
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	net.mu.Lock()
	net.cut["c"] = true
	net.mu.Unlock()
	if err := b.e.Reset(fc.Now(), res, "u"); err != nil {
		t.Fatal(err)
	}
	fc.Advance(10 * time.Millisecond)
	mark := sentCount(net)
	step(fc, nodes) // a learns of the reset; c does not
	resets := sentFrom(net, mark, "b")
	fc.Advance(100 * time.Millisecond)
	req(t, a, fc.Now(), res, "u", 3)
	mark = sentCount(net)
	fc.Advance(time.Millisecond)
	step(fc, nodes)
	later := sentFrom(net, mark, "a")
	if len(later) == 0 || len(resets) == 0 || !hasReset(resets[0]) {
		t.Fatalf("no packet to replay: %d of a's after the reset, %d of b's (with a reset: %v)", len(later), len(resets), len(resets) > 0 && hasReset(resets[0]))
	}
	for _, p := range later {
		c.c.HandlePacket(p)
	}
	for _, p := range resets {
		c.c.HandlePacket(p)
	}
	return a, c, fc.Now()
}

// A reset that reaches a node late erases nothing made after it: c, which
// heard a's 3 later hits before b's reset, keeps them, as a does.
func TestLateResetKeepsLaterTierHits(t *testing.T) {
	a, c, now := lateReset(t, "t/one")
	da, dc := req(t, a, now, "t/one", "u", 0), req(t, c, now, "t/one", "u", 0)
	if da.Remaining != 27 || dc.Remaining != 27 {
		t.Fatalf("remaining: a %d, c %d; want 27 on both (3 hits after the reset)", da.Remaining, dc.Remaining)
	}
}

// The same for gcra, whose engine forgets every spend on a reset: the
// cluster applies again the spends of buckets from the reset on.
func TestLateResetKeepsLaterGCRASpends(t *testing.T) {
	a, c, now := lateReset(t, "g/bucket")
	da, dc := req(t, a, now, "g/bucket", "u", 0), req(t, c, now, "g/bucket", "u", 0)
	if da.Remaining != 7 || dc.Remaining != 7 {
		t.Fatalf("remaining: a %d, c %d; want 7 on both (3 spends after the reset)", da.Remaining, dc.Remaining)
	}
}

// A node that joins after a reset learns it from a peer's state with the
// counts made before it, and counts none of them.
func TestJoinerLearnsTheResetWithTheState(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	req(t, a, fc.Now(), "t/one", "u", 20)
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	if err := b.e.Reset(fc.Now(), "t/one", "u"); err != nil {
		t.Fatal(err)
	}
	fc.Advance(50 * time.Millisecond) // past the bucket the reset fell in
	req(t, b, fc.Now(), "t/one", "u", 4)
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	_, joined := cluster(t, fc, "d")
	d := joined[0]
	for _, from := range []*node{a, b} {
		st := from.c.Snapshot()
		d.c.HandlePacket(st)
	}
	if got := req(t, d, fc.Now(), "t/one", "u", 0); got.Remaining != 26 {
		t.Fatalf("the joiner: remaining %d, want 26 (b's 4 hits after the reset, none of a's 20 before it)", got.Remaining)
	}
}

// A node keeps at most MaxResets resets: the next new key's reset is
// ErrTooMany, one of a key it keeps already is not; each is forgotten once
// its resource's longest window (and the grace of a late packet) has
// passed, and then a new one finds room.
func TestResetsBoundedAndForgotten(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a")
	a := nodes[0]
	for i := range reconcile.MaxResets {
		if err := a.e.Reset(fc.Now(), "t/one", "k"+strconv.Itoa(i)); err != nil {
			t.Fatalf("reset %d: %v", i, err)
		}
	}
	if err := a.e.Reset(fc.Now(), "t/one", "one-more"); !errors.Is(err, local.ErrTooMany) {
		t.Fatalf("reset past MaxResets = %v, want ErrTooMany", err)
	}
	if err := a.e.Reset(fc.Now(), "t/one", "k7"); err != nil {
		t.Fatalf("a kept key's reset again: %v", err)
	}
	// t/one's longest span is its 1 s window; the grace is 2 ticks + 1 s.
	for range 16 {
		fc.Advance(250 * time.Millisecond)
		step(fc, nodes)
	}
	if s := a.c.Stats(); s.ResetsKept != 0 {
		t.Fatalf("4 s later %d resets are kept, want 0", s.ResetsKept)
	}
	if err := a.e.Reset(fc.Now(), "t/one", "one-more"); err != nil {
		t.Fatalf("a reset once the old ones ended: %v", err)
	}
}

// TestMeshResetAcrossAPartition: three agents over real memberlist; a
// reset made while one agent is cut off reaches it when the partition
// heals, and every agent ends up counting only the hits made after the
// reset, the ones the cut-off agent heard before the reset included.
func TestMeshResetAcrossAPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node memberlist mesh")
	}
	fn := gossiptest.NewFaultNet()
	m := startMesh(t, fn, 3, 50*time.Millisecond)
	a, b, c := m.nodes[0], m.nodes[1], m.nodes[2]
	for range 20 {
		a.e.Request(m.now(), "m/tiers", "r", 1, 1)
	}
	counts := func(want int) func() bool {
		return func() bool {
			for _, n := range m.nodes {
				if tierHits(t, m, n, "r") != want {
					return false
				}
			}
			return true
		}
	}
	waitMesh(t, m, 30*time.Second, "every node to count a's 20 hits", true, counts(20))
	fn.Partition(c.tr.Addr())
	if err := b.e.Reset(m.now(), "m/tiers", "r"); err != nil {
		t.Fatal(err)
	}
	for range 5 { // past the 200 ms bucket the reset fell in
		m.tick(t)
	}
	for range 5 {
		a.e.Request(m.now(), "m/tiers", "r", 1, 1)
	}
	waitMesh(t, m, 30*time.Second, "a and b to count the 5 hits after the reset", true, func() bool {
		return tierHits(t, m, a, "r") == 5 && tierHits(t, m, b, "r") == 5
	})
	if got := tierHits(t, m, c, "r"); got != 20 {
		t.Fatalf("the cut-off node counts %d, want the 20 it knew", got)
	}
	fn.Heal()
	waitMesh(t, m, 30*time.Second, "every node to count the 5 hits after the reset", true, counts(5))
	for range 20 { // resends and push/pulls never bring the 20 back
		m.tick(t)
		if !counts(5)() {
			t.Fatalf("a count changed after converging: a %d, b %d, c %d", tierHits(t, m, a, "r"), tierHits(t, m, b, "r"), tierHits(t, m, c, "r"))
		}
	}
}
