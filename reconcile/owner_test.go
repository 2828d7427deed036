package reconcile_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/ring"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// routed is a memSender that places keys on a ring of the net's nodes
// and sends to one node (reconcile.Router); what it sends to one node goes
// through the wire form (Split, Decode), as gossip's would.
type routed struct {
	memSender
	place *placement
}

type placement struct {
	ring     *ring.Ring
	epoch    uint64
	targeted []*packet.Packet
}

func (r routed) Aggregates() bool                 { return true }
func (r routed) Owners(h uint64) (string, string) { return r.place.ring.Owners(h) }
func (r routed) Epoch() uint64                    { return r.place.epoch }
func (r routed) Members() []string                { return r.place.ring.Names() }

func (r routed) SendTo(to string, p *packet.Packet) error {
	r.net.mu.Lock()
	c := r.net.nodes[to]
	cut := r.net.cut[to] || r.net.cut[r.from]
	r.net.mu.Unlock()
	if c == nil || to == r.from {
		return fmt.Errorf("no member %q", to)
	}
	msgs, err := packet.Split(p, 1200)
	if err != nil {
		return err
	}
	for _, b := range msgs {
		q, err := packet.Decode(b)
		if err != nil {
			return err
		}
		r.place.targeted = append(r.place.targeted, q)
		if !cut {
			c.HandlePacket(q)
		}
	}
	return nil
}

// ownerCluster is cluster() in owner mode from two members up.
func ownerCluster(t *testing.T, fc *clock.Fake, names ...string) (*memNet, []*node, *placement) {
	t.Helper()
	net, nodes := cluster(t, fc, names...)
	pl := &placement{ring: ring.New(names), epoch: 1}
	for i, n := range nodes {
		n.c = reconcile.New(reconcile.Options{Name: n.name, Incarnation: uint64(i + 1), Clock: fc, OwnerFrom: 2})
		n.e.Attach(n.c)
		n.c.SetSender(routed{memSender{net, n.name}, pl})
		net.nodes[n.name] = n.c
	}
	return net, nodes, pl
}

// TestOwnerModeConverges: in owner mode every node counts every other
// node's hits after two ticks (counts to the owner, sums back), no count
// travels to every peer, the owner's sums leave out the receiver's own
// hits, and the key's owner sent sums.
func TestOwnerModeConverges(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes, pl := ownerCluster(t, fc, "a", "b", "c", "d", "e")
	step(fc, nodes) // the first Step counts the live members: owner mode
	for _, n := range nodes {
		if !n.c.Owners() {
			t.Fatalf("%s is not in owner mode with 5 members, OwnerFrom 2", n.name)
		}
	}
	for i, n := range nodes {
		for range i + 1 { // a 1, b 2, … e 5: 15 hits
			req(t, n, fc.Now(), "t/one", "u", 1)
		}
	}
	before := sentCount(net)
	for range 2 {
		fc.Advance(250 * time.Millisecond)
		step(fc, nodes)
	}
	wantHits(t, nodes, fc.Now(), 15)
	for _, p := range sentSince(net, before) {
		if len(p.Counts) > 0 {
			t.Fatalf("%s sent counts to every peer in owner mode: %+v", p.From, p.Counts)
		}
	}
	owner, succ := pl.ring.Owners(reconcile.KeyHash("t/one", "u"))
	var sums int
	for _, p := range pl.targeted {
		if p.Sum {
			sums++
			if p.From != owner { // the successor stands by silently while the owner relays
				t.Fatalf("%s sent a sum of a key %s owns (%s its successor)", p.From, owner, succ)
			}
		}
	}
	if sums == 0 {
		t.Fatal("the owner sent no sums")
	}
	for _, n := range nodes {
		st := n.c.Stats()
		if n.name == owner && st.SumsSent == 0 {
			t.Errorf("owner %s: SumsSent 0", owner)
		}
		if n.name != owner && n.name != succ && st.SumsMerged == 0 {
			t.Errorf("%s merged no sum", n.name)
		}
	}
}

