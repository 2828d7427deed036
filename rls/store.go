package rls

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/config"
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
// "rls:LIMIT:s" for limits per second) of one tier of that limit:
// reconcile ships a key's hits at its drift threshold (drift × LIMIT /
// nodes unshipped hits) and on its ticks, in buckets that divide the unit
// (1.2 s for the tier of a minute, 20 ms for the tier of a second, aligned
// to the epoch as the windows are), so a peer's bucket falls in the window
// it was counted in. The tier's window (a minute, or a second) is how long
// reconcile keeps a bucket for resends: a node that joins late learns only
// the last minute of a longer window from its peers' snapshots.

// ResourcePrefix starts the name of every resource this package records in
// the cluster; no configured resource has it (they are NAMESPACE/NAME).
const ResourcePrefix = "rls:"

// DefaultMaxKeys is how many counters a store keeps at most; past it, new
// keys are decided as if empty and not kept (lenient).
const DefaultMaxKeys = 1 << 20

const shards = 64

// Cluster is what a store records its hits in: reconcile.Cluster.
type Cluster interface {
	Recorder(name string, rc *config.Resource) local.Recorder
}

type window struct {
	key   string // the map's key, kept for the recorder
	start int64  // the window's start, Unix seconds
	count uint64
}

type shard struct {
	mu    sync.Mutex
	m     map[string]*window
	taken [1]int64 // the recorder's scratch, under mu
	_     [40]byte
}

// Store holds the fixed windows' counters. Safe for concurrent use.
type Store struct {
	shards  [shards]shard
	keys    atomic.Int64
	maxKeys int64
	// Lenient counts decisions made past maxKeys.
	Lenient atomic.Int64

	clu   Cluster
	drift *float64
	// ext is the extension engine in force (ext.go), nil when none.
	ext   atomic.Pointer[local.Engine]
	recMu sync.RWMutex
	recs  map[uint64]local.Recorder
}

// NewStore returns an empty store keeping at most maxKeys counters (0 =
// DefaultMaxKeys).
func NewStore(maxKeys int) *Store {
	s := &Store{maxKeys: int64(maxKeys), recs: map[uint64]local.Recorder{}}
	if s.maxKeys <= 0 {
		s.maxKeys = DefaultMaxKeys
	}
	for i := range s.shards {
		s.shards[i].m = map[string]*window{}
	}
	return s
}

// Attach records, from now on, this store's hits in c, with drift
// tolerance drift (nil = obol's default).
func (s *Store) Attach(c Cluster, drift *float64) {
	s.recMu.Lock()
	s.clu, s.drift = c, drift
	clear(s.recs)
	s.recMu.Unlock()
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

// recorder returns the cluster's recorder of limit value limit, nil when
// the store runs alone.
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
	// One tier whose window is a minute: the bucket is what reconcile
	// derives from the tier's window (a fiftieth, at most a minute), and a
	// minute's buckets (1.2 s) divide every unit from a minute up; a
	// second's limits get their own tier of a second (20 ms buckets).
	w := time.Minute
	if seconds == 1 {
		w = time.Second
	}
	rc := &config.Resource{Kind: config.KindTiers, Drift: s.drift, Tiers: []config.Tier{{Limit: int(max(limit, 1)), Window: w}}}
	r = clu.Recorder(ResourcePrefix+strconv.FormatUint(uint64(limit), 10)+unitSuffix(seconds), rc)
	s.recs[id] = r
	return r
}

func unitSuffix(seconds int64) string {
	if seconds == 1 {
		return ":s"
	}
	return ""
}

func (s *Store) shard(key []byte) *shard {
	h := uint32(2166136261)
	for _, c := range key {
		h = (h ^ uint32(c)) * 16777619
	}
	return &s.shards[h%shards]
}

// add adds n hits to key's window starting at start (Unix seconds) and
// returns the count after; n = 0 only reads. When the window is a newer
// one than the counter's, the counter starts over. rec, when not nil,
// records the hits at nowMs for the cluster.
func (s *Store) add(key []byte, start int64, n uint64, rec local.Recorder, nowMs int64) uint64 {
	sh := s.shard(key)
	sh.mu.Lock()
	w := sh.m[string(key)]
	if w == nil {
		if n == 0 {
			sh.mu.Unlock()
			return 0
		}
		if s.keys.Load() >= s.maxKeys {
			sh.mu.Unlock()
			s.Lenient.Add(1)
			return n
		}
		k := string(key)
		w = &window{key: k, start: start}
		sh.m[k] = w
		s.keys.Add(1)
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
	w.count += n
	after := w.count
	if rec != nil && n > 0 {
		sh.taken[0] = int64(min(n, 1<<62))
		rec.TierHits(w.key, nowMs, sh.taken[0], sh.taken[:], 0)
	}
	sh.mu.Unlock()
	return after
}

// ApplyCount adds a peer's n hits of key (domain) made in the bucket
// starting at at (Unix ms) of tier slot 1 (reconcile.Applier). Other slots
// and resources without ResourcePrefix are not this store's.
func (s *Store) ApplyCount(resource, domain string, slot int, at, width, n, now int64) {
	if isExt(resource) {
		if e := s.ext.Load(); e != nil {
			e.ApplyCount(resource, domain, slot, at, width, n, now)
		}
		return
	}
	if slot != 1 || n <= 0 || len(domain) < 2 || len(resource) < len(ResourcePrefix) || resource[:len(ResourcePrefix)] != ResourcePrefix {
		return
	}
	secs := unitSeconds(Unit(domain[0] - '0'))
	if secs == 0 {
		return
	}
	start := floorDiv(floorDiv(at, 1000), secs) * secs
	sh := s.shard([]byte(domain))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w := sh.m[domain]
	if w == nil {
		if s.keys.Load() >= s.maxKeys {
			return
		}
		w = &window{key: domain, start: start}
		sh.m[domain] = w
		s.keys.Add(1)
	}
	switch {
	case w.start < start:
		w.start, w.count = start, uint64(n)
	case w.start == start:
		w.count += uint64(n)
	}
}

// ApplyEntry applies a peer's tier entry of an extension limit (a fixed
// window has none).
func (s *Store) ApplyEntry(resource, domain string, slot int, at, now int64) {
	if e := s.ext.Load(); e != nil && isExt(resource) {
		e.ApplyEntry(resource, domain, slot, at, now)
	}
}

func isExt(resource string) bool {
	return len(resource) >= len(extPrefix) && resource[:len(extPrefix)] == extPrefix
}

// AddRemoteHolds and EachHold complete reconcile.Applier: no limit here
// holds copies.
func (s *Store) AddRemoteHolds(string, string, int64)                {}
func (s *Store) EachHold(func(resource, domain string, holds int64)) {}

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
		sh.mu.Unlock()
	}
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
