package gossip

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/ring"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// peerOf is a memberlist node named name on 127.0.0.1:port, of incarnation
// inc, advertising the delegate protocol max dmax.
func peerOf(name string, port int, inc uint64, dmax uint8) *memberlist.Node {
	nd := member(name, port, inc, false)
	nd.DMax = dmax
	return nd
}

// keyHashes returns n well-spread key hashes.
func keyHashes(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i+1) * 0x9e3779b97f4a7c15
	}
	return out
}

// TestProfileProtocol: a node advertises the delegate protocol max of a
// state's sums, 1 with NoOwners, and speaks 0 so that any
// release joins.
func TestProfileProtocol(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want uint8
	}{
		{Config{Name: "a"}, sumsProtocol},
		{Config{Name: "a", NoOwners: true}, repairProtocol},
		{Config{Name: "a", Unsequenced: true}, sumsProtocol},
	} {
		mc := profile(tc.cfg)
		if mc.DelegateProtocolMax != tc.want || mc.DelegateProtocolMin != 0 || mc.DelegateProtocolVersion != 0 {
			t.Errorf("%+v: delegate protocol %d..%d speaking %d, want 0..%d speaking 0",
				tc.cfg, mc.DelegateProtocolMin, mc.DelegateProtocolMax, mc.DelegateProtocolVersion, tc.want)
		}
	}
}

// TestPlacementFollowsEvents drives memberlist's events directly: the
// ring holds exactly the live members, self included; a join or a
// departure changes the epoch and a meta update does not; Aggregates
// follows every live member's protocol max.
func TestPlacementFollowsEvents(t *testing.T) {
	nd := start(t, gossiptest.NewFaultNet(), "solo", func(c *Config) { c.Tune = quiet; c.ResyncAfter = -1 })
	d := (*delegate)(nd.Node)
	hs := keyHashes(2000)
	check := func(what string, live ...string) {
		t.Helper()
		want := ring.New(live)
		for _, h := range hs {
			o, s := nd.Owners(h)
			wo, ws := want.Owners(h)
			if o != wo || s != ws {
				t.Fatalf("%s: Owners(%#x) = %q, %q; want %q, %q (ring of %v)", what, h, o, s, wo, ws, live)
			}
		}
		if got := nd.Members(); !slices.Equal(got, want.Names()) {
			t.Fatalf("%s: Members %q, want %q", what, got, want.Names())
		}
	}
	check("alone", "solo")
	if !nd.Aggregates() || !nd.Repairs() {
		t.Fatalf("alone: Aggregates %v, Repairs %v; want both", nd.Aggregates(), nd.Repairs())
	}
	steps := []struct {
		what       string
		ev         func()
		moves      bool // the epoch changes
		live       []string
		aggregates bool
		repairs    bool
	}{
		{"x joins", func() { d.NotifyJoin(peerOf("x", 1, 7, ownerProtocol)) }, true, []string{"solo", "x"}, true, true},
		{"x updates its meta", func() { d.NotifyUpdate(member("x", 1, 8, false)) }, false, []string{"solo", "x"}, false, false},
		{"x updates again, current", func() { d.NotifyUpdate(peerOf("x", 1, 9, ownerProtocol)) }, false, []string{"solo", "x"}, true, true},
		{"y of the repair release joins", func() { d.NotifyJoin(peerOf("y", 2, 7, repairProtocol)) }, true, []string{"solo", "x", "y"}, false, true},
		{"y is declared dead", func() { d.NotifyLeave(peerOf("y", 2, 7, repairProtocol)) }, true, []string{"solo", "x"}, true, true},
		{"y is dead again", func() { d.NotifyLeave(peerOf("y", 2, 7, repairProtocol)) }, false, []string{"solo", "x"}, true, true},
		{"y is back, current", func() { d.NotifyJoin(peerOf("y", 3, 8, ownerProtocol)) }, true, []string{"solo", "x", "y"}, true, true},
		{"x leaves", func() { d.NotifyLeave(member("x", 1, 9, true)) }, true, []string{"solo", "y"}, true, true},
		{"y leaves", func() { d.NotifyLeave(member("y", 3, 8, true)) }, true, []string{"solo"}, true, true},
	}
	for _, st := range steps {
		before := nd.Epoch()
		st.ev()
		placed(t, nd)
		if moved := nd.Epoch() != before; moved != st.moves {
			t.Errorf("%s: epoch %d → %d; want a change: %v", st.what, before, nd.Epoch(), st.moves)
		}
		check(st.what, st.live...)
		if nd.Aggregates() != st.aggregates || nd.Repairs() != st.repairs {
			t.Errorf("%s: Aggregates %v, Repairs %v; want %v, %v", st.what, nd.Aggregates(), nd.Repairs(), st.aggregates, st.repairs)
		}
	}
}

