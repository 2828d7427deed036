package rls

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/sat"
	"github.com/obol-dev/obol/local"
)

// store.go is the storage of the fixed windows: one counter per cache key
// (the unit's digit, then the descriptor's key) holding the window it
// counts and the hits in it, this node's and its peers' together; the
// locks; and the cluster seam: what this node adds is recorded for gossip
// under the key's lock, and peers' hits are added as they arrive, so a
// decision reads the cluster's count from memory.
//
// In the cluster each limit value is a resource named "rls:LIMIT" (and
// "rls:LIMIT:s" for limits per second), which the store registers with the
// cluster (Attach, Register) as one tier of that limit: reconcile ships a
// key's hits at its drift threshold (drift × LIMIT / nodes unshipped hits,
// obol's default drift) and on its ticks, in buckets that divide the unit
// (1.2 s for the tier of a minute, 20 ms for the tier of a second, aligned
// to the epoch as the windows are), so a peer's bucket falls in the window
// it was counted in, and applies its peers' counts of it to the store
// (ApplyCount). The tier's window (a minute, or a second) is how long
// reconcile keeps a bucket for resends: a node that joins late learns only
// the last minute of a longer window from its peers' snapshots.

// ResourcePrefix starts the name of every resource this package registers
// with the cluster; no configured resource has it (they are
// NAMESPACE/NAME).
const ResourcePrefix = "rls:"

// DefaultMaxCounters is how many counters a store keeps at most (Options.MaxKeys,
// NewStore): one counter per cache key and window, over every limit of the
// service (config.DefaultMaxKeys is another bound: the keys one resource of
// the engine tracks). A new key past it first takes the place of a counter whose
// window has ended (an idle key: evictScan of its shard's counters are
// looked at, the one whose window ended first goes); when none has, it is
// counted in its shard's overflow table (below): still limited, never
// stored.
const DefaultMaxCounters = 1 << 20

const shards = 64

// The overflow table: per shard and unit, overflowSlots counters of one
// window each, a key's counter picked by its hash. Every key that found no
// room adds its hits to its slot and is decided on the slot's count: the
// sum of the hits of every key sharing the slot in the window, never less
// than the key's own, so a key past the cap is over-counted (a false
// denial, when keys collide) but never under-counted. A key that is later
// stored starts from its slot's count of the window, for the same reason.
// A table is allocated when its shard and unit first overflow: at most
// shards × 7 units × overflowSlots × 16 bytes (28 MiB).
const overflowSlots = 4096

// evictScan is how many of a full shard's counters a new key looks at for
// one whose window has ended, and evictShards how many shards after its
// own it looks in: a new key at the cap costs at most (1 + evictShards) ×
// evictScan counters looked at.
const (
	evictScan   = 32
	evictShards = 3
)

// overSlot is one counter of an overflow table.
type overSlot struct {
	start int64 // the window's start, Unix seconds
	count uint64
}

type window struct {
	key   string // the map's key, kept for the recorder
	start int64  // the window's start, Unix seconds
	count uint64
}

type shard struct {
	mu    sync.Mutex
	m     map[string]*window
	over  [8]*[overflowSlots]overSlot // per unit digit; nil until first used
	taken [1]int64                    // the recorder's scratch, under mu
	_     [40]byte
}

// Store holds the fixed windows' counters. Safe for concurrent use.
type Store struct {
	shards  [shards]shard
	keys    atomic.Int64
	maxKeys int64
	// Evicted counts counters dropped, window ended, to make room for a
	// new key at the cap.
	Evicted atomic.Int64
	// Overflowed counts the hits of keys that found no room, counted in
	// the overflow table (decisions, and peers' counts applied).
	Overflowed atomic.Int64

	clu local.Cluster // nil when the store counts alone
	// ext is the extension engine in force (ext.go), nil when none.
	ext   atomic.Pointer[local.Engine]
	recMu sync.RWMutex
	recs  map[uint64]local.Recorder
}

