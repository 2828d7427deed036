package gossip

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// TestRepairFillsLoss: half the datagrams of a numbered stream are lost;
// the receiver asks for the gaps and the origin sends them again, so
// every message arrives, each merged once.
func TestRepairFillsLoss(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, func(c *Config) { c.Tune = quiet })
	a, b := nodes[0], nodes[1]
	if !a.Repairs() || !b.Repairs() {
		t.Fatal("two nodes of this build do not number their messages")
	}
	fn.SetDrop(0.5, rand.New(rand.NewPCG(5, 5)))
	all := &packet.Packet{}
	for i := range 200 {
		c := packet.Count{Hash: 100 + uint64(i), Value: 1}
		all.Counts = append(all.Counts, c)
		if err := a.Send(&packet.Packet{Counts: []packet.Count{c}}); err != nil {
			t.Fatal(err)
		}
	}
	// a's state, should b give up on a seq and resync (five asks lost in
	// a row, or their answers: rare, not impossible at these losses).
	a.rec.mu.Lock()
	a.rec.snap = all
	a.rec.mu.Unlock()
	lost := fn.Stats().Dropped
	if lost < 60 {
		t.Fatalf("lost %d of 200 at p=0.5", lost)
	}
	// The asks and the resends are lost half the time too: the receiver
	// retries. The last message may be lost: the next one shows its gap.
	fn.SetDrop(0.2, rand.New(rand.NewPCG(6, 6)))
	eventually(t, 10*time.Second, "every count arrives", func() bool {
		if err := a.Send(&packet.Packet{}); err != nil { // an empty message, as an idle tick's
			t.Fatal(err)
		}
		return b.rec.count(func(p *packet.Packet) bool { return p.From == "n0" && p.Full && len(p.Counts) == 200 }) > 0 ||
			len(b.rec.hashes("n0")) == 200
	})
	merged := b.rec.count(func(p *packet.Packet) bool { return p.From == "n0" && !p.Full && len(p.Counts) > 0 })
	if merged > 200 {
		t.Errorf("%d messages with counts handed to the handler, want each of the 200 at most once", merged)
	}
	as, bs := a.Stats(), b.Stats()
	if bs.Asked == 0 || as.Resent == 0 || bs.RepairResyncs > 1 {
		t.Errorf("b asked for %d seqs, a resent %d messages, b resynced %d times: want asks, resends, and at most one resync", bs.Asked, as.Resent, bs.RepairResyncs)
	}
	t.Logf("lost %d, asked %d, resent %d, duplicates %d, resyncs %d", lost, bs.Asked, as.Resent, bs.Duplicates, bs.RepairResyncs)
}