// TestOwnerGoesSuccessorRelays: when a key's owner goes, its successor,
// which got every count the owner did, relays on its first tick as the
// owner: the survivors count the gone owner's hits (still in the window)
// and each other's new ones.
func TestOwnerGoesSuccessorRelays(t *testing.T) {
	fc := clock.NewFake(t0)
	names := []string{"a", "b", "c", "d", "e"}
	net, nodes, pl := ownerCluster(t, fc, names...)
	step(fc, nodes)
	owner, succ := pl.ring.Owners(reconcile.KeyHash("t/one", "u"))
	for _, n := range nodes {
		req(t, n, fc.Now(), "t/one", "u", 2) // 10 hits, 2 of them the owner's
	}
	fc.Advance(250 * time.Millisecond)
	step(fc, nodes)

	// The owner dies: the survivors' ring no longer lists it.
	var live []*node
	var left []string
	for _, n := range nodes {
		if n.name != owner {
			live = append(live, n)
			left = append(left, n.name)
		}
	}
	net.mu.Lock()
	delete(net.nodes, owner)
	net.mu.Unlock()
	pl.ring, pl.epoch = ring.New(left), pl.epoch+1
	for _, n := range live {
		n.c.NodeGone(owner)
	}
	if o, _ := pl.ring.Owners(reconcile.KeyHash("t/one", "u")); o != succ {
		t.Fatalf("new owner %s, want the successor %s", o, succ)
	}
	for _, n := range live {
		req(t, n, fc.Now(), "t/one", "u", 1) // 4 more
	}
	for range 2 {
		fc.Advance(250 * time.Millisecond)
		step(fc, live)
	}
	wantHits(t, live, fc.Now(), 14)
}

// TestOwnerModeThreshold: below OwnerFrom a node fans out directly; at it,
// owner mode; it leaves owner mode only an eighth under OwnerFrom.
func TestOwnerModeThreshold(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes := cluster(t, fc, "a")
	pl := &placement{ring: ring.New([]string{"a"}), epoch: 1}
	c := reconcile.New(reconcile.Options{Name: "a", Incarnation: 1, Clock: fc, OwnerFrom: 16})
	nodes[0].e.Attach(c)
	live := &fixedLive{routed: routed{memSender{net, "a"}, pl}}
	c.SetSender(live)
	for _, tc := range []struct {
		live int
		want bool
	}{{15, false}, {16, true}, {15, true}, {14, true}, {13, false}, {15, false}, {16, true}} {
		live.n = tc.live
		c.Step(fc.Now())
		if c.Owners() != tc.want {
			t.Fatalf("%d live: owner mode %v, want %v", tc.live, c.Owners(), tc.want)
		}
	}
	def := reconcile.New(reconcile.Options{Name: "a", Incarnation: 1, Clock: fc}) // DefaultOwnerFrom: 100
	def.SetSender(live)
	for _, tc := range []struct {
		live int
		want bool
	}{{99, false}, {100, true}, {88, true}, {87, false}} { // back under 100 − 100/8
		live.n = tc.live
		def.Step(fc.Now())
		if def.Owners() != tc.want {
			t.Fatalf("default, %d live: owner mode %v, want %v", tc.live, def.Owners(), tc.want)
		}
	}
	never := reconcile.New(reconcile.Options{Name: "a", Incarnation: 1, Clock: fc, OwnerFrom: -1})
	never.SetSender(live)
	live.n = 1000
	never.Step(fc.Now())
	if never.Owners() {
		t.Fatal("OwnerFrom -1 went to owner mode")
	}
}

type fixedLive struct {
	routed
	n int
}

func (f *fixedLive) Live() int { return f.n }

// wantHits checks that every node counts want hits of t/one's key u at now.
func wantHits(t *testing.T, nodes []*node, now time.Time, want int) {
	t.Helper()
	for _, n := range nodes {
		if d := req(t, n, now, "t/one", "u", 0); d.TierHits != want {
			t.Errorf("%s counts %d hits of u, want %d", n.name, d.TierHits, want)
		}
	}
}

