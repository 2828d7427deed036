package topk

import "unsafe"

// summary is a Space-Saving summary of at most cap keys, kept as a
// Stream-Summary (Metwally et al.'s own structure): every add is O(1). The
// counters, indexed by key, are ordered by count, the largest first, in
// ord; the counters of one count are a run of ord, a group, that knows
// where it begins and ends. Counts only ever grow by one, so an add swaps
// its counter to the front of its group and either joins the group before
// (which holds the next count) or starts a group of its own there. The
// smallest counter is the last of ord, and a new key appended with a count
// of 1 keeps ord in order.
//
// Keys are found through an index of the summary's own (index.go).
//
// The counters live in a slab allocated once, at the first add, and each
// keeps the buffer its key is copied into for the keys that take the
// counter after it, so that a summary reused slot after slot, and a stream
// of new keys taking counters over, allocate nothing once the buffers have
// grown to the keys' length (the index sees a delete for every insert past
// cap, and stays its size: TestMemoryFlat).
//
// It replaced a min-heap, whose sift on every add cost O(log cap) pointer
// hops: BenchmarkAdd/uniform (keys drawn from twice the capacity, the
// agent's /v1/top under uniform load) and BenchmarkAdd/new measure it.
// Not safe for concurrent use (a Window's shard lock guards it).
type summary struct {
	cap    int
	n      uint64   // adds since the last reset
	index  index    // key → its counter
	ord    []*entry // the counters by count, the largest first
	groups []group  // len(groups) ≤ cap; free ones are chained
	free   int32    // first free group, −1 when none
	slab   []entry  // the counters; len ≤ cap, never reallocated
}

// group is the run ord[first..last] of the counters of one count. A free
// group's first is the next free one.
type group struct{ first, last int32 }

// entry is one counter: key was counted count times, of which at most err
// may belong to the keys it took the counter from.
type entry struct {
	// key is buf's bytes as a string, without a copy: it is valid while the
	// entry holds the key, and changes when another key takes the counter
	// over. Whoever keeps a key past the shard lock copies it (Top).
	key   string
	count uint64
	err   uint64
	hash  uint64 // key's, in the index
	at    int32  // in the slab
	pos   int32  // in ord
	grp   int32  // in groups
	buf   []byte // key's bytes; kept for the next key of this counter
}

// setKey makes key e's key, copied into e's buffer. The index must not
// hold e's previous key (its bytes are overwritten).
func (e *entry) setKey(key []byte) {
	e.buf = append(e.buf[:0], key...)
	e.key = unsafe.String(unsafe.SliceData(e.buf), len(e.buf))
}

// add counts key once. It copies key only when key takes a counter, into
// that counter's buffer.
func (s *summary) add(key []byte) {
	s.n++
	if s.slab == nil {
		s.slab = make([]entry, 0, s.cap)
		s.ord = make([]*entry, 0, s.cap)
		s.groups = make([]group, 0, s.cap)
		s.free = -1
		s.index.init(s.cap)
	}
	h := s.index.hash(key)
	// key as a string without a copy (string(key) as an argument copies
	// keys over 32 bytes): find keeps no reference to it.
	if e := s.index.find(h, unsafe.String(unsafe.SliceData(key), len(key)), s.slab); e != nil {
		s.inc(e)
		return
	}
	if len(s.slab) < s.cap {
		s.slab = s.slab[:len(s.slab)+1] // its buffer, if any, is a reset's
		e := &s.slab[len(s.slab)-1]
		e.setKey(key)
		e.count, e.err, e.hash = 1, 0, h
		e.at, e.pos = int32(len(s.slab)-1), int32(len(s.ord))
		s.ord = append(s.ord, e)
		s.index.insert(h, e.at)
		// Every count is at least 1: e is the smallest, last of ord.
		if e.pos > 0 && s.ord[e.pos-1].count == 1 {
			e.grp = s.ord[e.pos-1].grp
			s.groups[e.grp].last = e.pos
		} else {
			e.grp = s.newGroup(e.pos)
		}
		return
	}
	// Full: key takes over the smallest counter, whose count becomes its
	// error.
	e := s.ord[len(s.ord)-1]
	s.index.remove(e.hash, e.at)
	e.setKey(key)
	e.err, e.hash = e.count, h
	s.index.insert(h, e.at)
	s.inc(e)
}

// inc adds one to e's count, keeping ord in order and the groups true.
func (s *summary) inc(e *entry) {
	g := e.grp
	f := s.groups[g].first
	if e.pos != f { // to the front of its group
		o := s.ord[f]
		s.ord[f], s.ord[e.pos] = e, o
		o.pos, e.pos = e.pos, f
	}
	e.count++
	alone := s.groups[g].last == f
	if !alone {
		s.groups[g].first = f + 1
	}
	if f > 0 && s.ord[f-1].count == e.count { // join the group before
		ng := s.ord[f-1].grp
		s.groups[ng].last = f
		e.grp = ng
		if alone {
			s.freeGroup(g)
		}
		return
	}
	if !alone { // a group of its own; alone, g is already that
		e.grp = s.newGroup(f)
	}
}

// newGroup returns a group of ord[at] alone.
func (s *summary) newGroup(at int32) int32 {
	g := s.free
	if g < 0 {
		s.groups = append(s.groups, group{})
		g = int32(len(s.groups) - 1)
	} else {
		s.free = s.groups[g].first
	}
	s.groups[g] = group{first: at, last: at}
	return g
}

func (s *summary) freeGroup(g int32) {
	s.groups[g].first = s.free
	s.free = g
}

// min returns the smallest count: an upper bound of the count of any key
// the summary does not hold; 0 while it has room (a key it does not hold was
// then never added).
func (s *summary) min() uint64 {
	if len(s.ord) < s.cap {
		return 0
	}
	return s.ord[len(s.ord)-1].count
}

// lookup returns key's counter, nil when it has none.
func (s *summary) lookup(key string) *entry {
	if s.slab == nil {
		return nil
	}
	return s.index.find(s.index.hashString(key), key, s.slab)
}

// reset empties the summary, keeping its slab, its counters' key buffers
// and its index for reuse.
func (s *summary) reset() {
	s.n = 0
	s.index.reset()
	clear(s.ord)
	s.ord = s.ord[:0]
	s.groups = s.groups[:0]
	s.free = -1
	for i := range s.slab {
		s.slab[i] = entry{buf: s.slab[i].buf[:0]}
	}
	s.slab = s.slab[:0]
}
