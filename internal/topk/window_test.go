package topk

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// t0 is the epoch of the test windows.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func newWindow(t testing.TB, cfg Config) *Window {
	t.Helper()
	w, err := New(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// render returns a snapshot's items as "key=count/err", in order.
func render(s Snapshot) string {
	var b strings.Builder
	for i, it := range s.Items {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d/%d", it.Key, it.Count, it.Err)
	}
	return b.String()
}

func TestConfigValidate(t *testing.T) {
	good := Config{Capacity: 8, Slots: 6, Span: 10 * time.Second, Shards: 2}
	tests := []struct {
		name string
		edit func(*Config)
		want []string // substrings of the error; none for a valid config
	}{
		{name: "valid", edit: func(*Config) {}},
		{name: "capacity 0", edit: func(c *Config) { c.Capacity = 0 }, want: []string{"Capacity: must be 1 to 16777216, got 0"}},
		{name: "capacity past the index's reach", edit: func(c *Config) { c.Capacity = MaxCapacity + 1 }, want: []string{"Capacity: must be 1 to 16777216, got 16777217"}},
		{name: "slots negative", edit: func(c *Config) { c.Slots = -1 }, want: []string{"Slots: must be ≥ 1, got -1"}},
		{name: "span 0", edit: func(c *Config) { c.Span = 0 }, want: []string{"Span: must be > 0, got 0s"}},
		{name: "shards 0", edit: func(c *Config) { c.Shards = 0 }, want: []string{"Shards: must be ≥ 1, got 0"}},
		{name: "every problem listed", edit: func(c *Config) { *c = Config{} }, want: []string{"Capacity", "Slots", "Span", "Shards"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			_, err := New(c, t0)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("New: %v, want ErrConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestWindowSteps adds keys at fixed instants and asks Top at others, on
// a window of 3 slots of 10 s (one shard, so that the counts are exact
// while each slot has room).
func TestWindowSteps(t *testing.T) {
	type add struct {
		at   float64
		keys string
	}
	tests := []struct {
		name      string
		cap       int
		adds      []add
		topAt     float64
		n         int
		want      string
		wantTotal uint64
		wantFrom  float64
	}{
		{name: "empty", cap: 4, topAt: 5, n: 10, want: "", wantFrom: 0},
		{name: "one slot, ranked", cap: 4, adds: []add{{1, "a b b c b a"}}, topAt: 2, n: 10,
			want: "b=3/0 a=2/0 c=1/0", wantTotal: 6},
		{name: "n cuts the list", cap: 4, adds: []add{{1, "a b b c b a"}}, topAt: 2, n: 2,
			want: "b=3/0 a=2/0", wantTotal: 6},
		{name: "ties by key", cap: 4, adds: []add{{1, "c b a"}}, topAt: 2, n: 10,
			want: "a=1/0 b=1/0 c=1/0", wantTotal: 3},
		{name: "slots add up", cap: 4, adds: []add{{1, "a a"}, {11, "a b"}, {21, "b"}}, topAt: 25, n: 10,
			want: "a=3/0 b=2/0", wantTotal: 5},
		{name: "the oldest slot leaves the window", cap: 4, adds: []add{{1, "a a"}, {11, "a b"}, {21, "b"}}, topAt: 30, n: 10,
			want: "b=2/0 a=1/0", wantTotal: 3, wantFrom: 10},
		{name: "all gone after Slots spans", cap: 4, adds: []add{{1, "a a"}}, topAt: 35, n: 10,
			want: "", wantTotal: 0, wantFrom: 10},
		{name: "a slot is reused for a later span", cap: 4, adds: []add{{1, "a a"}, {31, "b"}}, topAt: 31, n: 10,
			want: "b=1/0", wantTotal: 1, wantFrom: 10},
		{name: "an add older than the slots kept is dropped", cap: 4, adds: []add{{31, "b"}, {1, "a"}}, topAt: 31, n: 10,
			want: "b=1/0", wantTotal: 1, wantFrom: 10},
		{name: "an older add within the slots kept counts", cap: 4, adds: []add{{21, "b"}, {11, "a"}}, topAt: 21, n: 10,
			want: "a=1/0 b=1/0", wantTotal: 2},
		{name: "a later add than the query is not in its window", cap: 4, adds: []add{{1, "a"}, {15, "b"}}, topAt: 5, n: 10,
			want: "a=1/0", wantTotal: 1},
		{name: "a key missing from a full slot is charged its min", cap: 1, adds: []add{{1, "a a x"}, {11, "x"}}, topAt: 12, n: 10,
			// slot 0: x took a's counter (x=3/2); slot 1: x=1/0.
			want: "x=4/2", wantTotal: 4},
		{name: "a key absent from a full slot gets that slot's min", cap: 1, adds: []add{{1, "a a"}, {11, "b"}}, topAt: 12, n: 10,
			// b is not in slot 0 (min 2): 2+1 with an error of 2; a is not in slot 1 (min 1).
			want: "a=3/1 b=3/2", wantTotal: 3},
		{name: "before the epoch", cap: 4, adds: []add{{-1, "a"}}, topAt: -0.5, n: 10,
			want: "a=1/0", wantTotal: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWindow(t, Config{Capacity: tc.cap, Slots: 3, Span: 10 * time.Second, Shards: 1})
			for _, a := range tc.adds {
				for k := range strings.FieldsSeq(a.keys) {
					w.Add(at(a.at), []byte(k))
				}
			}
			s := w.Top(at(tc.topAt), tc.n)
			if got := render(s); got != tc.want {
				t.Errorf("top %q, want %q", got, tc.want)
			}
			if s.Total != tc.wantTotal {
				t.Errorf("total %d, want %d", s.Total, tc.wantTotal)
			}
			if want := at(tc.wantFrom); !s.From.Equal(want) && tc.topAt >= 0 {
				t.Errorf("from %v, want %v", s.From.Sub(t0), want.Sub(t0))
			}
		})
	}
}

func TestTopZeroN(t *testing.T) {
	w := newWindow(t, Config{Capacity: 4, Slots: 2, Span: time.Second, Shards: 2})
	w.Add(at(0), []byte("a"))
	if s := w.Top(at(0), 0); len(s.Items) != 0 || s.Total != 1 {
		t.Errorf("Top(0): %+v", s)
	}
	if s := w.Top(at(0), -3); len(s.Items) != 0 {
		t.Errorf("Top(-3): %+v", s)
	}
}

// TestShardsExact checks that shards split keys without changing counts:
// with room for every key, Top is exact.
func TestShardsExact(t *testing.T) {
	w := newWindow(t, Config{Capacity: 100, Slots: 2, Span: time.Second, Shards: 8})
	want := map[string]uint64{}
	for i := range 50 {
		k := fmt.Sprintf("k%d", i)
		for range i + 1 {
			w.Add(at(0.5), []byte(k))
		}
		want[k] = uint64(i + 1)
	}
	s := w.Top(at(0.9), 100)
	if len(s.Items) != 50 || s.Total != 50*51/2 {
		t.Fatalf("%d items, total %d", len(s.Items), s.Total)
	}
	for i, it := range s.Items {
		if it.Count != want[it.Key] || it.Err != 0 {
			t.Errorf("%s: %d/%d, want %d/0", it.Key, it.Count, it.Err, want[it.Key])
		}
		if i > 0 && s.Items[i-1].Count < it.Count {
			t.Errorf("not sorted at %d", i)
		}
	}
}

// TestMemoryFlat feeds a million distinct keys (and a heavy one) and checks
// that the window's live memory stays within its capacity, and that the
// heavy key is found with its count.
func TestMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("a million adds")
	}
	cfg := Config{Capacity: 128, Slots: 6, Span: 10 * time.Second, Shards: 4}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	w := newWindow(t, cfg)
	key := make([]byte, 0, 32)
	const n = 1_000_000
	for i := range n {
		now := at(float64(i) * 60 / n) // the million adds spread over a minute: every slot fills
		key = fmt.Appendf(key[:0], "domain-%08d.example", i)
		w.Add(now, key)
		if i%10 == 0 {
			w.Add(now, []byte("heavy"))
		}
	}
	grew := int64(heap()) - int64(before)
	// At most Capacity×Slots×Shards counters: an entry, its place in the order,
	// a group, an index slot and a 20-byte key each, under 200 bytes in all.
	limit := int64(cfg.Capacity*cfg.Slots*cfg.Shards) * 200
	if grew > limit {
		t.Errorf("live heap grew by %d bytes for %d distinct keys; bound %d", grew, n, limit)
	}
	for i := range w.shards {
		for j := range w.shards[i].slots {
			if s := &w.shards[i].slots[j].sum; len(s.ord) > cfg.Capacity || indexed(s) > cfg.Capacity {
				t.Fatalf("a summary holds %d counters, %d keys; capacity %d", len(s.ord), indexed(s), cfg.Capacity)
			}
		}
	}
	s := w.Top(at(60), 1)
	if len(s.Items) != 1 || s.Items[0].Key != "heavy" {
		t.Fatalf("top: %+v", s.Items)
	}
	// Within the window (the last 6 slots: [10 s, 60 s]), "heavy" was added
	// once per 10 adds.
	var inWindow uint64
	for i := range n {
		if float64(i)*60/n >= 10 && i%10 == 0 {
			inWindow++
		}
	}
	if it := s.Items[0]; it.Count-it.Err > inWindow || it.Count < inWindow || it.Err > s.Total/uint64(cfg.Capacity) {
		t.Errorf("heavy: %d/%d, true %d, total %d", it.Count, it.Err, inWindow, s.Total)
	}
	runtime.KeepAlive(w)
}

// TestConcurrent adds from several goroutines while Top reads (for the race
// detector), then checks the total.
func TestConcurrent(t *testing.T) {
	w := newWindow(t, Config{Capacity: 16, Slots: 2, Span: time.Hour, Shards: 4})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				w.Add(at(1), fmt.Appendf(nil, "k%d", (g*1000+i)%50))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			w.Top(at(1), 10)
		}
	}()
	wg.Wait()
	if s := w.Top(at(1), 100); s.Total != 4000 {
		t.Errorf("total %d, want 4000", s.Total)
	}
}

// TestAddAllocsNothing: an add allocates nothing whatever the key's length
// (domains go up to 256 bytes), for a held key and, once the counters'
// buffers have grown, for a new key taking a counter over.
func TestAddAllocsNothing(t *testing.T) {
	for _, n := range []int{1, 20, 32, 33, 200, 256} {
		w := newWindow(t, Config{Capacity: 4, Slots: 2, Span: 10 * time.Second, Shards: 1})
		held := bytes.Repeat([]byte("h"), n)
		w.Add(t0, held)
		if a := testing.AllocsPerRun(200, func() { w.Add(t0, held) }); a != 0 {
			t.Errorf("%d-byte held key: %v allocations an add", n, a)
		}
		keys := make([][]byte, 16)
		for i := range keys {
			keys[i] = append(bytes.Repeat([]byte("k"), n), byte(i))
			w.Add(t0, keys[i])
		}
		i := 0
		if a := testing.AllocsPerRun(200, func() { w.Add(t0, keys[i%len(keys)]); i++ }); a != 0 {
			t.Errorf("%d-byte keys taking counters over: %v allocations an add", n, a)
		}
	}
}