// TestOwnerWideReachesNonOrigins: a node that has not hit a key learns
// nothing of it while the key is far from its limit (its hits would reach
// the owner), and learns its whole count, without asking for the name,
// once the count reaches half the limit (t/one: 30, so 15): the owner
// relays to every live member then.
func TestOwnerWideReachesNonOrigins(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes, pl := ownerCluster(t, fc, "a", "b", "c", "d", "e")
	step(fc, nodes)
	owner, _, others := roles(pl, nodes, "t/one", "u")
	x, y, z := others[0], others[1], others[2]
	tick := func() { // two ticks, all within t/one's 1 s window
		for range 2 {
			fc.Advance(50 * time.Millisecond)
			step(fc, nodes)
		}
	}
	req(t, x, fc.Now(), "t/one", "u", 7)
	req(t, y, fc.Now(), "t/one", "u", 7)
	tick()
	if d := req(t, z, fc.Now(), "t/one", "u", 0); d.TierHits != 0 {
		t.Fatalf("%s counts %d hits of a key at 14 of 30 it never hit: relayed before half the limit", z.name, d.TierHits)
	}
	req(t, x, fc.Now(), "t/one", "u", 1) // 15: half the limit
	tick()
	if d := req(t, z, fc.Now(), "t/one", "u", 0); d.TierHits != 15 {
		t.Fatalf("%s counts %d hits of a key at 15 of 30 it never hit, want 15", z.name, d.TierHits)
	}
	if st := z.c.Stats(); st.NamesAsked != 0 {
		t.Errorf("%s asked for %d names: the wide relay carries the name", z.name, st.NamesAsked)
	}
	var o *node
	for _, n := range nodes {
		if n.name == owner {
			o = n
		}
	}
	if st := o.c.Stats(); st.WideRelays == 0 {
		t.Errorf("owner %s: WideRelays 0", owner)
	}
	// Wide, every further hit reaches z too; z itself is then an origin.
	req(t, y, fc.Now(), "t/one", "u", 5)
	tick()
	if d := req(t, z, fc.Now(), "t/one", "u", 10); d.Granted != 10 {
		t.Fatalf("%s granted %d of 10 at 20 of 30", z.name, d.Granted)
	}
	tick()
	wantHits(t, nodes, fc.Now(), 30)
	if d := req(t, z, fc.Now(), "t/one", "u", 1); d.Granted != 0 {
		t.Fatalf("%s granted a hit past the limit", z.name)
	}
}

// TestSuccessorStandsByNearTheLimit: while the owner relays, a key's
// successor sends nothing, near the limit or not; when the owner falls
// silent before the mesh declares it gone, the successor relays the key
// on its ticks, so every node still counts the others' new hits.
func TestSuccessorStandsByNearTheLimit(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes, pl := ownerCluster(t, fc, "a", "b", "c", "d", "e")
	step(fc, nodes)
	owner, succ, others := roles(pl, nodes, "t/one", "u")
	x, y, z := others[0], others[1], others[2]
	tick := func() {
		for range 2 {
			fc.Advance(125 * time.Millisecond)
			step(fc, nodes)
		}
	}
	sumsFrom := func(from string) int {
		var n int
		for _, p := range pl.targeted {
			if p.Sum && p.From == from {
				n++
			}
		}
		return n
	}
	req(t, x, fc.Now(), "t/one", "u", 8)
	req(t, y, fc.Now(), "t/one", "u", 8) // 16: past half the limit
	for range 2 {
		fc.Advance(50 * time.Millisecond)
		step(fc, nodes)
	}
	if n := sumsFrom(succ); n != 0 {
		t.Fatalf("successor %s sent %d sums while the owner relays", succ, n)
	}
	net.mu.Lock()
	net.cut[owner] = true // silent, not yet declared gone
	net.mu.Unlock()
	req(t, x, fc.Now(), "t/one", "u", 3)
	tick() // the successor saw x's growth: the owner should relay it by its next tick
	tick() // 375 ms on it did not: the successor relays
	for _, n := range []*node{y, z} {
		if d := req(t, n, fc.Now(), "t/one", "u", 0); d.TierHits != 19 {
			t.Errorf("%s counts %d hits with the owner silent, want 19 (the successor relays)", n.name, d.TierHits)
		}
	}
	if sumsFrom(succ) == 0 {
		t.Error("the successor sent no sums of a key past half its limit with its owner silent")
	}
}

