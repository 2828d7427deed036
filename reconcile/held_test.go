package reconcile_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

const hourConfig = `
resources:
  h/tiers:
    kind: tiers
    tiers: "1000,3600,3600,0"
  h/gcra:
    kind: gcra
    burst: 1000
    count: 1000
    period: 1h
  h/prison:
    kind: tiers
    tiers: "5,60,60,0,1,600,600,0"
`

// churnNet is a memNet whose nodes come and go: start adds a node and has
// it join through a live one (push/pull both ways, through the state's
// wire form), stop takes one away (its peers hear it is gone).
type churnNet struct {
	t   *testing.T
	fc  *clock.Fake
	cfg *config.Config
	net *memNet
	inc uint64
	up  map[string]*node
}

func newChurn(t *testing.T) *churnNet {
	t.Helper()
	cfg, err := config.Parse([]byte(hourConfig))
	if err != nil {
		t.Fatal(err)
	}
	return &churnNet{t: t, fc: clock.NewFake(t0), cfg: cfg, inc: 100,
		net: &memNet{nodes: map[string]*reconcile.Cluster{}, cut: map[string]bool{}}, up: map[string]*node{}}
}

// state is n's push/pull state as a peer decodes it.
func (cn *churnNet) state(n *node) *packet.Packet {
	cn.t.Helper()
	p := n.c.Snapshot()
	p.From, p.Incarnation, p.Full = n.name, n.c.Incarnation(), true
	b, err := packet.EncodeState(p)
	if err != nil {
		cn.t.Fatal(err)
	}
	q, err := packet.DecodeState(b)
	if err != nil {
		cn.t.Fatal(err)
	}
	q.Join = true // start exchanges states as a join does
	return q
}

func (cn *churnNet) start(name, via string) *node {
	cn.t.Helper()
	cn.inc++
	c := reconcile.New(reconcile.Options{Name: name, Incarnation: cn.inc, Clock: cn.fc})
	e := local.New(cn.cfg)
	e.Attach(c)
	n := &node{name, c, e}
	if v := cn.up[via]; v != nil {
		v.c.HandlePacket(cn.state(n))
		n.c.HandlePacket(cn.state(v))
	}
	c.SetSender(memSender{cn.net, name})
	cn.net.mu.Lock()
	cn.net.nodes[name] = c
	cn.net.mu.Unlock()
	cn.up[name] = n
	return n
}

func (cn *churnNet) stop(name string) {
	n := cn.up[name]
	n.c.Step(cn.fc.Now()) // what a clean stop ships last
	cn.net.mu.Lock()
	delete(cn.net.nodes, name)
	cn.net.mu.Unlock()
	delete(cn.up, name)
	for _, o := range cn.up {
		o.c.NodeGone(name)
	}
}

func (cn *churnNet) step() {
	for _, n := range cn.up {
		n.c.Step(cn.fc.Now())
	}
}

// remaining is what n would still grant res/dom now.
func (cn *churnNet) remaining(n *node, res, dom string) int64 {
	cn.t.Helper()
	d, err := n.e.Request(cn.fc.Now(), res, dom, 0, 0)
	if err != nil {
		cn.t.Fatal(err)
	}
	return int64(d.Remaining)
}

func (cn *churnNet) expect(res, dom string, want int64, when string) {
	cn.t.Helper()
	if want < 0 { // as the control node, which never restarts, sees it
		want = cn.remaining(cn.up["ctl"], res, dom)
	}
	for name, n := range cn.up {
		if got := cn.remaining(n, res, dom); got != want {
			cn.t.Errorf("%s: %s sees %d left of %s, want %d", when, name, got, res, want)
		}
	}
}

