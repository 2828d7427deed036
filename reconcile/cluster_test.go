package reconcile_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

var t0 = time.Unix(1_700_000_000, 0)

const testConfig = `
namespaces:
  rq: {request_limits: true}
resources:
  t/one:
    kind: tiers
    tiers: "30,1,1,0"
  t/prison:
    kind: tiers
    tiers: "5,1,1,0,1,10,10,0"
  t/global:
    kind: tiers
    global_limit: 20
    tiers: "100,1,1,0"
  g/bucket:
    kind: gcra
    burst: 10
    count: 10
    period: 1s
  c/jobs:
    kind: copies
    domain_limit: 4
    global_limit: 6
`

// memNet delivers packets between in-process clusters, synchronously, with
// links the test can cut.
type memNet struct {
	mu    sync.Mutex
	nodes map[string]*reconcile.Cluster
	cut   map[string]bool // node names cut off from everyone
	sent  []*packet.Packet
}

type memSender struct {
	net  *memNet
	from string
}

func (s memSender) Send(p *packet.Packet) error {
	s.net.mu.Lock()
	if s.net.cut[s.from] {
		s.net.mu.Unlock()
		return nil
	}
	var to []*reconcile.Cluster
	for name, c := range s.net.nodes {
		if name != s.from && !s.net.cut[name] {
			to = append(to, c)
		}
	}
	s.net.sent = append(s.net.sent, p)
	s.net.mu.Unlock()
	for _, c := range to {
		c.HandlePacket(p)
	}
	return nil
}

func (s memSender) Live() int {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	return len(s.net.nodes)
}

type node struct {
	name string
	c    *reconcile.Cluster
	e    *local.Engine
}

func cluster(t *testing.T, fc *clock.Fake, names ...string) (*memNet, []*node) {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	net := &memNet{nodes: map[string]*reconcile.Cluster{}, cut: map[string]bool{}}
	var out []*node
	for i, n := range names {
		c := reconcile.New(reconcile.Options{Name: n, Incarnation: uint64(i + 1), Clock: fc})
		e := local.New(cfg)
		e.Attach(c)
		c.SetSender(memSender{net, n})
		net.nodes[n] = c
		out = append(out, &node{n, c, e})
	}
	return net, out
}

func step(fc *clock.Fake, nodes []*node) {
	for _, n := range nodes {
		n.c.Step(fc.Now())
	}
}

func req(t *testing.T, n *node, now time.Time, res, dom string, q int) local.Decision {
	t.Helper()
	d, err := n.e.Request(now, res, dom, q, q)
	if err != nil {
		t.Fatalf("%s: request %s/%s: %v", n.name, res, dom, err)
	}
	return d
}

func TestTierHitsConvergeAfterOneTick(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b", "c")
	a, b, c := nodes[0], nodes[1], nodes[2]
	for range 30 {
		if d := req(t, a, fc.Now(), "t/one", "u", 1); d.Granted != 1 {
			t.Fatalf("a rejected a hit under its limit: %+v", d)
		}
	}
	// Before any shipment b still grants (it knows nothing yet: fail open).
	if d := req(t, b, fc.Now(), "t/one", "u", 0); d.Remaining != 30 {
		t.Fatalf("b before sync: remaining %d, want 30", d.Remaining)
	}
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	for _, n := range []*node{b, c} {
		if d := req(t, n, fc.Now(), "t/one", "u", 1); d.Granted != 0 {
			t.Fatalf("%s after sync granted the 31st hit: %+v", n.name, d)
		}
	}
	// The hits leave the window (placed at their bucket's start) and every
	// node grants again.
	fc.Advance(time.Second)
	for _, n := range nodes {
		if d := req(t, n, fc.Now(), "t/one", "u", 1); d.Granted != 1 {
			t.Fatalf("%s a second later: %+v", n.name, d)
		}
	}
}

func TestDuplicatesAndReorderingNeverInflate(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	for range 10 {
		req(t, a, fc.Now(), "t/one", "u", 1)
	}
	step(fc, nodes)
	for range 5 {
		req(t, a, fc.Now(), "t/one", "u", 1)
	}
	step(fc, nodes)
	net.mu.Lock()
	sent := append([]*packet.Packet(nil), net.sent...)
	net.mu.Unlock()
	// Replay everything a sent, newest first, three times.
	for range 3 {
		for i := len(sent) - 1; i >= 0; i-- {
			b.c.HandlePacket(sent[i])
		}
	}
	d := req(t, b, fc.Now(), "t/one", "u", 0)
	if d.TierHits != 15 {
		t.Fatalf("b counts %d hits after replays, want 15", d.TierHits)
	}
}