// NewStore returns an empty store keeping at most maxKeys counters (0 =
// DefaultMaxCounters).
func NewStore(maxKeys int) *Store {
	s := &Store{maxKeys: int64(maxKeys), recs: map[uint64]local.Recorder{}}
	if s.maxKeys <= 0 {
		s.maxKeys = DefaultMaxCounters
	}
	for i := range s.shards {
		s.shards[i].m = map[string]*window{}
	}
	return s
}

// Attach joins the store to cluster c (reconcile.Cluster): from now on
// each limit value's resource is registered with c when first used (or
// by Register), the store its applier, and its hits are recorded there;
// the extension engine a later SetConfig makes is attached to c too.
// Attach before the service's first SetConfig.
func (s *Store) Attach(c local.Cluster) {
	s.recMu.Lock()
	s.clu = c
	clear(s.recs)
	s.recMu.Unlock()
}

// cluster returns the cluster the store is attached to, nil when none.
func (s *Store) cluster() local.Cluster {
	s.recMu.RLock()
	defer s.recMu.RUnlock()
	return s.clu
}

// Register makes sure the cluster knows the resource of every limit of
// cfg before a peer's hits of it arrive.
func (s *Store) Register(cfg *Config) {
	for _, l := range cfg.limits {
		if !l.Unlimited {
			s.recorder(l.Requests, l.Seconds)
		}
	}
}

