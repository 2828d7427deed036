package reconcile

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
)

// orderTap records the domain of every count applied, yielding the
// processor after each so that concurrent applies interleave.
type orderTap struct {
	mu      sync.Mutex
	applied []string
}

func (a *orderTap) ApplyCount(_, domain string, _ int, _, _, _, _ int64) {
	a.mu.Lock()
	a.applied = append(a.applied, domain)
	a.mu.Unlock()
	runtime.Gosched()
}
func (a *orderTap) ApplyEntry(string, string, int, int64, int64) {}
func (a *orderTap) AddRemoteHolds(string, string, int64)         {}
func (a *orderTap) EachHold(func(string, string, int64))         {}

// TestAppliedInMergeOrder: packets merged by concurrent HandlePacket calls
// reach the engine in the order the table merged them, each one's changes
// together. A joiner's gcra floor does not commute with counts: a peer's
// count merged before the floor but applied after it was counted twice
// (a real joiner saw 100 tokens fewer than its seed).
func TestAppliedInMergeOrder(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := New(Options{Name: "r", Clock: clock.NewFake(now)})
	tap := &orderTap{}
	c.SetApplier(tap)
	var merged []string
	c.merged = func(from string) { merged = append(merged, "d-"+from) } // c.mu held
	const n = 64
	ms := now.UnixMilli()
	var wg sync.WaitGroup
	for i := range n {
		from := fmt.Sprintf("o%d", i)
		h := uint64(1000 + i)
		p := &packet.Packet{From: from, Incarnation: 1,
			Names: []packet.Name{{Hash: h, Resource: "t/r", Domain: "d-" + from}},
			Counts: []packet.Count{
				{Hash: h, Slot: 0, Bucket: ms - 3000, Value: 1},
				{Hash: h, Slot: 0, Bucket: ms - 2000, Value: 1},
				{Hash: h, Slot: 0, Bucket: ms - 1000, Value: 1},
			}}
		wg.Go(func() { c.HandlePacket(p) })
	}
	wg.Wait()
	if len(merged) != n || len(tap.applied) != 3*n {
		t.Fatalf("%d packets merged, %d counts applied; want %d and %d", len(merged), len(tap.applied), n, 3*n)
	}
	if got := slices.Compact(slices.Clone(tap.applied)); !slices.Equal(got, merged) {
		t.Errorf("applied in the order %v\nmerged in the order %v", got, merged)
	}
}
