package gossip

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// TestFaultDropAndDelay: SetDrop loses datagrams (seeded, so the split is
// reproducible) and SetDelay holds them back.
func TestFaultDropAndDelay(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 2, func(c *Config) {
		c.Tune = quiet
		c.Unsequenced = true // nothing asks for what was lost
	})
	a, b := nodes[0], nodes[1]

	fn.SetDrop(1, nil)
	if err := a.Send(&packet.Packet{Counts: []packet.Count{{Hash: 1, Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if got := fn.Stats().Dropped; got != 1 {
		t.Fatalf("Dropped = %d, want 1", got)
	}

	fn.SetDrop(0.5, rand.New(rand.NewPCG(9, 9)))
	before := fn.Stats()
	for i := range 200 {
		if err := a.Send(&packet.Packet{Counts: []packet.Count{{Hash: 100 + uint64(i), Value: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	lost := fn.Stats().Dropped - before.Dropped
	if lost < 60 || lost > 140 {
		t.Fatalf("lost %d of 200 at p=0.5", lost)
	}
	eventually(t, 5*time.Second, "the other half arrives", func() bool { return len(b.rec.hashes("n0")) == 200-int(lost) })

	fn.SetDrop(0, nil)
	const delay = 150 * time.Millisecond
	fn.SetDelay(delay)
	sent := time.Now()
	if err := a.Send(&packet.Packet{Counts: []packet.Count{{Hash: 2, Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the delayed packet arrives", func() bool { return b.rec.has("n0", false, 2, 2) })
	if took := time.Since(sent); took < delay {
		t.Fatalf("arrived after %v, before the %v delay", took, delay)
	}
	if fn.Stats().Delayed == 0 {
		t.Fatal("Delayed = 0")
	}
	if b.rec.has("n0", false, 1, 1) {
		t.Fatal("the dropped packet arrived")
	}
}