// placed waits until nd's ring is built for its current live set: the
// placer rebuilds it in the background after a change.
func placed(t *testing.T, nd *testNode) {
	t.Helper()
	eventually(t, 5*time.Second, "the ring is rebuilt", func() bool {
		p := nd.place.Load()
		return p != nil && p.epoch == nd.epoch.Load()
	})
}

// TestPlacementInBackground: after the live set changes the ring is
// rebuilt without any caller of Owners (none of whom, holding a lock of
// its own, waits for a rebuild), and meanwhile Owners places keys on the
// previous ring, under the previous epoch.
func TestPlacementInBackground(t *testing.T) {
	nd := start(t, gossiptest.NewFaultNet(), "solo", func(c *Config) { c.Tune = quiet; c.ResyncAfter = -1 })
	d := (*delegate)(nd.Node)
	first := nd.Epoch()
	d.NotifyJoin(peerOf("x", 1, 7, ownerProtocol))
	placed(t, nd) // nobody calls Owners
	if e := nd.Epoch(); e == first || !slices.Equal(nd.Members(), []string{"solo", "x"}) {
		t.Fatalf("x joined: epoch %d (was %d), members %q; want a new epoch and solo, x", e, first, nd.Members())
	}
	second := nd.Epoch()
	want := ring.New([]string{"solo", "x"})
	nd.placeMu.Lock() // a rebuild in progress
	d.NotifyJoin(peerOf("y", 2, 7, ownerProtocol))
	if e := nd.Epoch(); e != second {
		t.Fatalf("while the ring is rebuilt Epoch is %d, want the previous %d", e, second)
	}
	for _, h := range keyHashes(100) {
		o, s := nd.Owners(h)
		if wo, ws := want.Owners(h); o != wo || s != ws {
			t.Fatalf("while the ring is rebuilt Owners(%#x) = %q, %q; want the previous ring's %q, %q", h, o, s, wo, ws)
		}
	}
	nd.placeMu.Unlock()
	placed(t, nd)
	if got := nd.Members(); !slices.Equal(got, []string{"solo", "x", "y"}) {
		t.Fatalf("y joined: members %q, want solo, x, y", got)
	}
}