// recorder returns the cluster's recorder of limit value limit (per
// second when seconds is 1), registering it on first use; nil when the
// store runs alone.
func (s *Store) recorder(limit uint32, seconds int64) local.Recorder {
	id := uint64(limit) << 1
	if seconds == 1 {
		id |= 1
	}
	s.recMu.RLock()
	r, ok := s.recs[id]
	clu := s.clu
	s.recMu.RUnlock()
	if ok || clu == nil {
		return r
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	if r, ok := s.recs[id]; ok {
		return r
	}
	r = clu.Register(ResourcePrefix+strconv.FormatUint(uint64(limit), 10)+unitSuffix(seconds), limitSpec(limit, seconds), s)
	s.recs[id] = r
	return r
}

// limitSpec is the cluster spec of limit value limit (per second when
// seconds is 1): one tier of that limit (at least 1) whose window is a
// minute, or a second. The bucket is what reconcile derives from the
// tier's window (a fiftieth, at most a minute), and a minute's buckets
// (1.2 s) divide every unit from a minute up; a second's limits get their
// own tier of a second (20 ms buckets). Slot 0, every tier's hits, is kept
// a second, as the engine's is, and has no limit; a fixed window enters
// no tier, so no slot has entries. The drift is obol's default: the
// service's config has none.
func limitSpec(limit uint32, seconds int64) local.ClusterSpec {
	w := time.Minute
	if seconds == 1 {
		w = time.Second
	}
	return local.ClusterSpec{
		Drift:  config.DefaultDrift,
		Spans:  []local.Span{local.SlotTotal: {Hits: time.Second.Milliseconds()}, 1: {Hits: w.Milliseconds()}},
		Limits: []int64{local.SlotTotal: 0, 1: int64(max(limit, 1))},
	}
}

func unitSuffix(seconds int64) string {
	if seconds == 1 {
		return ":s"
	}
	return ""
}

// shard returns key's shard and its hash (FNV-1a): the hash's low bits
// pick the shard, the next ones the key's overflow slot.
func (s *Store) shard(key []byte) (*shard, uint32) {
	h := uint32(2166136261)
	for _, c := range key {
		h = (h ^ uint32(c)) * 16777619
	}
	return &s.shards[h%shards], h
}

// MaxKeys returns the most counters the store keeps.
func (s *Store) MaxKeys() int { return int(s.maxKeys) }

// overSlot returns key's overflow counter of unit digit u in a locked
// shard, allocating the table when create.
func (sh *shard) overSlot(u byte, h uint32, create bool) *overSlot {
	if u >= byte(len(sh.over)) {
		u = 0
	}
	t := sh.over[u]
	if t == nil {
		if !create {
			return nil
		}
		t = new([overflowSlots]overSlot)
		sh.over[u] = t
	}
	return &t[(h/shards)%overflowSlots]
}

// overCount returns the count of key's overflow slot in the window
// starting at start (0 when the slot holds another window).
func (sh *shard) overCount(u byte, h uint32, start int64) uint64 {
	if o := sh.overSlot(u, h, false); o != nil && o.start == start {
		return o.count
	}
	return 0
}

// overAdd adds n to key's overflow slot for the window starting at start
// and returns its count after; a hit of an older window than the slot's
// counts alone (as add does).
func (sh *shard) overAdd(u byte, h uint32, start int64, n uint64) uint64 {
	o := sh.overSlot(u, h, true)
	switch {
	case o.start < start:
		o.start, o.count = start, 0
	case o.start > start:
		return n
	}
	o.count = sat.Add(o.count, n)
	return o.count
}

// room reserves a counter for a new key of a locked shard at nowSec:
// under the cap, or in place of a counter whose window has ended (idle):
// of evictScan counters of the key's shard, then of each of the next
// evictShards shards that is not locked at the moment (TryLock: never
// waits, so no lock order to keep), the one whose window ended first. It
// reports false when there is none. Sweep forgets every idle counter in
// any case; this only spares a new key the wait for it.
func (s *Store) room(sh *shard, h uint32, nowSec int64) bool {
	if s.keys.Add(1) <= s.maxKeys {
		return true
	}
	s.keys.Add(-1)
	if evictIdle(sh, nowSec) {
		s.Evicted.Add(1)
		return true
	}
	for k := uint32(1); k <= evictShards; k++ {
		o := &s.shards[(h+k)%shards]
		if !o.mu.TryLock() {
			continue
		}
		ok := evictIdle(o, nowSec)
		o.mu.Unlock()
		if ok {
			s.Evicted.Add(1)
			return true
		}
	}
	return false
}

// evictIdle drops, from locked shard sh, the counter whose window ended
// first before nowSec among evictScan of them, and reports whether there
// was one.
func evictIdle(sh *shard, nowSec int64) bool {
	var victim string
	var end int64
	i := 0
	for k, w := range sh.m {
		if e := w.start + unitSeconds(Unit(k[0]-'0')); e <= nowSec && (victim == "" || e < end) {
			victim, end = k, e
		}
		if i++; i == evictScan {
			break
		}
	}
	if victim == "" {
		return false
	}
	delete(sh.m, victim)
	return true
}

// add adds n hits to key's window starting at start (Unix seconds) and
// returns the count after; n = 0 only reads. When the window is a newer
// one than the counter's, the counter starts over. rec, when not nil,
// records the hits at nowMs for the cluster. A new key at the cap takes an
// idle key's place or, when none, is counted in the overflow table (room,
// overAdd). Counts saturate at 2^64−1.
func (s *Store) add(key []byte, start int64, n uint64, rec local.Recorder, nowMs int64) uint64 {
	sh, h := s.shard(key)
	sh.mu.Lock()
	w := sh.m[string(key)]
	if w == nil {
		if n == 0 {
			c := sh.overCount(key[0]-'0', h, start)
			sh.mu.Unlock()
			return c
		}
		if !s.room(sh, h, floorDiv(nowMs, 1000)) {
			after := sh.overAdd(key[0]-'0', h, start, n)
			if rec != nil {
				sh.taken[0] = int64(min(n, 1<<62))
				rec.TierHits(string(key), nowMs, sh.taken[0], sh.taken[:], 0)
			}
			sh.mu.Unlock()
			s.Overflowed.Add(1)
			return after
		}
		k := string(key)
		w = &window{key: k, start: start, count: sh.overCount(key[0]-'0', h, start)}
		sh.m[k] = w
	}
	switch {
	case w.start < start:
		w.start, w.count = start, 0
	case w.start > start:
		// a peer's newer window arrived first: this instant's window is
		// over, and counts alone.
		sh.mu.Unlock()
		return n
	}
	w.count = sat.Add(w.count, n)
	after := w.count
	if rec != nil && n > 0 {
		sh.taken[0] = int64(min(n, 1<<62))
		rec.TierHits(w.key, nowMs, sh.taken[0], sh.taken[:], 0)
	}
	sh.mu.Unlock()
	return after
}

// ApplyCount adds a peer's n hits of key (domain) made in the bucket
// starting at at (Unix ms) of tier slot 1 of a limit value's resource
// (local.Applier: the cluster applies the resources the store registered
// to it). Other slots, and names that are no limit value's, are ignored.
// n is clamped
// to the limit + 1 of its resource ("rls:LIMIT"): a count past the limit
// already puts every window holding it over the limit, so the clamp
// changes no decision a real count makes, and a peer's claim, however
// large, does no more than that. A key that finds no room is counted in
// the overflow table, as a decision's would be.
func (s *Store) ApplyCount(resource, domain string, slot int, at, width, n, now int64) {
	if slot != 1 || n <= 0 || len(domain) < 2 {
		return
	}
	lim, ok := limitOfResource(resource)
	secs := unitSeconds(Unit(domain[0] - '0'))
	if !ok || secs == 0 {
		return
	}
	c := min(uint64(n), lim+1)
	start := floorDiv(floorDiv(at, 1000), secs) * secs
	sh, h := s.shard([]byte(domain))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w := sh.m[domain]
	if w == nil {
		if !s.room(sh, h, floorDiv(now, 1000)) {
			sh.overAdd(domain[0]-'0', h, start, c)
			s.Overflowed.Add(1)
			return
		}
		w = &window{key: domain, start: start, count: sh.overCount(domain[0]-'0', h, start)}
		sh.m[domain] = w
	}
	switch {
	case w.start < start:
		w.start, w.count = start, c
	case w.start == start:
		w.count = sat.Add(w.count, c)
	}
}

// limitOfResource returns the limit of a fixed window's resource,
// "rls:LIMIT" or "rls:LIMIT:s"; ok is false for any other name.
func limitOfResource(resource string) (uint64, bool) {
	v, ok := strings.CutPrefix(resource, ResourcePrefix)
	if !ok {
		return 0, false
	}
	if len(v) > 2 && v[len(v)-2:] == ":s" {
		v = v[:len(v)-2]
	}
	lim, err := strconv.ParseUint(v, 10, 32)
	return lim, err == nil
}

// ApplyEntry, AddRemoteHolds and EachHold complete local.Applier: a fixed
// window enters no tier, and no limit here holds copies.
func (s *Store) ApplyEntry(string, string, int, int64, int64)        {}
func (s *Store) AddRemoteHolds(string, string, int64)                {}
func (s *Store) EachHold(func(resource, domain string, holds int64)) {}

var _ local.Applier = (*Store)(nil)

// Sweep forgets the counters whose window ended before now, and what the
// extension engine has fully reset.
func (s *Store) Sweep(now time.Time) {
	if e := s.ext.Load(); e != nil {
		e.Step(now)
	}
	sec := now.Unix()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, w := range sh.m {
			if w.start+unitSeconds(Unit(k[0]-'0')) <= sec {
				delete(sh.m, k)
				s.keys.Add(-1)
			}
		}
		for u, t := range sh.over {
			if t != nil && overIdle(t, sec, unitSeconds(Unit(u))) {
				sh.over[u] = nil // every window of it ended: give its memory back
			}
		}
		sh.mu.Unlock()
	}
}

// overIdle reports whether every slot of an overflow table of a unit of
// secs seconds holds a window ended at sec.
func overIdle(t *[overflowSlots]overSlot, sec, secs int64) bool {
	for i := range t {
		if t[i].count > 0 && t[i].start+secs > sec {
			return false
		}
	}
	return true
}

// Keys returns how many counters the store keeps.
func (s *Store) Keys() int { return int(s.keys.Load()) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