// TestRepairResyncsPastTheGap: a gap wider than a receiver asks for
// message by message (a long cut) is filled by a push/pull.
func TestRepairResyncsPastTheGap(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, func(c *Config) { c.Tune = quiet })
	a, b := nodes[0], nodes[1]
	if err := a.Send(&packet.Packet{Counts: []packet.Count{{Hash: 1, Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the first message arrives", func() bool { return b.rec.has("n0", false, 1, 1) })
	fn.SetDrop(1, nil)
	for range 300 {
		if err := a.Send(&packet.Packet{Counts: []packet.Count{{Hash: 2, Value: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	fn.SetDrop(0, nil)
	before := b.rec.fulls("n0")
	if err := a.Send(&packet.Packet{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b resyncs with a", func() bool { return b.rec.fulls("n0") > before })
	if s := b.Stats(); s.RepairResyncs == 0 || s.Asked != 0 {
		t.Errorf("b: %d repair resyncs, %d seqs asked; want a resync and no asks", s.RepairResyncs, s.Asked)
	}
}

// TestRepairWaitsForEveryPeer: a node of an earlier release (its delegate
// protocol max 0) makes the others send unsequenced messages, which it
// reads; once it is gone they number them again. A node configured
// Unsequenced never numbers its own.
func TestRepairWaitsForEveryPeer(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, nil)
	old := start(t, fn, "old", func(c *Config) {
		c.Join = []string{nodes[0].Addr()}
		c.Tune = func(mc *memberlist.Config) {
			quick(mc)
			mc.DelegateProtocolMax = 0
		}
	})
	eventually(t, 10*time.Second, "the others see the old node and stop numbering", func() bool {
		return nodes[0].Live() == 3 && nodes[1].Live() == 3 && !nodes[0].Repairs() && !nodes[1].Repairs()
	})
	if err := nodes[0].Send(&packet.Packet{Counts: []packet.Count{{Hash: 9, Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the old node gets an unsequenced message", func() bool {
		return old.rec.count(func(p *packet.Packet) bool { return p.From == "n0" && !p.Full && p.Seq == 0 && len(p.Counts) == 1 }) == 1
	})
	if err := old.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "with the old node gone they number again", func() bool {
		return nodes[0].Repairs() && nodes[1].Repairs()
	})
	un := start(t, fn, "un", func(c *Config) {
		c.Join = []string{nodes[0].Addr()}
		c.Unsequenced = true
	})
	eventually(t, 10*time.Second, "an Unsequenced node joins", func() bool { return nodes[0].Live() == 3 })
	if un.Repairs() || !nodes[0].Repairs() {
		t.Fatalf("Repairs: the Unsequenced node %v, n0 %v; want false, true", un.Repairs(), nodes[0].Repairs())
	}
}

// names is a recorder that can tell names (NameSource).
type names struct {
	*recorder
	mu    sync.Mutex
	known map[uint64]packet.Name
	asked [][]uint64
}

func (n *names) Names(hashes []uint64) []packet.Name {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked = append(n.asked, hashes)
	var out []packet.Name
	for _, h := range hashes {
		if nm, ok := n.known[h]; ok {
			out = append(out, nm)
		}
	}
	return out
}

// TestAskNames: a node asks a peer for the names of hashes; the peer's
// handler tells the ones it knows, in a message to the asker alone.
func TestAskNames(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	src := &names{recorder: &recorder{}, known: map[uint64]packet.Name{7: {Hash: 7, Resource: "api/x", Domain: "tenant-7"}}}
	trA, err := fn.Listen()
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Name: "a", Transport: trA, Tune: quick, RejoinInterval: -1}, src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	b := start(t, fn, "b", func(c *Config) { c.Join = []string{a.Addr()} })
	c := start(t, fn, "c", func(c *Config) { c.Join = []string{a.Addr()} })
	eventually(t, 10*time.Second, "the mesh forms", func() bool { return a.Live() == 3 && b.Live() == 3 && c.Live() == 3 })
	b.AskNames("a", a.Incarnation(), []uint64{7, 8})
	eventually(t, 5*time.Second, "b learns the name of 7", func() bool {
		return b.rec.count(func(p *packet.Packet) bool {
			return p.From == "a" && len(p.Names) == 1 && p.Names[0] == src.known[7]
		}) == 1
	})
	b.AskNames("a", a.Incarnation()+1, []uint64{7}) // another incarnation's: not answered
	handledAfter(t, b.Node, "a", src.recorder)
	src.mu.Lock()
	asks := len(src.asked)
	src.mu.Unlock()
	if asks != 1 {
		t.Errorf("the handler was asked %d times, want once", asks)
	}
	if n := c.rec.count(func(p *packet.Packet) bool { return len(p.Names) > 0 && p.From == "a" && !p.Full }); n != 0 {
		t.Errorf("c got %d name messages meant for b", n)
	}
	if s := a.Stats(); s.NamesSent != 1 || b.Stats().NamesAsked != 3 {
		t.Errorf("a told %d names, b asked %d: want 1 and 3", s.NamesSent, b.Stats().NamesAsked)
	}
}

// TestDuplicateNotMergedTwice: a numbered message that arrives twice is
// handed to the handler once.
func TestDuplicateNotMergedTwice(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, func(c *Config) { c.Tune = quiet })
	b := nodes[1]
	msg := func(seq uint64) []byte {
		m, err := packet.Split(&packet.Packet{From: "n0", Incarnation: nodes[0].Incarnation(), Seq: seq, Counts: []packet.Count{{Hash: 3, Value: seq}}}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return m[0]
	}
	for _, s := range []uint64{1, 2, 2, 1} {
		b.receive(msg(s))
	}
	if n := b.rec.count(func(p *packet.Packet) bool { return p.From == "n0" && !p.Full && p.Seq != 0 }); n != 2 {
		t.Fatalf("handled %d numbered messages, want 2", n)
	}
	if d := b.Stats().Duplicates; d != 2 {
		t.Fatalf("Duplicates = %d, want 2", d)
	}
}