// TestPlacementConcurrent: Owners and Epoch called from many goroutines
// while members come and go never see a ring older than one they saw
// before, and once the events stop every caller sees the final ring.
func TestPlacementConcurrent(t *testing.T) {
	nd := start(t, gossiptest.NewFaultNet(), "solo", func(c *Config) { c.Tune = quiet; c.ResyncAfter = -1 })
	d := (*delegate)(nd.Node)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for h := uint64(g); ; h += 0x9e3779b97f4a7c15 {
				select {
				case <-stop:
					return
				default:
				}
				e := nd.Epoch()
				if e < last {
					errs <- fmt.Errorf("epoch went back from %d to %d", last, e)
					return
				}
				last = e
				if o, _ := nd.Owners(h); o == "" {
					errs <- fmt.Errorf("no owner for %#x", h)
					return
				}
			}
		}()
	}
	for i := range 200 {
		name := fmt.Sprintf("p%d", i%20)
		if i%40 < 20 {
			d.NotifyJoin(peerOf(name, 1000+i%20, 1, ownerProtocol))
		} else {
			d.NotifyLeave(peerOf(name, 1000+i%20, 1, ownerProtocol))
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every p left last: the ring is self's alone again.
	placed(t, nd)
	for _, h := range keyHashes(100) {
		if o, s := nd.Owners(h); o != "solo" || s != "" {
			t.Fatalf("after the churn Owners(%#x) = %q, %q; want solo alone", h, o, s)
		}
	}
}

// TestOwnersMesh: in a real mesh of three every node places every key
// alike, on distinct members; when one leaves the epoch changes and no key
// is placed on it any more, the two left still agreeing.
func TestOwnersMesh(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 3, nil)
	hs := keyHashes(5000)
	agree := func(nodes []*testNode, members ...string) error {
		seen := map[string]int{}
		for _, h := range hs {
			o, s := nodes[0].Owners(h)
			if o == s || !contains(members, o) || !contains(members, s) {
				return fmt.Errorf("%s: Owners(%#x) = %q, %q; want two of %v", nodes[0].Name(), h, o, s, members)
			}
			seen[o]++
			for _, nd := range nodes[1:] {
				if o2, s2 := nd.Owners(h); o2 != o || s2 != s {
					return fmt.Errorf("Owners(%#x): %s says %q, %q; %s says %q, %q", h, nodes[0].Name(), o, s, nd.Name(), o2, s2)
				}
			}
		}
		if len(seen) != len(members) {
			return fmt.Errorf("keys placed on %v, want on each of %v", seen, members)
		}
		return nil
	}
	if err := agree(nodes, "n0", "n1", "n2"); err != nil {
		t.Fatal(err)
	}
	epochs := []uint64{nodes[0].Epoch(), nodes[1].Epoch()}
	if err := nodes[2].Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	rest := nodes[:2]
	eventually(t, 10*time.Second, "n0 and n1 see n2 go", func() bool {
		return nodes[0].Live() == 2 && nodes[1].Live() == 2
	})
	for i, nd := range rest {
		if nd.Epoch() == epochs[i] {
			t.Errorf("%s: epoch %d unchanged after n2 left", nd.Name(), epochs[i])
		}
	}
	if err := agree(rest, "n0", "n1"); err != nil {
		t.Fatal(err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSendToMesh: SendTo reaches its target alone, a sum intact over
// several datagrams, counted in Targeted; p is not modified. While every
// member reads them (Reships) its messages are numbered 1, 2, … in the
// sender's stream to that member; otherwise (an unsequenced mesh) they are
// not numbered.
func TestSendToMesh(t *testing.T) {
	for _, unsequenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsequenced=%v", unsequenced), func(t *testing.T) {
			fn := gossiptest.NewFaultNet()
			nodes := mesh(t, fn, 3, func(c *Config) { c.Unsequenced = unsequenced })
			a, b, c := nodes[0], nodes[1], nodes[2]
			if a.Reships() == unsequenced {
				t.Fatalf("Reships %v in a mesh with Unsequenced %v", a.Reships(), unsequenced)
			}
			p := &packet.Packet{Sum: true}
			for k, h := range keyHashes(300) {
				p.Names = append(p.Names, packet.Name{Hash: h, Resource: "api/search", Domain: fmt.Sprintf("tenant-%d", k)})
				p.Counts = append(p.Counts, packet.Count{Hash: h, Slot: 1, Bucket: 1_700_000_000_000, Value: uint64(k + 1)})
			}
			msgs, err := packet.Split(&packet.Packet{From: "n0", Incarnation: a.Incarnation(), Sum: true, Names: p.Names, Counts: p.Counts}, a.Budget())
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) < 3 {
				t.Fatalf("test packet fits in %d messages; want several", len(msgs))
			}
			before := a.Stats()
			if err := a.SendTo("n1", p); err != nil {
				t.Fatal(err)
			}
			if p.From != "" || p.Incarnation != 0 || p.Seq != 0 || p.Targeted {
				t.Errorf("SendTo modified p: %+v", p)
			}
			seqs := map[uint64]int{}
			got := func() map[uint64]packet.Count {
				b.rec.mu.Lock()
				defer b.rec.mu.Unlock()
				out := map[uint64]packet.Count{}
				clear(seqs)
				for _, q := range b.rec.packets {
					if q.From != "n0" || q.Full {
						continue
					}
					if !q.Sum || q.Targeted == unsequenced || (q.Seq == 0) != unsequenced || q.Incarnation != a.Incarnation() {
						t.Errorf("n1 got a message from n0 with Sum %v, Targeted %v, Seq %d, incarnation %d", q.Sum, q.Targeted, q.Seq, q.Incarnation)
					}
					seqs[q.Seq]++
					for _, c := range q.Counts {
						out[c.Hash] = c
					}
				}
				return out
			}
			eventually(t, 5*time.Second, "n1 receives the 300 sums", func() bool { return len(got()) == 300 })
			for _, want := range p.Counts {
				if g := got()[want.Hash]; g != want {
					t.Errorf("sum of %#x arrived as %+v, want %+v", want.Hash, g, want)
				}
			}
			if !unsequenced {
				for s := uint64(1); s <= uint64(len(msgs)); s++ {
					if seqs[s] != 1 {
						t.Errorf("seq %d arrived %d times, want once (seqs %v)", s, seqs[s], seqs)
					}
				}
			}
			// PacketsOut also counts messages sent again: a busy receiver may
			// ask for one that was only late.
			if s := a.Stats(); s.Targeted-before.Targeted != uint64(len(msgs)) || s.PacketsOut-before.PacketsOut != uint64(len(msgs))+s.Resent-before.Resent {
				t.Errorf("Targeted +%d, PacketsOut +%d, Resent +%d; want Targeted +%d, PacketsOut that plus Resent", s.Targeted-before.Targeted, s.PacketsOut-before.PacketsOut, s.Resent-before.Resent, len(msgs))
			}
			// n2 would have had them by now: n1 has had every one.
			if n := c.rec.count(func(q *packet.Packet) bool { return q.From == "n0" && !q.Full }); n != 0 {
				t.Errorf("n2 got %d messages sent to n1", n)
			}
		})
	}
}