func TestDriftFlushShipsBeforeTheTick(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b", "c")
	a, b := nodes[0], nodes[1]
	// limit 30, drift 0.05, 3 nodes: threshold max(1, 0.5) = 1 hit.
	req(t, a, fc.Now(), "t/one", "u", 1)
	a.c.Flush(fc.Now())
	if d := req(t, b, fc.Now(), "t/one", "u", 0); d.TierHits != 1 || d.Remaining != 29 {
		t.Fatalf("b after flush: %+v", d)
	}
	st := a.c.Stats()
	if st.Flushes != 1 {
		t.Fatalf("flushes = %d, want 1", st.Flushes)
	}
}

// A drift flush ships only the buckets changed since they were last
// shipped: the tick's shipments and their resends are not repeated.
func TestDriftFlushShipsOnlyUnsentBuckets(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b", "c")
	a, b := nodes[0], nodes[1]
	req(t, a, fc.Now(), "t/one", "u", 1)
	step(fc, nodes) // ships the first hit's buckets on the tick
	fc.Advance(100 * time.Millisecond)
	second := fc.Now().UnixMilli()
	req(t, a, fc.Now(), "t/one", "u", 1)
	net.mu.Lock()
	before := len(net.sent)
	net.mu.Unlock()
	a.c.Flush(fc.Now())
	a.c.Flush(fc.Now()) // nothing new: nothing to ship
	net.mu.Lock()
	flushed := net.sent[before:]
	net.mu.Unlock()
	var counts []packet.Count
	for _, p := range flushed {
		counts = append(counts, p.Counts...)
	}
	if len(counts) == 0 {
		t.Fatal("the flush shipped nothing")
	}
	for _, c := range counts {
		if c.Bucket > second || second-c.Bucket >= 20 { // 1 s window: 20 ms buckets
			t.Errorf("the flush shipped bucket %d (slot %d), not the second hit's (%d): a repeat of the tick's shipment", c.Bucket, c.Slot, second)
		}
	}
	if got := a.c.Stats().Flushes; got != 1 {
		t.Errorf("flushes = %d, want 1 (a flush with nothing unsent sends nothing)", got)
	}
	if d := req(t, b, fc.Now(), "t/one", "u", 0); d.TierHits != 2 {
		t.Fatalf("b counts %d hits, want 2", d.TierHits)
	}
	// The tick after the change ships the flushed buckets again, as it
	// ships any change: a lost flush is repaired within a tick.
	net.mu.Lock()
	before = len(net.sent)
	net.mu.Unlock()
	step(fc, nodes[:1])
	net.mu.Lock()
	tick := net.sent[before:]
	net.mu.Unlock()
	again := 0
	for _, p := range tick {
		for _, c := range p.Counts {
			if c.Bucket <= second && second-c.Bucket < 20 {
				again++
			}
		}
	}
	if again != len(counts) {
		t.Errorf("the tick after the flush shipped %d of the flushed buckets, want all %d", again, len(counts))
	}
}