func TestRollingRestartKeepsCounts(t *testing.T) {
	for _, sameNames := range []bool{true, false} {
		t.Run(fmt.Sprintf("same_names=%v", sameNames), func(t *testing.T) {
			cn := newChurn(t)
			names := []string{"a", "b", "c"}
			cn.start("a", "")
			cn.start("b", "a")
			cn.start("c", "a")
			cn.start("ctl", "a") // makes no hits and never restarts: sees every count
			for _, name := range names {
				n := cn.up[name]
				for range 200 {
					for _, res := range []string{"h/tiers", "h/gcra"} {
						if d, err := n.e.Request(cn.fc.Now(), res, "u", 1, 1); err != nil || d.Granted != 1 {
							t.Fatalf("%s rejected a hit under its limit: %+v %v", name, d, err)
						}
					}
				}
				cn.fc.Advance(10 * time.Millisecond)
			}
			cn.step()
			cn.expect("h/tiers", "u", 400, "before the roll")
			cn.expect("h/gcra", "u", -1, "before the roll")
			if got := cn.remaining(cn.up["ctl"], "h/gcra", "u"); got < 400 || got > 410 {
				t.Fatalf("the control node sees %d left of h/gcra, want 400 (a few more: remote spends are placed at their bucket's start)", got)
			}
			for i, name := range names {
				cn.fc.Advance(30 * time.Second)
				cn.stop(name)
				next := name
				if !sameNames {
					next = fmt.Sprintf("%s-%d", name, i)
				}
				via := names[(i+1)%len(names)]
				if !sameNames && i > 0 {
					via = fmt.Sprintf("%s-%d", names[i-1], i-1)
				}
				cn.start(next, via)
				cn.step()
				cn.expect("h/tiers", "u", 400, "after restarting "+name)
				cn.expect("h/gcra", "u", -1, "after restarting "+name)
			}
			// And a full window later every count has gone, everywhere.
			cn.fc.Advance(time.Hour)
			cn.step()
			cn.expect("h/tiers", "u", 1000, "an hour later")
		})
	}
}