// TestSumReceived: a sum reaches the handler as a sync message, and is
// dropped as a push/pull state (which would make it Full).
func TestSumReceived(t *testing.T) {
	nd := start(t, gossiptest.NewFaultNet(), "solo", func(c *Config) { c.Tune = quiet })
	d := (*delegate)(nd.Node)
	b := mustEncode(&packet.Packet{From: "x", Incarnation: 3, Sum: true, Counts: []packet.Count{{Hash: 5, Bucket: 1_700_000_000_000, Value: 9}}})
	d.NotifyMsg(b)
	eventually(t, 5*time.Second, "the sum is handled", func() bool {
		return nd.rec.count(func(p *packet.Packet) bool {
			return p.From == "x" && p.Sum && !p.Full && len(p.Counts) == 1 && p.Counts[0].Value == 9
		}) == 1
	})
	dropped := nd.Stats().Dropped
	d.MergeRemoteState(b, false)
	if n := nd.rec.from("x"); n != 1 {
		t.Errorf("a sum as a state was handled: %d packets from x", n)
	}
	if got := nd.Stats().Dropped - dropped; got != 1 {
		t.Errorf("Dropped +%d, want +1", got)
	}
}

// TestAggregatesMesh: a mesh of current nodes aggregates; a member of the
// repair release (protocol max 1) stops every node from aggregating until
// it leaves, and so does a NoOwners node, which never aggregates itself.
// Repairs is not affected.
func TestAggregatesMesh(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, nil)
	all := func(want bool) func() bool {
		return func() bool {
			for _, nd := range nodes {
				if nd.Aggregates() != want || !nd.Repairs() {
					return false
				}
			}
			return true
		}
	}
	if !all(true)() {
		t.Fatalf("a mesh of current nodes: Aggregates %v %v", nodes[0].Aggregates(), nodes[1].Aggregates())
	}
	old := start(t, fn, "old", func(c *Config) {
		c.Join = []string{nodes[0].Addr()}
		c.Tune = func(mc *memberlist.Config) {
			quick(mc)
			mc.DelegateProtocolMax = repairProtocol
		}
	})
	eventually(t, 10*time.Second, "the others see the repair-release node and stop aggregating", func() bool {
		return nodes[0].Live() == 3 && nodes[1].Live() == 3 && all(false)()
	})
	if old.Aggregates() {
		t.Error("a node advertising protocol max 1 reports Aggregates")
	}
	if err := old.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "with it gone they aggregate again", all(true))

	no := start(t, fn, "no", func(c *Config) {
		c.Join = []string{nodes[0].Addr()}
		c.NoOwners = true
	})
	eventually(t, 10*time.Second, "a NoOwners node joins and the others stop aggregating", func() bool {
		return nodes[0].Live() == 3 && nodes[1].Live() == 3 && all(false)() // old has left
	})
	if no.Aggregates() || !no.Repairs() {
		t.Errorf("NoOwners node: Aggregates %v, Repairs %v; want false, true", no.Aggregates(), no.Repairs())
	}
}

