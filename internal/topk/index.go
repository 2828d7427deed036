package topk

import (
	"hash/maphash"
	"math/bits"
)

// index finds a summary's counter by key: open addressing with linear
// probing over a table of a power of two slots, at least twice the
// summary's capacity, so at most half full. A slot holds its counter's
// place in the slab plus one (0: empty) and the low half of its key's
// hash: that rules most other keys out without reading their bytes, and
// gives the slot's home (the slot its probe starts at) to a deletion
// without reading the counter.
// Deletion shifts the slots after it back rather than leaving tombstones,
// so a table that sees a delete for every insert never degrades.
//
// Each counter keeps its key's hash, so an add hashes its key once:
// looking it up, and inserting it when it takes a counter over, whose old
// key is deleted by the hash it kept. With a Go map, the lookup, the
// delete and the insert each hashed a key, and the map took 75% of
// BenchmarkAdd/uniform's time: 97–100 ns an add with it, 80–82 ns with
// the index.
// The seed is the summary's own (maphash.MakeSeed), so a client cannot
// choose keys that collide.
type index struct {
	seed  maphash.Seed
	mask  uint64
	slots []islot
}

type islot struct {
	tag uint32 // the hash's low 32 bits: home is tag & mask
	at  int32  // the counter's place in the slab + 1; 0: empty
}

// init makes an empty index for up to capacity keys.
func (x *index) init(capacity int) {
	x.seed = maphash.MakeSeed()
	n := 1 << bits.Len(uint(2*capacity-1)) // the power of two ≥ 2·capacity
	x.mask = uint64(n - 1)
	x.slots = make([]islot, n)
}

func (x *index) hash(key []byte) uint64       { return maphash.Bytes(x.seed, key) }
func (x *index) hashString(key string) uint64 { return maphash.String(x.seed, key) }

// find returns the counter of slab holding key, whose hash is h; nil when
// none does.
func (x *index) find(h uint64, key string, slab []entry) *entry {
	tag := uint32(h)
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		sl := x.slots[i]
		if sl.at == 0 {
			return nil
		}
		if e := &slab[sl.at-1]; sl.tag == tag && e.key == key {
			return e
		}
	}
}

// insert indexes the counter at slab[at], whose key (not indexed) hashes
// to h.
func (x *index) insert(h uint64, at int32) {
	i := h & x.mask
	for x.slots[i].at != 0 {
		i = (i + 1) & x.mask
	}
	x.slots[i] = islot{tag: uint32(h), at: at + 1}
}

// remove drops the counter at slab[at], indexed under the hash h, and
// shifts back the slots of the probe run after it that may move.
func (x *index) remove(h uint64, at int32) {
	i := h & x.mask
	for n := uint64(0); x.slots[i].at != at+1; n++ {
		if n > x.mask { // never: the summary removes only what it indexed
			panic("topk: removing a counter the index does not hold")
		}
		i = (i + 1) & x.mask
	}
	for j := i; ; {
		j = (j + 1) & x.mask
		sl := x.slots[j]
		if sl.at == 0 {
			break
		}
		// sl may fill the hole at i unless its home slot lies in (i, j]:
		// then a probe from home never passes i.
		if home := uint64(sl.tag) & x.mask; (j-home)&x.mask >= (j-i)&x.mask {
			x.slots[i] = sl
			i = j
		}
	}
	x.slots[i] = islot{}
}

// reset empties the index, keeping its table.
func (x *index) reset() { clear(x.slots) }
