package topk

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrConfig is the error of New for a Config it cannot run.
var ErrConfig = errors.New("topk: bad config")

// MaxCapacity bounds Config.Capacity: a summary's index keeps a counter's
// place as an int32 and finds a slot's home in 32 bits of its hash.
const MaxCapacity = 1 << 24

// Config is the shape of a Window. Memory is at most Capacity × Slots ×
// Shards counters (about 120 bytes each with a 20-byte key; a counter keeps
// room for the longest key it has held), whatever the number of distinct
// keys.
type Config struct {
	// Capacity is the counters of one summary (one slot of one shard), 1 to
	// MaxCapacity: the error bound is N/Capacity for N adds in the window.
	Capacity int
	// Slots is the number of summaries the window rotates, ≥ 1.
	Slots int
	// Span is the time one slot covers, > 0. Top covers the slot of its
	// instant and the Slots−1 before it: between (Slots−1)·Span and
	// Slots·Span of time.
	Span time.Duration
	// Shards splits the keys by a hash among that many independently
	// locked sets of slots, ≥ 1: concurrent adds of different keys rarely
	// wait on one another. The bound stays N/Capacity (a shard sees at
	// most N adds); memory grows with Shards.
	Shards int
}

// Validate returns every problem of c, joined, each wrapping ErrConfig and
// naming the field, its value and what is expected; nil when c is valid.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, got any, want string) {
		errs = append(errs, fmt.Errorf("%w: %s: must be %s, got %v", ErrConfig, field, want, got))
	}
	if c.Capacity < 1 || c.Capacity > MaxCapacity {
		bad("Capacity", c.Capacity, fmt.Sprintf("1 to %d", MaxCapacity))
	}
	if c.Slots < 1 {
		bad("Slots", c.Slots, "≥ 1")
	}
	if c.Span <= 0 {
		bad("Span", c.Span, "> 0")
	}
	if c.Shards < 1 {
		bad("Shards", c.Shards, "≥ 1")
	}
	return errors.Join(errs...)
}

// Window counts keys over a sliding window of time and answers which were
// the heaviest. Slot k covers [epoch + k·Span, epoch + (k+1)·Span). Make one
// with New; the zero value is not usable. Safe for concurrent use.
type Window struct {
	cfg    Config
	epoch  time.Time
	seed   maphash.Seed
	shards []shard
}

type shard struct {
	mu    sync.Mutex
	slots []slot
	// cur is the slot of the latest span counted, covering [lo, hi)
	// nanoseconds after the epoch: an add in it skips the divisions that
	// find a slot. nil until the first add.
	cur    *slot
	lo, hi int64
}

// slot is one summary and the index of the span it covers; used is false
// until the slot first counts.
type slot struct {
	idx  int64
	used bool
	sum  summary
}

// New returns an empty window of cfg whose slots are aligned on epoch (any
// instant: the server's start, say), or cfg's problems (ErrConfig).
func New(cfg Config, epoch time.Time) (*Window, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Window{cfg: cfg, epoch: epoch, seed: maphash.MakeSeed(), shards: make([]shard, cfg.Shards)}
	for i := range w.shards {
		sl := make([]slot, cfg.Slots)
		for j := range sl {
			sl[j].sum.cap = cfg.Capacity
		}
		w.shards[i].slots = sl
	}
	return w, nil
}

// Config returns the window's config.
func (w *Window) Config() Config { return w.cfg }

// index returns the slot index of t: ⌊(t − epoch)/Span⌋.
func (w *Window) index(t time.Time) int64 {
	d, span := int64(t.Sub(w.epoch)), int64(w.cfg.Span)
	if d < 0 {
		return (d - span + 1) / span
	}
	return d / span
}

func (w *Window) shardOf(key []byte) *shard {
	if len(w.shards) == 1 {
		return &w.shards[0]
	}
	return &w.shards[maphash.Bytes(w.seed, key)%uint64(len(w.shards))]
}