// TestSendToErrors: SendTo refuses self, a name that is not a live member
// and a packet that cannot be sent, naming the recipient; after Shutdown
// it returns ErrShutdown.
func TestSendToErrors(t *testing.T) {
	nd := start(t, gossiptest.NewFaultNet(), "solo", func(c *Config) { c.Tune = quiet; c.ResyncAfter = -1 })
	d := (*delegate)(nd.Node)
	d.NotifyJoin(peerOf("gone", 1, 1, ownerProtocol))
	d.NotifyLeave(peerOf("gone", 1, 1, ownerProtocol))
	ok := &packet.Packet{Counts: []packet.Count{{Hash: 1, Value: 1}}}
	for _, tc := range []struct {
		to   string
		p    *packet.Packet
		is   error
		text string
	}{
		{"solo", ok, ErrRecipient, `"solo" is this node`},
		{"nobody", ok, ErrRecipient, `"nobody" is not a live member (unknown)`},
		{"gone", ok, ErrRecipient, `"gone" is not a live member (dead)`},
		{"gone", nil, packet.ErrInvalid, "nil packet"},
	} {
		err := nd.SendTo(tc.to, tc.p)
		if !errors.Is(err, tc.is) || !strings.Contains(fmt.Sprint(err), tc.text) {
			t.Errorf("SendTo(%q) = %v; want %v saying %s", tc.to, err, tc.is, tc.text)
		}
	}
	d.NotifyJoin(peerOf("x", 1, 1, ownerProtocol)) // its address answers nothing: the datagram is lost, not refused
	if err := nd.SendTo("x", &packet.Packet{Sum: true, Full: true}); !errors.Is(err, packet.ErrInvalid) {
		t.Errorf("SendTo of a full sum = %v, want packet.ErrInvalid", err)
	}
	if s := nd.Stats(); s.Targeted != 0 || s.SendErrors != 0 {
		t.Errorf("refused sends counted: Targeted %d, SendErrors %d", s.Targeted, s.SendErrors)
	}
	if err := nd.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := nd.SendTo("x", ok); !errors.Is(err, ErrShutdown) {
		t.Errorf("SendTo after Shutdown = %v, want ErrShutdown", err)
	}
}