// TestSuccessorRelaysAtOnceWhenTheOwnerIsSilent: a key near its limit
// whose owner sent no sum within three flush gaps and 10 ms of another
// origin's growth past the relay threshold (the owner flushes within one)
// is relayed by its successor at that threshold, as the owner would, not
// only on its ticks; within that time the successor leaves it to the owner.
func TestSuccessorRelaysAtOnceWhenTheOwnerIsSilent(t *testing.T) {
	for _, tc := range []struct {
		silence time.Duration
		want    int
	}{
		{20 * time.Millisecond, 16},  // the owner may still flush (three flush gaps and 10 ms: 40 ms)
		{100 * time.Millisecond, 19}, // growth past the relay threshold unanswered: it relays at once
		{400 * time.Millisecond, 19}, // past a tick and a quarter (312 ms) as well
	} {
		t.Run(tc.silence.String(), func(t *testing.T) {
			fc := clock.NewFake(t0)
			net, nodes, pl := ownerCluster(t, fc, "a", "b", "c", "d", "e")
			step(fc, nodes)
			owner, succ, others := roles(pl, nodes, "t/one", "u")
			s := byName(nodes, succ)
			x, y := others[0], others[1]
			req(t, x, fc.Now(), "t/one", "u", 8)
			req(t, y, fc.Now(), "t/one", "u", 8) // 16 of 30: past half the limit
			for range 2 {
				fc.Advance(50 * time.Millisecond)
				step(fc, nodes)
			}
			net.mu.Lock()
			net.cut[owner] = true // silent, not yet declared gone
			net.mu.Unlock()
			req(t, x, fc.Now(), "t/one", "u", 1)
			x.c.Flush(fc.Now()) // to the owner (lost) and the successor, which awaits the owner's sum
			s.c.Flush(fc.Now())
			fc.Advance(tc.silence)
			req(t, x, fc.Now(), "t/one", "u", 2)
			x.c.Flush(fc.Now())
			s.c.Flush(fc.Now())
			if d := req(t, y, fc.Now(), "t/one", "u", 0); d.TierHits != tc.want {
				t.Errorf("%s silent for %s: %s counts %d hits before any tick, want %d", owner, tc.silence, y.name, d.TierHits, tc.want)
			}
		})
	}
}

// onceRouted is a routed sender whose streams, to every peer and to one
// member, are repaired (reconcile.Repairer, reconcile.TargetedRepairer).
type onceRouted struct{ routed }

func (onceRouted) Repairs() bool { return true }
func (onceRouted) Reships() bool { return true }

// onceCluster is ownerCluster with repaired streams.
func onceCluster(t *testing.T, fc *clock.Fake, names ...string) (*memNet, []*node, *placement) {
	t.Helper()
	net, nodes, pl := ownerCluster(t, fc, names...)
	for _, n := range nodes {
		n.c.SetSender(onceRouted{routed{memSender{net, n.name}, pl}})
	}
	return net, nodes, pl
}