func TestJoinerLearnsDeadOriginsAndEntries(t *testing.T) {
	cn := newChurn(t)
	cn.start("a", "")
	cn.start("b", "a")
	a := cn.up["a"]
	// a enters the prison tier (a 10-minute tier entry) and spends 5 of the first tier.
	for range 6 {
		if _, err := a.e.Request(cn.fc.Now(), "h/prison", "p", 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	for range 90 {
		if _, err := a.e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	cn.step()
	// b hits the tier a entered: b has counts of it and no entry of its own.
	for range 10 {
		if _, err := cn.up["b"].e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	cn.step()
	cn.stop("a") // a dies: b keeps its counts
	cn.fc.Advance(5 * time.Second)
	j := cn.start("j", "b") // j never heard from a
	if got := cn.remaining(j, "h/tiers", "u"); got != 900 {
		t.Fatalf("the joiner sees %d left, want 900: a dead origin's counts and entries must pass on, entries before counts", got)
	}
	d, err := j.e.Request(cn.fc.Now(), "h/prison", "p", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Granted != 0 {
		t.Fatalf("the joiner granted a domain in prison on another node: %+v", d)
	}
	// Passing the same state again, and b's own packets, add nothing.
	j.c.HandlePacket(cn.state(cn.up["b"]))
	cn.step()
	cn.step()
	if got := cn.remaining(j, "h/tiers", "u"); got != 900 {
		t.Fatalf("after a second state, %d left, want 900 (counted twice?)", got)
	}
	if s := j.c.Stats(); s.HeldOrigins != 1 || s.HeldStates == 0 {
		t.Fatalf("stats: %+v, want one held origin (a) and a state merged", s)
	}
}

func TestStateOfEarlierSelfNotCountedTwice(t *testing.T) {
	cn := newChurn(t)
	cn.start("a", "")
	cn.start("b", "a")
	a := cn.up["a"]
	for range 100 {
		a.e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1)
	}
	cn.step()
	saved := a.c.Snapshot()
	saved.From, saved.Incarnation, saved.Full = "a", a.c.Incarnation(), true
	cn.stop("a")
	a2 := cn.start("a", "b") // the same name, a new incarnation: b passes on a's old counts
	if got := cn.remaining(a2, "h/tiers", "u"); got != 900 {
		t.Fatalf("a restarted sees %d left, want 900", got)
	}
	// Its state file says the same: nothing more.
	if n := a2.c.Restore(saved); n != 0 {
		t.Fatalf("Restore added %d counts that peers had passed on already", n)
	}
	if got := cn.remaining(a2, "h/tiers", "u"); got != 900 {
		t.Fatalf("after Restore, %d left, want 900", got)
	}
	// b hears a2's own first message: a's old counts are retired, not lost.
	a2.e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1)
	cn.step()
	if got := cn.remaining(cn.up["b"], "h/tiers", "u"); got != 899 {
		t.Fatalf("b sees %d left, want 899", got)
	}
	j := cn.start("j", "b")
	if got := cn.remaining(j, "h/tiers", "u"); got != 899 {
		t.Fatalf("a joiner sees %d left, want 899 (both incarnations of a)", got)
	}
}

func TestRestoreAlone(t *testing.T) {
	cn := newChurn(t)
	a := cn.start("a", "")
	for range 100 {
		a.e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1)
	}
	for range 6 {
		a.e.Request(cn.fc.Now(), "h/prison", "p", 1, 1)
	}
	saved := cn.state(a)
	cn.stop("a")
	cn.fc.Advance(90 * time.Second) // the prison's first tier (60 s) ended meanwhile
	a2 := cn.start("a", "")
	if n := a2.c.Restore(saved); n == 0 {
		t.Fatal("Restore added nothing")
	}
	if got := cn.remaining(a2, "h/tiers", "u"); got != 900 {
		t.Fatalf("after a restart alone with its state, %d left, want 900", got)
	}
	if d, _ := a2.e.Request(cn.fc.Now(), "h/prison", "p", 1, 1); d.Granted != 0 {
		t.Fatalf("the prison tier entered before the restart no longer holds: %+v", d)
	}
	// A state older than every window restores nothing.
	cn.fc.Advance(2 * time.Hour)
	a3 := cn.start("a", "")
	a3.c.Restore(saved)
	if got := cn.remaining(a3, "h/tiers", "u"); got != 1000 {
		t.Fatalf("a state from before the window restored counts: %d left, want 1000", got)
	}
}

// routerSender is a memSender that also sends to one member (a
// reconcile.Router), never in owner mode.
type routerSender struct {
	memSender
	to map[string][]*packet.Packet
}

func (s *routerSender) Aggregates() bool               { return false }
func (s *routerSender) Owners(uint64) (string, string) { return "", "" }
func (s *routerSender) Epoch() uint64                  { return 0 }
func (s *routerSender) Members() []string              { return nil }
func (s *routerSender) SendTo(to string, p *packet.Packet) error {
	// As gossip.Node numbers it when every member reads targeted
	// messages: counts (and names) only.
	cp := *p
	cp.Targeted, cp.Seq = true, 1
	if _, err := packet.Split(&cp, 1400); err != nil {
		return err
	}
	s.to[to] = append(s.to[to], p)
	return nil
}

// TestWelcomeSendsRecentCounts: a member that joined is sent the counts
// this node changed lately, shipped or not yet (changed this very tick),
// and nothing when it changed none.
func TestWelcomeSendsRecentCounts(t *testing.T) {
	cn := newChurn(t)
	a := cn.start("a", "")
	rs := &routerSender{memSender: memSender{cn.net, "a"}, to: map[string][]*packet.Packet{}}
	a.c.SetSender(rs)
	a.c.Welcome("j0")
	if len(rs.to["j0"]) != 0 {
		t.Fatalf("a node with no counts welcomed with %+v", rs.to["j0"])
	}
	for range 7 {
		a.e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1)
	}
	a.c.Welcome("j1") // before any tick: the counts are due next tick
	cn.step()
	a.c.Welcome("j2")
	cn.fc.Advance(time.Minute)
	for range 50 {
		cn.step()
	}
	a.c.Welcome("j3") // long after the change: the seed's state has it
	for _, j := range []string{"j1", "j2"} {
		ps := rs.to[j]
		if len(ps) != 1 {
			t.Fatalf("%s: %d packets, want 1", j, len(ps))
		}
		var slot1 uint64
		for _, c := range ps[0].Counts {
			if c.Slot == 1 {
				slot1 += c.Value
			}
		}
		if slot1 != 7 || len(ps[0].Names) != 1 {
			t.Fatalf("%s: welcome %+v, want the 7 hits of tier 1 with the key's name", j, ps[0])
		}
	}
	if len(rs.to["j3"]) != 0 {
		t.Fatalf("a change older than the welcome span was sent: %+v", rs.to["j3"])
	}
	if s := a.c.Stats(); s.Welcomes != 2 {
		t.Fatalf("Welcomes %d, want 2", s.Welcomes)
	}
}

// TestJoinerTakesGCRADebt: a gcra key busy for longer than its burst's
// drain time carries a debt no count still held shows (they age out after
// that time); a node that joins takes the seed's TAT as a floor, so it
// does not see a full bucket where the mesh sees an empty one. A peer's
// later state changes nothing for an older node.
func TestJoinerTakesGCRADebt(t *testing.T) {
	cfg, err := config.Parse([]byte("resources:\n  s/g:\n    kind: gcra\n    burst: 10\n    count: 10\n    period: 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	cn := newChurn(t)
	cn.cfg = cfg
	a := cn.start("a", "")
	// 20 tokens a second against 10 for 30 s: the bucket stays empty.
	for range 600 {
		a.e.Request(cn.fc.Now(), "s/g", "k", 1, 1)
		cn.fc.Advance(50 * time.Millisecond)
		if cn.fc.Now().UnixMilli()%250 == 0 {
			cn.step()
		}
	}
	want := cn.remaining(a, "s/g", "k")
	if want > 1 {
		t.Fatalf("a sees %d left, want at most 1", want)
	}
	j := cn.start("j", "a")
	if got := cn.remaining(j, "s/g", "k"); got != want {
		t.Fatalf("the joiner sees %d left of a bucket the mesh has (nearly) empty, want %d as a sees", got, want)
	}
}

// hostileState is a state from a peer m that passes on claims about other
// origins.
func hostileState(held ...packet.Held) *packet.Packet {
	return &packet.Packet{From: "m", Incarnation: 1, Full: true, Held: held,
		Names: []packet.Name{{Hash: reconcile.KeyHash("h/tiers", "u"), Resource: "h/tiers", Domain: "u"}}}
}

// TestHeldClaimDoesNotMoveALiveOrigin: a peer's state claiming a later
// incarnation of an origin this node hears from changes nothing of how it
// hears that origin (found by attacking the state merge: the claim made
// every later packet of the real origin stale); a claim dated far ahead is
// dropped.
func TestHeldClaimDoesNotMoveALiveOrigin(t *testing.T) {
	cn := newChurn(t)
	a := cn.start("a", "")
	r := cn.start("r", "a")
	for range 100 {
		a.e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1)
	}
	cn.step()
	h := reconcile.KeyHash("h/tiers", "u")
	r.c.HandlePacket(hostileState(packet.Held{From: "a", Incarnation: 1 << 62,
		Marks: []packet.Mark{{Hash: h, Slot: 1, At: cn.fc.Now().Add(100 * 365 * 24 * time.Hour).UnixMilli()}}}))
	for range 5 {
		for range 10 {
			a.e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1)
		}
		cn.fc.Advance(time.Second)
		cn.step()
	}
	if got, want := cn.remaining(r, "h/tiers", "u"), cn.remaining(a, "h/tiers", "u"); got != want || want != 850 {
		t.Fatalf("r sees %d left, a %d; want 850 both: a claim cut a live origin off", got, want)
	}
	if s := r.c.Stats(); s.Stale != 0 {
		t.Fatalf("r dropped %d of a's packets as stale", s.Stale)
	}
}

// TestIncarnationBackNotCountedTwice: an origin whose record moved to a
// later incarnation (a peer's claim while it was gone) and whose real
// incarnation speaks again takes back the counts kept of it, instead of
// applying them a second time.
func TestIncarnationBackNotCountedTwice(t *testing.T) {
	cn := newChurn(t)
	a := cn.start("a", "")
	r := cn.start("r", "a")
	for range 100 {
		a.e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1)
	}
	cn.step()
	r.c.NodeGone("a") // a partition: r takes a for dead
	h := reconcile.KeyHash("h/tiers", "u")
	r.c.HandlePacket(hostileState(packet.Held{From: "a", Incarnation: 1 << 62,
		Counts: []packet.Count{{Hash: h, Slot: 1, Bucket: cn.fc.Now().UnixMilli() / 72000 * 72000, Value: 1}}}))
	for range 3 { // the partition heals: a's own messages again
		a.e.Request(cn.fc.Now(), "h/tiers", "u", 1, 1)
		cn.fc.Advance(time.Second)
		cn.step()
	}
	// a made 103; the claim may add its 1 (a peer's counts are not
	// bounded yet), never a's 100 again.
	if got := cn.remaining(r, "h/tiers", "u"); got < 1000-104 || got > 1000-103 {
		t.Fatalf("r sees %d left after a came back, want 897 or 896 (a's 103, and the claim's 1)", got)
	}
}
