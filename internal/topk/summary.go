package topk

// summary is a Space-Saving summary of at most cap keys: counters in a
// min-heap by count, indexed by key. The counters live in a slab allocated
// once, at the first add, so that a summary reused slot after slot
// allocates only the strings of the keys it takes in (the index sees a
// delete for every insert past cap, and stays its size: TestMemoryFlat). Not safe for
// concurrent use (a Window's shard lock guards it).
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
	key   string
	count uint64
	err   uint64
	pos   int // in heap
}

// add counts key once. It copies key only when key takes a counter.
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
		s.slab = append(s.slab, entry{key: string(key), count: 1, pos: len(s.heap)})
		e := &s.slab[len(s.slab)-1]
		s.heap = append(s.heap, e)
		s.index[e.key] = e
		s.up(e.pos)
		return
	}
	// Full: key takes over the smallest counter, whose count becomes its
	// error.
	e := s.heap[0]
	delete(s.index, e.key)
	e.key = string(key)
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

// reset empties the summary, keeping its slab and index for reuse.
func (s *summary) reset() {
	s.n = 0
	clear(s.index)
	clear(s.heap)
	s.heap = s.heap[:0]
	clear(s.slab) // drop the keys' strings
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