// TestOwnerShipsOnceWhenTargetsRepair: with numbered targeted streams a
// change goes to its owner and successor once, and is relayed once; 1
// and 4 ticks after, each member sent something gets an empty follow-up
// (its seq shows a lost last message); a member that lost a
// message and asks for a reship (ReshipTo) gets every live count and sum
// owed to it again.
func TestOwnerShipsOnceWhenTargetsRepair(t *testing.T) {
	fc := clock.NewFake(t0)
	net, nodes, pl := onceCluster(t, fc, "a", "b", "c", "d")
	step(fc, nodes)
	h := reconcile.KeyHash("t/one", "u")
	owner, _, others := roles(pl, nodes, "t/one", "u")
	x, y := others[0], others[1]
	req(t, x, fc.Now(), "t/one", "u", 3)
	req(t, y, fc.Now(), "t/one", "u", 2)
	mark := len(pl.targeted)
	tick := func() {
		fc.Advance(50 * time.Millisecond)
		step(fc, nodes)
	}
	tick()
	tick() // the relay of the counts that reached the owner in the first tick
	wantHits(t, nodes, fc.Now(), 5)
	for range 6 {
		tick()
	}
	counts := map[string]int{} // messages of counts of u, by sender
	empties := map[string]int{}
	for _, p := range pl.targeted[mark:] {
		switch {
		case len(p.Counts) == 0:
			empties[p.From]++
		case !p.Sum && p.Counts[0].Hash == h:
			counts[p.From]++
		}
	}
	if counts[x.name] != 2 || counts[y.name] != 2 { // once to the owner, once to the successor
		t.Errorf("counts of u sent: %v; want each origin's twice (owner and successor), once each", counts)
	}
	// Follow-ups 1 and 4 ticks after the last message (16 is past this
	// test's 8 ticks), to the owner and to the successor.
	if empties[x.name] != 4 || empties[owner] == 0 {
		t.Errorf("empty follow-ups: %v; want four from %s (two to the owner, two to the successor) and some from the owner", empties, x.name)
	}
	// x lost the owner's sum: it counts only its own hits until a reship.
	var o *node
	for _, n := range nodes {
		if n.name == owner {
			o = n
		}
	}
	net.mu.Lock()
	net.cut[x.name] = true
	net.mu.Unlock()
	req(t, y, fc.Now(), "t/one", "u", 4)
	tick()
	tick()
	net.mu.Lock()
	net.cut[x.name] = false
	net.mu.Unlock()
	if d := req(t, x, fc.Now(), "t/one", "u", 0); d.TierHits != 5 {
		t.Fatalf("%s counts %d hits while cut off, want 5", x.name, d.TierHits)
	}
	o.c.ReshipTo(x.name)
	if d := req(t, x, fc.Now(), "t/one", "u", 0); d.TierHits != 9 {
		t.Fatalf("%s counts %d hits after the owner's reship, want 9", x.name, d.TierHits)
	}
}

// roles returns the owner and successor of key resource/domain and the
// other nodes, in order.
func roles(pl *placement, nodes []*node, resource, domain string) (owner, succ string, others []*node) {
	owner, succ = pl.ring.Owners(reconcile.KeyHash(resource, domain))
	for _, n := range nodes {
		if n.name != owner && n.name != succ {
			others = append(others, n)
		}
	}
	return owner, succ, others
}