// FlushAt defers a drift flush asked for within the gap after the last one
// to the gap's end; a negative gap defers nothing.
func TestFlushAtKeepsTheGap(t *testing.T) {
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	c := reconcile.New(reconcile.Options{Name: "a", Incarnation: 1, Clock: clock.NewFake(t0)})
	if got := c.FlushAt(ms(0)); !got.Equal(ms(0)) {
		t.Fatalf("before any flush: FlushAt = %v, want now", got)
	}
	c.Flush(ms(10))
	for _, tc := range []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{name: "at the flush", now: ms(10), want: ms(20)},
		{name: "within the gap", now: ms(11), want: ms(20)},
		{name: "at the gap's end", now: ms(20), want: ms(20)},
		{name: "after the gap", now: ms(25), want: ms(25)},
	} {
		if got := c.FlushAt(tc.now); !got.Equal(tc.want) {
			t.Errorf("%s: FlushAt = %v, want %v", tc.name, got.Sub(t0), tc.want.Sub(t0))
		}
	}
	none := reconcile.New(reconcile.Options{Name: "b", Incarnation: 1, Clock: clock.NewFake(t0), FlushGap: -1})
	none.Flush(ms(10))
	if got := none.FlushAt(ms(11)); !got.Equal(ms(11)) {
		t.Errorf("no gap: FlushAt = %v, want now", got.Sub(t0))
	}
	if reconcile.DefaultFlushGap != 10*time.Millisecond {
		t.Errorf("DefaultFlushGap = %v; the docs say 10 ms", reconcile.DefaultFlushGap)
	}
	// The default gap is at most a hundredth of the shortest window: a
	// resource with a 300 ms window makes it 3 ms; a set gap stays.
	short, err := config.ParseResource([]byte(`{"kind":"tiers","tiers":"10,0.3,0.3,0"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		gap  time.Duration
		want time.Time
	}{{0, ms(13)}, {7 * time.Millisecond, ms(17)}} {
		c := reconcile.New(reconcile.Options{Name: "c", Incarnation: 1, Clock: clock.NewFake(t0), FlushGap: tc.gap})
		c.Register("t/short", local.ClusterSpecOf(short), nil)
		c.Flush(ms(10))
		if got := c.FlushAt(ms(11)); !got.Equal(tc.want) {
			t.Errorf("FlushGap %v, a 300 ms window: FlushAt = %v, want %v", tc.gap, got.Sub(t0), tc.want.Sub(t0))
		}
	}
}

// Run's flusher coalesces thresholds reached within the gap into one flush
// at its end.
func TestRunCoalescesFlushesWithinTheGap(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b", "c")
	a := nodes[0]
	shipped := make(chan *packet.Packet, 8)
	a.c.SetSender(notifySender{memSender{net, "a"}, shipped})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	flushes := func() uint64 { return a.c.Stats().Flushes }
	req(t, a, fc.Now(), "t/one", "u", 1) // threshold 1 hit: a flush at once
	awaitSend(t, shipped, "the first flush")
	req(t, a, fc.Now(), "t/one", "v", 1) // within the gap: deferred
	req(t, a, fc.Now(), "t/one", "w", 1)
	// The flusher waits for the gap's end on the clock, beside Run's tick:
	// it is done with the first flush.
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := fc.BlockUntil(wait, 2); err != nil {
		t.Fatalf("waiting for the flusher to wait for the gap: %v", err)
	}
	if got := flushes(); got != 1 {
		t.Fatalf("flushes = %d within the gap, want 1", got)
	}
	fc.Advance(reconcile.DefaultFlushGap) // the test's windows are 1 s or more
	last := awaitSend(t, shipped, "the flush at the gap's end")
	if len(last.Names) != 2 {
		t.Errorf("the deferred flush carries %d keys' names, want both keys hit in the gap (v, w)", len(last.Names))
	}
	cancel()
	<-done // Run returns once its flusher is done
	if got := flushes(); got != 2 {
		t.Errorf("flushes = %d, want 2 (the first, and the one at the gap's end)", got)
	}
}

// notifySender is a memSender that also hands every packet it sends to
// shipped: the event a test of Run waits on.
type notifySender struct {
	memSender
	shipped chan<- *packet.Packet
}

func (s notifySender) Send(p *packet.Packet) error {
	err := s.memSender.Send(p)
	s.shipped <- p
	return err
}

// awaitSend returns the next packet sent through shipped, failing the test
// after 10 s without one.
func awaitSend(t *testing.T, shipped <-chan *packet.Packet, what string) *packet.Packet {
	t.Helper()
	select {
	case p := <-shipped:
		return p
	case <-time.After(10 * time.Second):
		t.Fatalf("waiting for %s: nothing sent after 10 s", what)
		return nil
	}
}

func TestTierEntrySharedSoPrisonHoldsEverywhere(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b", "c")
	a := nodes[0]
	// 5 per second, then a prison tier of 1 per 10 s: the 6th hit bursts.
	for range 6 {
		req(t, a, fc.Now(), "t/prison", "p", 1)
	}
	fc.Advance(10 * time.Millisecond)
	step(fc, nodes)
	fc.Advance(2 * time.Second) // tier 1's window has passed; tier 2 is active for 10 s
	for _, n := range nodes {
		d := req(t, n, fc.Now(), "t/prison", "p", 1)
		if d.Granted != 0 || d.Tier != 2 {
			t.Fatalf("%s: %+v, want a rejection in tier 2 (prison)", n.name, d)
		}
	}
	fc.Advance(9 * time.Second)
	for _, n := range nodes {
		if d := req(t, n, fc.Now(), "t/prison", "p", 1); d.Granted != 1 {
			t.Fatalf("%s after prison: %+v", n.name, d)
		}
	}
}

func TestGlobalLimitCountsPeers(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	for i := range 15 {
		req(t, a, fc.Now(), "t/global", string(rune('a'+i)), 1)
	}
	step(fc, nodes)
	d := req(t, b, fc.Now(), "t/global", "z", 10)
	if d.Granted != 0 {
		t.Fatalf("b granted 10 over a global limit of 20 with 15 used: %+v", d)
	}
	if d := req(t, b, fc.Now(), "t/global", "z", 5); d.Granted != 5 || d.GlobalHitsLastSecond != 20 {
		t.Fatalf("b: %+v, want 5 granted and 20 global hits", d)
	}
}

func TestGCRASpendsAdvanceTheTAT(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	req(t, a, fc.Now(), "g/bucket", "k", 8)
	step(fc, nodes)
	d := req(t, b, fc.Now(), "g/bucket", "k", 0)
	if d.Remaining != 2 {
		t.Fatalf("b sees remaining %d, want 2", d.Remaining)
	}
	if _, err := a.e.Refund(fc.Now(), "g/bucket", "k", 4); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Millisecond)
	step(fc, nodes)
	if d := req(t, b, fc.Now(), "g/bucket", "k", 0); d.Remaining != 6 {
		t.Fatalf("b after a's refund: remaining %d, want 6", d.Remaining)
	}
}

func TestCopyHoldsDroppedWhenNodeGoneOrRestarted(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	s, err := a.e.OpenSession(fc.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.e.Reserve(fc.Now(), "c/jobs", "acme", 3, 3, s)
	if err != nil || r.Granted != 3 {
		t.Fatalf("reserve on a: %+v %v", r, err)
	}
	step(fc, nodes)
	sb, _ := b.e.OpenSession(fc.Now(), time.Minute)
	r, err = b.e.Reserve(fc.Now(), "c/jobs", "acme", 2, 1, sb)
	if err != nil || r.Granted != 1 || r.DomainHolds != 4 {
		t.Fatalf("reserve on b with a holding 3 of 4: %+v %v", r, err)
	}
	b.c.NodeGone("a")
	r, err = b.e.Reserve(fc.Now(), "c/jobs", "acme", 3, 3, sb)
	if err != nil || r.Granted != 3 {
		t.Fatalf("after a is gone b should have 3 more: %+v %v", r, err)
	}
	// a comes back as a new incarnation holding nothing: its old holds
	// must not return.
	cfg := a.e.Config()
	c2 := reconcile.New(reconcile.Options{Name: "a", Incarnation: 99, Clock: fc})
	e2 := local.New(cfg)
	e2.Attach(c2)
	c2.SetSender(memSender{net, "a"})
	net.mu.Lock()
	net.nodes["a"] = c2
	net.mu.Unlock()
	// An old packet of the first incarnation arrives late: ignored once
	// the new one is known.
	b.c.HandlePacket(c2.Snapshot())
	old := nodes[0].c.Snapshot()
	b.c.HandlePacket(old)
	if got := holds(t, b, fc.Now(), "c/jobs", "acme"); got != 4 {
		t.Fatalf("b counts %d holds of acme, want its own 4", got)
	}
}

func holds(t *testing.T, n *node, now time.Time, res, dom string) int {
	t.Helper()
	ks, err := n.e.State(now, res, dom)
	if err != nil {
		t.Fatal(err)
	}
	return ks.Holds
}

func TestFailOpenWhenCutOff(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	net.mu.Lock()
	net.cut["a"] = true
	net.mu.Unlock()
	for range 30 {
		req(t, a, fc.Now(), "t/one", "u", 1)
	}
	step(fc, nodes)
	// b never heard: it keeps granting from its own state.
	if d := req(t, b, fc.Now(), "t/one", "u", 30); d.Granted != 30 {
		t.Fatalf("b cut off: %+v", d)
	}
	// Heal: a's buckets still pending resends reach b on the next tick.
	net.mu.Lock()
	net.cut["a"] = false
	net.mu.Unlock()
	fc.Advance(10 * time.Millisecond)
	req(t, a, fc.Now(), "t/one", "v", 1)
	step(fc, nodes)
	c := b.c.Contributions("t/one", "u", fc.Now())
	sort.Slice(c, func(i, j int) bool { return c[i].Origin < c[j].Origin })
	if len(c) != 2 || c[0].Origin != "a" || c[0].Counts[0] != 30 {
		t.Fatalf("contributions after heal: %+v", c)
	}
}

// A peer's spend that arrives after this node's own later spend lands where
// it happened: each node ends on the exact bucket's TAT, and neither denies
// what one bucket fed both spends in time order would grant.
func TestGCRALateSpendLandsWhereItHappened(t *testing.T) {
	fc := clock.NewFake(t0) // g/bucket: burst 10, 10/s: EI 100 ms, B 1 s
	_, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	req(t, a, fc.Now(), "g/bucket", "k", 5)
	req(t, b, fc.Now().Add(50*time.Millisecond), "g/bucket", "k", 5)
	fc.Advance(100 * time.Millisecond)
	step(fc, nodes)
	// Exact: TAT t0+500ms after a's, t0+1000ms after b's; at t0+100ms one
	// token fits.
	for _, n := range nodes {
		if d := req(t, n, fc.Now(), "g/bucket", "k", 0); d.Remaining != 1 {
			t.Errorf("%s: remaining %d at t0+100ms, want 1 (the exact bucket's)", n.name, d.Remaining)
		}
	}
}

// A gcra bucket that ages out before the first tick after it (a sync
// interval longer than the burst offset) is still shipped: the spend keeps
// a busy bucket's TAT late.
func TestGCRABucketAgedOutBeforeShippingStillShips(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	a.c.Step(fc.Now())                                                // a tick before the spends
	req(t, a, fc.Now(), "g/bucket", "k", 10)                          // TAT t0+1s
	req(t, a, fc.Now().Add(600*time.Millisecond), "g/bucket", "k", 5) // TAT t0+1.5s
	fc.Advance(1100 * time.Millisecond)                               // t0's bucket aged out at t0+1s
	step(fc, nodes)
	// Exact: TAT t0+1.5s; at t0+1.1s, floor((1.1+1−1.5)/0.1) = 6 fit.
	if d := req(t, b, fc.Now(), "g/bucket", "k", 0); d.Remaining != 6 {
		t.Fatalf("b: remaining %d, want 6 (a's spend at t0 was never shipped?)", d.Remaining)
	}
}

// A count of a bucket past its lifetime plus grace is not applied: the
// receiver may have forgotten it already (swept), and cannot tell a resend
// of what it applied from news. Applied again, an old gcra spend on a
// busy key (no idle time to take it back from) would push the TAT a second
// time: seen as lasting false denials after an owner's death, when the new
// owner relayed every bucket it still kept.
func TestCountPastLifeAndGraceNotApplied(t *testing.T) {
	fc := clock.NewFake(t0) // g/bucket: burst 10, 10/s: life 1 s
	net, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	req(t, a, fc.Now(), "g/bucket", "k", 5)
	step(fc, nodes)
	net.mu.Lock()
	old := append([]*packet.Packet(nil), net.sent...)
	net.mu.Unlock()
	for range 16 { // 4 s past life and grace, with housekeeping ticks that sweep; b stays busy
		req(t, b, fc.Now(), "g/bucket", "k", 3)
		fc.Advance(250 * time.Millisecond)
		step(fc, nodes)
	}
	before := req(t, b, fc.Now(), "g/bucket", "k", 0)
	for _, p := range old {
		b.c.HandlePacket(p)
	}
	if d := req(t, b, fc.Now(), "g/bucket", "k", 0); d.Remaining != before.Remaining || d.RetryAfter != before.RetryAfter {
		t.Fatalf("b: remaining %d, retry after %s after a's 4 s old spend came again; before it %d, %s",
			d.Remaining, d.RetryAfter, before.Remaining, before.RetryAfter)
	}
}