// Add counts key once at now. key is copied when it is kept. An add older
// than the slots kept (now before the oldest slot of its shard, which the
// clock going back can cause) is dropped.
func (w *Window) Add(now time.Time, key []byte) {
	d := int64(now.Sub(w.epoch))
	sh := w.shardOf(key)
	sh.mu.Lock()
	if s := sh.cur; s != nil && d >= sh.lo && d < sh.hi {
		s.sum.add(key)
		sh.mu.Unlock()
		return
	}
	if s := w.slotOf(sh, d); s != nil {
		s.sum.add(key)
	}
	sh.mu.Unlock()
}

// slotOf returns the slot of sh for the instant d nanoseconds after the
// epoch, starting its span if the slot held an earlier one; nil when the
// slot holds a later span (d is too old to count). sh.mu is held.
func (w *Window) slotOf(sh *shard, d int64) *slot {
	span := int64(w.cfg.Span)
	idx := d / span
	if d < 0 {
		idx = (d - span + 1) / span
	}
	n := int64(len(sh.slots))
	s := &sh.slots[(idx%n+n)%n]
	switch {
	case s.used && s.idx == idx:
	case !s.used || s.idx < idx: // a span that is over: start this one
		s.sum.reset()
		s.idx, s.used = idx, true
	default: // s holds a later span
		return nil
	}
	if sh.cur == nil || idx >= sh.cur.idx {
		sh.cur, sh.lo, sh.hi = s, idx*span, (idx+1)*span
	}
	return s
}

// Item is one key of a Top: its count in the window is at least Count−Err
// and at most Count.
type Item struct {
	Key   string
	Count uint64
	Err   uint64
}

// Snapshot is the answer of Top.
type Snapshot struct {
	// Items are the heaviest keys, by Count (the largest first; ties by
	// key).
	Items []Item
	// Total is the number of adds in the window, exactly.
	Total uint64
	// From is where the window begins (the start of its oldest slot, or the
	// epoch when that is later); it ends at the instant Top was asked at.
	From time.Time
}

// Top returns the n heaviest keys over the window ending at now: the slot
// of now and the Slots−1 before it (adds at instants after now, in the
// slot of now, are counted too). Every key whose count in the window
// exceeds Total/Capacity is among the keys Top ranks, so it is returned
// when n is at least the number of such keys. n ≤ 0 returns no items (but
// Total and From).
func (w *Window) Top(now time.Time, n int) Snapshot {
	idx := w.index(now)
	lo := idx - int64(w.cfg.Slots) + 1
	snap := Snapshot{From: w.epoch.Add(time.Duration(lo) * w.cfg.Span)}
	if snap.From.Before(w.epoch) {
		snap.From = w.epoch
	}
	var items []Item
	live := make([]*summary, 0, w.cfg.Slots)
	seen := map[string]bool{}
	for i := range w.shards {
		sh := &w.shards[i]
		sh.mu.Lock()
		first := len(items)
		live = live[:0]
		for j := range sh.slots {
			if s := &sh.slots[j]; s.used && s.idx >= lo && s.idx <= idx {
				live = append(live, &s.sum)
				snap.Total += s.sum.n
			}
		}
		clear(seen)
		for _, s := range live {
			for _, e := range s.ord {
				if seen[e.key] {
					continue
				}
				seen[e.key] = true
				it := Item{Key: e.key}
				for _, o := range live {
					if oe := o.lookup(e.key); oe != nil {
						it.Count += oe.count
						it.Err += oe.err
					} else {
						m := o.min()
						it.Count += m
						it.Err += m
					}
				}
				items = append(items, it)
			}
		}
		// The keys alias the counters' buffers, which later adds rewrite:
		// keep the shard's n heaviest (a key is counted in one shard
		// alone, so the window's n heaviest are among them), copied.
		mine := items[first:]
		sortItems(mine)
		mine = mine[:min(max(n, 0), len(mine))]
		for k := range mine {
			mine[k].Key = strings.Clone(mine[k].Key)
		}
		items = items[:first+len(mine)]
		sh.mu.Unlock()
	}
	sortItems(items)
	snap.Items = items[:min(max(n, 0), len(items))]
	return snap
}

// sortItems sorts items by Count, the largest first; ties by key.
func sortItems(items []Item) {
	slices.SortFunc(items, func(a, b Item) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
}