// byName returns the node named name, nil for none.
func byName(nodes []*node, name string) *node {
	for _, n := range nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// TestHandoverOutlivesAWave: a wave of a rolling deploy stops an origin
// with the key's owner and successor, the only members that had its
// counts. The origin's Handover, before it leaves, gave them to the next
// two members of the key's ring walk, so the survivors count its hits
// (without it they counted none of them). In direct fan-out, and with
// nothing counted, Handover sends nothing.
func TestHandoverOutlivesAWave(t *testing.T) {
	fc := clock.NewFake(t0)
	names := []string{"a", "b", "c", "d", "e", "f"}
	net, nodes, pl := ownerCluster(t, fc, names...)
	step(fc, nodes)
	byName := map[string]*node{}
	for _, n := range nodes {
		byName[n.name] = n
	}
	walk := pl.ring.Walk(nil, reconcile.KeyHash("t/one", "u"), len(names))
	origin := byName[walk[5]] // neither owner, successor nor next
	if got := origin.c.Handover(fc.Now()); got != 0 {
		t.Fatalf("handed over %d keys with nothing counted", got)
	}
	req(t, origin, fc.Now(), "t/one", "u", 16) // over half the limit: relayed to every member (wide)
	fc.Advance(100 * time.Millisecond)
	step(fc, nodes)
	if got := origin.c.Handover(fc.Now()); got != 1 {
		t.Fatalf("handed over %d keys, want 1", got)
	}
	var live []*node
	var left []string
	gone := []string{origin.name, walk[0], walk[1]}
	for _, n := range nodes {
		if !slices.Contains(gone, n.name) {
			live = append(live, n)
			left = append(left, n.name)
		}
	}
	net.mu.Lock()
	for _, g := range gone {
		delete(net.nodes, g)
	}
	net.mu.Unlock()
	pl.ring, pl.epoch = ring.New(left), pl.epoch+1
	for _, n := range live {
		for _, g := range gone {
			n.c.NodeGone(g)
		}
	}
	for range 2 {
		fc.Advance(100 * time.Millisecond)
		step(fc, live)
	}
	wantHits(t, live, fc.Now(), 16) // within the tier's 1 s window

	// Direct fan-out: every peer has every count.
	_, direct := cluster(t, fc, "x", "y", "z")
	step(fc, direct)
	req(t, direct[0], fc.Now(), "t/one", "u", 1)
	if got := direct[0].c.Handover(fc.Now()); got != 0 {
		t.Fatalf("direct fan-out: handed over %d keys, want 0", got)
	}
}

// joinState is n's push/pull state as a joiner decodes it (Join set).
func joinState(t *testing.T, n *node) *packet.Packet {
	t.Helper()
	p := n.c.Snapshot()
	p.From, p.Incarnation, p.Full = n.name, n.c.Incarnation(), true
	b, err := packet.EncodeState(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := packet.DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	q.Join = true
	return q
}

// TestJoinerTakesSeedSums: in owner mode a node knows a key it does not
// own by its owner's sums; its push/pull state carries them (with its own
// count added), so a node that joins through it counts a key near its
// limit from the join on, not from the owner's next sum. A node that has
// counted in a bucket itself skips the seed's sum of it, which may hold
// that count already.
func TestJoinerTakesSeedSums(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes, pl := ownerCluster(t, fc, "a", "b", "c", "d", "e")
	step(fc, nodes)
	_, _, others := roles(pl, nodes, "t/one", "u")
	x, y, z := others[0], others[1], others[2]
	tick := func() {
		for range 2 {
			fc.Advance(50 * time.Millisecond)
			step(fc, nodes)
		}
	}
	req(t, x, fc.Now(), "t/one", "u", 7)
	req(t, y, fc.Now(), "t/one", "u", 9) // 16 of 30: wide, relayed to z too
	tick()
	req(t, z, fc.Now(), "t/one", "u", 2)
	tick()
	wantHits(t, nodes, fc.Now(), 18)
	st := joinState(t, z)
	if len(st.Sums) == 0 {
		t.Fatalf("%s's state carries no sums of a key it knows by its owner's sums", z.name)
	}

	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	f := &node{name: "f", c: reconcile.New(reconcile.Options{Name: "f", Incarnation: 99, Clock: fc, OwnerFrom: 2}), e: local.New(cfg)}
	f.e.Attach(f.c)
	f.c.HandlePacket(st)
	if d := req(t, f, fc.Now(), "t/one", "u", 0); d.TierHits != 18 {
		t.Fatalf("a joiner through %s counts %d hits, want 18 (its sum 16 and its own 2)", z.name, d.TierHits)
	}

	// y counted 9 in the bucket; z's sum holds them: taken, they would
	// count twice (27).
	y.c.HandlePacket(joinState(t, z))
	if d := req(t, y, fc.Now(), "t/one", "u", 0); d.TierHits != 18 {
		t.Fatalf("%s counts %d hits after a join state from %s, want 18", y.name, d.TierHits, z.name)
	}
}
