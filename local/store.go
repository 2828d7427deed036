package local

import (
	"hash/maphash"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// store.go is the sharded key store. A seeded 64-bit hash of the domain picks
// one of 256 shards, each behind its own mutex, and then a slot in the
// shard's open-addressing table (linear probing). A slot holds the full hash,
// the domain inline when it is at most 23 bytes, and the value, so a decision
// finds and updates its key in place, usually within one cache line, with no
// second hash and no pointer to follow. Longer domains are kept in a plain
// map beside the table. A key whose state has fully reset is dropped by
// sweep, so memory follows the number of active keys. A store holds at most
// max keys; past that insert refuses a new key, and insertEvict first
// drops a fully reset one of its shard (the kinds then decide a key that
// found no room on its overflow state: overflowKey).

const numShards = 256

// minSlots is a shard's least table: a store spreads its first keys over
// its shards one or two apiece, and most stores (a lightly used resource,
// an agent of a large simulated cluster) stay that sparse.
const minSlots = 4

// shortLen is the longest domain kept inline in a slot.
const shortLen = 23

// store maps domains to per-key state V. Safe for concurrent use.
type store[V any] struct {
	seed maphash.Seed
	max  atomic.Int64 // a reload may change it
	n    atomic.Int64
	// pool, when set, is the namespace's count of keys that this store's
	// keys count in too, against its cap (a limit set by a request:
	// requested.go): past it insert refuses a new key as past max.
	pool *keyPool
	// shards are a power of two, numShards but for a limit set by a
	// request (definedShards); shift takes a hash's top bits to one.
	shards []shard[V]
	shift  uint8
}

type slot[V any] struct {
	hash uint64 // 0 = empty; stored hashes have their low bit set
	klen uint8
	key  [shortLen]byte
	val  V
}

type shard[V any] struct {
	mu    sync.Mutex
	slots []slot[V] // power-of-two length, at most 3/4 full
	used  int
	long  map[string]*V // domains over shortLen bytes
	_     [40]byte      // keep hot shards on separate cache lines
}

func newStore[V any](max int) *store[V] { return newStoreOf[V](max, numShards) }

// newStoreOf returns a store of at most max keys over n shards, a power of
// two up to 256.
func newStoreOf[V any](max, n int) *store[V] {
	s := &store[V]{seed: maphash.MakeSeed(), shards: make([]shard[V], n), shift: uint8(64 - bits.TrailingZeros(uint(n)))}
	s.max.Store(int64(max))
	return s
}

// ref is a found or to-be-inserted key in a locked shard.
type ref struct {
	hash uint64
	i    int // slot index, or -1 for a long key
}

// lock hashes key, locks its shard and returns both; the caller unlocks it.
func (s *store[V]) lock(key string) (*shard[V], uint64) {
	h := maphash.String(s.seed, key) | 1
	sh := &s.shards[h>>s.shift] // the top bits pick the shard; the low bits, the slot
	sh.mu.Lock()
	return sh, h
}

// home is the first slot a hash probes (bit 0 is the used mark).
func home(h uint64, mask int) int { return int(h>>1) & mask }

// find returns a pointer to key's value in a locked shard, or nil. The
// pointer is valid until the shard is unlocked.
func (sh *shard[V]) find(key string, h uint64) *V {
	if len(key) > shortLen {
		return sh.long[key]
	}
	if len(sh.slots) == 0 {
		return nil
	}
	mask := len(sh.slots) - 1
	for i := home(h, mask); ; i = (i + 1) & mask {
		sl := &sh.slots[i]
		if sl.hash == 0 {
			return nil
		}
		if sl.hash == h && int(sl.klen) == len(key) && string(sl.key[:sl.klen]) == key {
			return &sl.val
		}
	}
}

// get returns key's value in a locked shard.
func (sh *shard[V]) get(key string, h uint64) (V, bool) {
	if p := sh.find(key, h); p != nil {
		return *p, true
	}
	var zero V
	return zero, false
}

// insert adds key → v to a locked shard (key must be absent), copying the
// key (it may alias a request buffer). It reports false, adding nothing, when
// the store is full.
func (s *store[V]) insert(sh *shard[V], key string, h uint64, v V) bool {
	if s.n.Add(1) > s.max.Load() {
		s.n.Add(-1)
		return false
	}
	if p := s.pool; p != nil && p.n.Add(1) > p.max.Load() {
		p.n.Add(-1)
		s.n.Add(-1)
		return false
	}
	if len(key) > shortLen {
		if sh.long == nil {
			sh.long = make(map[string]*V)
		}
		sh.long[strings.Clone(key)] = &v
		return true
	}
	if (sh.used+1)*4 > len(sh.slots)*3 {
		sh.resize(max(minSlots, len(sh.slots)*2))
	}
	sh.place(slot[V]{hash: h, klen: uint8(len(key)), val: v}, key)
	sh.used++
	return true
}

func (sh *shard[V]) place(sl slot[V], key string) {
	if key != "" {
		copy(sl.key[:], key)
	}
	mask := len(sh.slots) - 1
	i := home(sl.hash, mask)
	for sh.slots[i].hash != 0 {
		i = (i + 1) & mask
	}
	sh.slots[i] = sl
}

func (sh *shard[V]) resize(n int) {
	old := sh.slots
	sh.slots = make([]slot[V], n)
	for i := range old {
		if old[i].hash != 0 {
			sh.place(old[i], "")
		}
	}
}

// evictScan is how many slots (and long keys) of a shard insertEvict looks
// at for an idle key, and evictShards how many shards after the new key's
// it looks in: a new key at the cap costs at most (1 + evictShards) ×
// 2 × evictScan keys looked at.
const (
	evictScan   = 32
	evictShards = 3
)

// insertEvict adds key → v to a locked shard as insert does; when the
// store is full, it first drops an idle key (idle reports true: its state
// has fully reset) among evictScan slots (and long keys) of the key's
// shard, then of each of the next evictShards shards that is not locked at
// the moment (TryLock: it never waits, so no lock order to keep). It
// reports whether the key was added and whether a key was dropped for it.
// Sweep drops every idle key in any case; this spares a new key the wait.
func (s *store[V]) insertEvict(sh *shard[V], key string, h uint64, v V, idle func(V) bool) (ok, evicted bool) {
	if s.insert(sh, key, h, v) {
		return true, false
	}
	if s.evictIdle(sh, h, idle) {
		return s.insert(sh, key, h, v), true
	}
	for k := uint64(1); k <= evictShards; k++ {
		o := &s.shards[(h>>s.shift+k)%uint64(len(s.shards))]
		if !o.mu.TryLock() {
			continue
		}
		found := s.evictIdle(o, 0, idle)
		o.mu.Unlock()
		if found {
			return s.insert(sh, key, h, v), true
		}
	}
	return false, false
}

// evictIdle drops from locked shard sh an idle key among evictScan of its
// slots from hash h's home, then among evictScan of its long keys, and
// reports whether it found one.
func (s *store[V]) evictIdle(sh *shard[V], h uint64, idle func(V) bool) bool {
	if n := len(sh.slots); n > 0 {
		mask := n - 1
		for i, k := home(h, mask), 0; k < min(evictScan, n); i, k = (i+1)&mask, k+1 {
			if sl := &sh.slots[i]; sl.hash != 0 && idle(sl.val) {
				sh.deleteAt(i)
				s.dropped(1)
				return true
			}
		}
	}
	k := 0
	for lk, lv := range sh.long {
		if idle(*lv) {
			delete(sh.long, lk)
			s.dropped(1)
			return true
		}
		if k++; k == evictScan {
			break
		}
	}
	return false
}

// overflowKeys is how many states the keys past a full store share (per
// resource): a key's is picked by its hash (overflowKey). Every key
// sharing one adds its hits to it and is decided on it, so a key past the
// cap may be over-counted, never under-counted.
const overflowKeys = 1 << 16

// overflowKey returns the key, in a resource's overflow store, of the
// state a key of hash h (in its key store) shares past the cap.
func overflowKey(h uint64) string {
	var b [8]byte
	return string(strconv.AppendUint(b[:0], (h>>1)%overflowKeys, 36))
}

// remove deletes key from a locked shard.
func (s *store[V]) remove(sh *shard[V], key string, h uint64) {
	if len(key) > shortLen {
		if _, ok := sh.long[key]; ok {
			delete(sh.long, key)
			s.dropped(1)
		}
		return
	}
	if len(sh.slots) == 0 {
		return
	}
	mask := len(sh.slots) - 1
	for i := home(h, mask); sh.slots[i].hash != 0; i = (i + 1) & mask {
		sl := &sh.slots[i]
		if sl.hash == h && int(sl.klen) == len(key) && string(sl.key[:sl.klen]) == key {
			sh.deleteAt(i)
			s.dropped(1)
			return
		}
	}
}

// deleteAt empties slot i and shifts later slots of its probe run back, so
// that no tombstones are needed (backward-shift deletion).
func (sh *shard[V]) deleteAt(i int) {
	mask := len(sh.slots) - 1
	j := i
	for {
		j = (j + 1) & mask
		if sh.slots[j].hash == 0 {
			break
		}
		// The entry at j may fill the hole at i when it probed at least as
		// far as from i to j (its home is not cyclically within (i, j]).
		if (j-home(sh.slots[j].hash, mask))&mask >= (j-i)&mask {
			sh.slots[i] = sh.slots[j]
			i = j
		}
	}
	sh.slots[i] = slot[V]{}
	sh.used--
}

// sweep deletes every key for which done reports true, shard by shard, and
// shrinks tables that have emptied out.
func (s *store[V]) sweep(done func(V) bool) int {
	dropped := 0
	for k := range s.shards {
		sh := &s.shards[k]
		sh.mu.Lock()
		before := dropped
		for i := 0; i < len(sh.slots); {
			if sh.slots[i].hash != 0 && done(sh.slots[i].val) {
				sh.deleteAt(i) // a later slot may have moved into i: look again
				dropped++
				continue
			}
			i++
		}
		for key, v := range sh.long {
			if done(*v) {
				delete(sh.long, key)
				dropped++
			}
		}
		if len(sh.slots) > minSlots && sh.used*8 < len(sh.slots) {
			sh.resize(max(minSlots, len(sh.slots)/4))
		}
		s.dropped(dropped - before) // under the shard's lock, as detach needs
		sh.mu.Unlock()
	}
	return dropped
}

// each calls fn with every key and its value, shard by shard, each shard
// locked while fn runs (fn must not use the store).
func (s *store[V]) each(fn func(key string, v V)) {
	for k := range s.shards {
		sh := &s.shards[k]
		sh.mu.Lock()
		for i := range sh.slots {
			if sl := &sh.slots[i]; sl.hash != 0 {
				fn(string(sl.key[:sl.klen]), sl.val)
			}
		}
		for key, v := range sh.long {
			fn(key, *v)
		}
		sh.mu.Unlock()
	}
}

// len returns the number of keys held.
func (s *store[V]) len() int { return int(s.n.Load()) }

// detach takes the store's keys out of its pool, and the store out of the
// pool: a limit set by a request that was dropped or forgotten
// (requested.go) no longer counts against its namespace's cap, whatever a
// decision still in flight on it adds. Every change of the store's count
// is made under a shard's lock, so with all of them held the count is
// exact.
func (s *store[V]) detach() {
	for k := range s.shards {
		s.shards[k].mu.Lock()
	}
	if s.pool != nil {
		s.pool.n.Add(-s.n.Load())
		s.pool = nil
	}
	for k := range s.shards {
		s.shards[k].mu.Unlock()
	}
}

// setPool makes the store's keys count in pool from now on; before its
// first key.
func (s *store[V]) setPool(p *keyPool) { s.pool = p }

// dropped counts n keys the store no longer holds, in its pool too. The
// caller holds the lock of the shard they were in.
func (s *store[V]) dropped(n int) {
	s.n.Add(int64(-n))
	if s.pool != nil {
		s.pool.n.Add(int64(-n))
	}
}

// has reports whether the store holds key.
func (s *store[V]) has(key string) bool {
	sh, h := s.lock(key)
	defer sh.mu.Unlock()
	return sh.find(key, h) != nil
}
