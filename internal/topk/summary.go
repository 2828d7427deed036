package topk

import "unsafe"

// summary is a Space-Saving summary of at most cap keys: counters in a
// min-heap by count, indexed by key. The counters live in a slab allocated
// once, at the first add, and each keeps the buffer its key is copied into
// for the keys that take the counter after it, so that a summary reused
// slot after slot, and a stream of new keys taking counters over, allocate
// nothing once the buffers have grown to the keys' length (the index sees
// a delete for every insert past cap, and stays its size: TestMemoryFlat).
// Not safe for concurrent use (a Window's shard lock guards it).
type summary struct {
	cap   int
	n     uint64            // adds since the last reset
	index map[string]*entry // key → its counter
	heap  []*entry          // min-heap by count
	slab  []entry           // the counters; len ≤ cap, never reallocated
}

// entry is one counter: key was counted count times, of which at most err
// may belong to the keys it took the counter from.
type entry struct {
	// key is buf's bytes as a string, without a copy: it is valid while the
	// entry holds the key, and changes when another key takes the counter
	// over. Whoever keeps a key past the shard lock copies it (Top).
	key   string
	count uint64
	err   uint64
	pos   int    // in heap
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
	if e, ok := s.index[string(key)]; ok {
		e.count++
		s.down(e.pos)
		return
	}
	if s.slab == nil {
		s.slab = make([]entry, 0, s.cap)
		s.index = make(map[string]*entry, s.cap)
	}
	if len(s.slab) < s.cap {
		s.slab = s.slab[:len(s.slab)+1] // its buffer, if any, is a reset's
		e := &s.slab[len(s.slab)-1]
		e.setKey(key)
		e.count, e.err, e.pos = 1, 0, len(s.heap)
		s.heap = append(s.heap, e)
		s.index[e.key] = e
		s.up(e.pos)
		return
	}
	// Full: key takes over the smallest counter, whose count becomes its
	// error.
	e := s.heap[0]
	delete(s.index, e.key)
	e.setKey(key)
	e.err = e.count
	e.count++
	s.index[e.key] = e
	s.down(0)
}

// min returns the smallest count: an upper bound of the count of any key
// the summary does not hold; 0 while it has room (a key it does not hold was
// then never added).
func (s *summary) min() uint64 {
	if len(s.heap) < s.cap {
		return 0
	}
	return s.heap[0].count
}

// lookup returns key's counter, nil when it has none.
func (s *summary) lookup(key string) *entry { return s.index[key] }

// reset empties the summary, keeping its slab, its counters' key buffers
// and its index for reuse.
func (s *summary) reset() {
	s.n = 0
	clear(s.index)
	clear(s.heap)
	s.heap = s.heap[:0]
	for i := range s.slab {
		s.slab[i] = entry{buf: s.slab[i].buf[:0]}
	}
	s.slab = s.slab[:0]
}

func (s *summary) less(i, j int) bool { return s.heap[i].count < s.heap[j].count }

func (s *summary) swap(i, j int) {
	h := s.heap
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}

func (s *summary) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *summary) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && s.less(r, l) {
			c = r
		}
		if !s.less(c, i) {
			return
		}
		s.swap(i, c)
		i = c
	}
}