// TestTargetedRepair: half the datagrams of a targeted stream are lost;
// the receiver asks for the gaps, the sender sends them again from what it
// keeps, and every message arrives, each handled once, with no reship.
func TestTargetedRepair(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, func(c *Config) { c.Tune = quiet })
	a, b := nodes[0], nodes[1]
	if !a.Reships() || !b.Reships() {
		t.Fatal("two nodes of this build do not number targeted messages")
	}
	fn.SetDrop(0.5, rand.New(rand.NewPCG(7, 7)))
	for i := range 200 {
		if err := a.SendTo("n1", &packet.Packet{Sum: true, Counts: []packet.Count{{Hash: 100 + uint64(i), Bucket: 1_700_000_000_000, Value: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	if lost := fn.Stats().Dropped; lost < 60 {
		t.Fatalf("lost %d of 200 at p=0.5", lost)
	}
	// Asks and resends are lost too, 5% of them: a seq asked five times in
	// vain (10⁻⁵ here) would be given up for a reship, which this test's
	// handler does not make.
	fn.SetDrop(0.05, rand.New(rand.NewPCG(8, 8)))
	targeted := func() map[uint64]int {
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		got := map[uint64]int{}
		for _, p := range b.rec.packets {
			if p.From == "n0" && p.Targeted {
				for _, c := range p.Counts {
					got[c.Hash]++
				}
			}
		}
		return got
	}
	eventually(t, 10*time.Second, "every targeted message arrives", func() bool {
		if err := a.SendTo("n1", &packet.Packet{}); err != nil { // an empty follow-up, as reconcile's
			t.Fatal(err)
		}
		return len(targeted()) == 200
	})
	for h, n := range targeted() {
		if n != 1 {
			t.Errorf("hash %d handled %d times, want once", h, n)
		}
	}
	as, bs := a.Stats(), b.Stats()
	if bs.Asked == 0 || as.Resent == 0 || as.ReshipsMade != 0 || len(a.rec.reshipped()) != 0 {
		t.Errorf("n1 asked %d seqs, n0 resent %d and made %d reships: want asks, resends, no reship", bs.Asked, as.Resent, as.ReshipsMade)
	}
}

// TestReshipAsked: a member asked for a targeted message it no longer
// keeps (here: one it never sent) sends an empty message under its seq,
// so the asker stops asking, and makes a reship (ReshipTo).
func TestReshipAsked(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, func(c *Config) { c.Tune = quiet })
	a, b := nodes[0], nodes[1]
	msg := func(seq uint64) []byte {
		return mustEncode(&packet.Packet{From: "n0", Incarnation: a.Incarnation(), Seq: seq, Targeted: true,
			Counts: []packet.Count{{Hash: seq, Bucket: 1_700_000_000_000, Value: 1}}})
	}
	d := (*delegate)(b.Node)
	d.NotifyMsg(msg(1))
	d.NotifyMsg(msg(3))
	d.NotifyMsg(msg(2)) // late, not lost
	d.NotifyMsg(msg(5)) // 4 lost, and n0 never kept it
	eventually(t, 5*time.Second, "n0 makes a reship for n1", func() bool { return len(a.rec.reshipped()) >= 1 })
	// n0 answered for seq 4 with an empty message under it: n1 no longer
	// waits for it (the reship holds what it held).
	eventually(t, 5*time.Second, "n1 gets an empty message under seq 4", func() bool {
		return b.rec.count(func(p *packet.Packet) bool { return p.From == "n0" && p.Targeted && p.Seq == 4 && len(p.Counts) == 0 }) >= 1
	})
	made := len(a.rec.reshipped())
	// Past the asks' retries: once n1's receivers have no gap open it asks
	// nothing more, and once n0 handled what n1 sent it after that, n0 has
	// answered every ask n1 made.
	eventually(t, 5*time.Second, "n1 has no gap open", func() bool {
		b.inMu.Lock()
		defer b.inMu.Unlock()
		return !b.in.Pending() && !b.tin.Pending()
	})
	handledAfter(t, b.Node, "n0", a.rec)
	if got := a.rec.reshipped(); len(got) != made || got[0] != "n1" {
		t.Fatalf("reships made for %v after the gap closed, %d before", got, made)
	}
	if as := a.Stats(); as.ReshipsMade != uint64(made) {
		t.Fatalf("n0 counts %d reships made, its handler %d", as.ReshipsMade, made)
	}
	if n := b.rec.count(func(p *packet.Packet) bool { return p.From == "n0" && p.Targeted && len(p.Counts) > 0 }); n != 4 {
		t.Fatalf("n1 handled %d targeted messages with counts, want the 4 that arrived", n)
	}
}
