package local

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// store.go is the sharded key store: a fixed number of shards, each a map
// behind its own mutex, picked by a seeded hash of the domain. A key whose
// state has fully reset is dropped by sweep, so memory follows the number of
// active keys. A store holds at most max keys; a new key past that is refused
// (the engine then decides leniently and counts it).

const numShards = 256

// store maps domains to per-key state V. Safe for concurrent use.
type store[V any] struct {
	seed   maphash.Seed
	max    int64
	n      atomic.Int64
	shards [numShards]shard[V]
}

type shard[V any] struct {
	mu    sync.Mutex
	short map[shortKey]V // domains of up to shortLen bytes, held inline
	long  map[string]V
	_     [40]byte // keep hot shards on separate cache lines
}

// shortLen is the longest domain kept inline in a map key. Inline keys are
// compared without following a pointer (a cache miss on a large store) and
// cost no separate allocation.
const shortLen = 23

type shortKey struct {
	n uint8
	b [shortLen]byte
}

func mkShort(key string) (k shortKey) {
	k.n = uint8(len(key))
	copy(k.b[:], key)
	return k
}

// get returns key's value in a locked shard.
func (sh *shard[V]) get(key string) (V, bool) {
	if len(key) <= shortLen {
		v, ok := sh.short[mkShort(key)]
		return v, ok
	}
	v, ok := sh.long[key]
	return v, ok
}

// set replaces the value of a key already in a locked shard.
func (sh *shard[V]) set(key string, v V) {
	if len(key) <= shortLen {
		sh.short[mkShort(key)] = v
		return
	}
	sh.long[key] = v
}

func newStore[V any](max int) *store[V] {
	s := &store[V]{seed: maphash.MakeSeed(), max: int64(max)}
	for i := range s.shards {
		s.shards[i].short = make(map[shortKey]V)
		s.shards[i].long = make(map[string]V)
	}
	return s
}

// shard returns the locked shard of key; the caller unlocks it.
func (s *store[V]) lock(key string) *shard[V] {
	sh := &s.shards[maphash.String(s.seed, key)%numShards]
	sh.mu.Lock()
	return sh
}

// insert adds key → v to a locked shard, cloning the key (it may alias a
// request buffer). It reports false, adding nothing, when the store is full.
func (s *store[V]) insert(sh *shard[V], key string, v V) bool {
	if s.n.Add(1) > s.max {
		s.n.Add(-1)
		return false
	}
	if len(key) <= shortLen {
		sh.short[mkShort(key)] = v
	} else {
		sh.long[strings.Clone(key)] = v
	}
	return true
}

// remove deletes key from a locked shard.
func (s *store[V]) remove(sh *shard[V], key string) {
	if _, ok := sh.get(key); !ok {
		return
	}
	if len(key) <= shortLen {
		delete(sh.short, mkShort(key))
	} else {
		delete(sh.long, key)
	}
	s.n.Add(-1)
}

// sweep deletes every key for which done reports true, shard by shard.
func (s *store[V]) sweep(done func(V) bool) int {
	dropped := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, v := range sh.short {
			if done(v) {
				delete(sh.short, k)
				dropped++
			}
		}
		for k, v := range sh.long {
			if done(v) {
				delete(sh.long, k)
				dropped++
			}
		}
		sh.mu.Unlock()
	}
	s.n.Add(int64(-dropped))
	return dropped
}

// len returns the number of keys held.
func (s *store[V]) len() int { return int(s.n.Load()) }
