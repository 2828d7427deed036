package clustersim

// converge.go follows sampled hits until every live peer's engine counts
// them. A sample is the first hit of a (origin, key, bucket): any count of
// that bucket applied at a peer includes it, so the engine tap (tap.go)
// needs no running totals.

type bucketKey struct {
	origin int32
	key    int32
	bucket int64 // ms
}

type sample struct {
	at        int64 // ns
	last      int64 // ns: when a live peer last counted it
	got       bool  // some live peer counted it
	seen      []uint64
	remaining int
}

type converge struct {
	n       int
	pending map[bucketKey]*sample
	lags    []int64
	dropped int
}

func newConverge(n int) *converge {
	return &converge{n: n, pending: make(map[bucketKey]*sample)}
}

// add starts following the hit of bk made at at, to be counted by every
// node of live but the origin.
func (c *converge) add(bk bucketKey, at int64, live func(int) bool) {
	s := &sample{at: at, seen: make([]uint64, (c.n+63)/64)}
	for i := range c.n {
		if i != int(bk.origin) && live(i) {
			s.remaining++
		} else {
			s.seen[i/64] |= 1 << (i % 64)
		}
	}
	if s.remaining == 0 {
		return
	}
	c.pending[bk] = s
}

// applied notes that node r's engine counted origin's key in bucket at now.
func (c *converge) applied(r int, bk bucketKey, now int64) {
	s, ok := c.pending[bk]
	if !ok {
		return
	}
	c.mark(s, bk, r, now, true)
}

// mark notes that node r no longer keeps s waiting: it counted it at now
// (counted), or it died.
func (c *converge) mark(s *sample, bk bucketKey, r int, now int64, counted bool) {
	w, bit := r/64, uint64(1)<<(r%64)
	if s.seen[w]&bit != 0 {
		return
	}
	s.seen[w] |= bit
	s.remaining--
	if counted {
		s.last, s.got = now, true
	}
	if s.remaining > 0 {
		return
	}
	delete(c.pending, bk)
	if !s.got {
		c.dropped++ // every peer that could count it died first
		return
	}
	c.lags = append(c.lags, s.last-s.at)
}

// died drops node d: its own samples are dropped, and no other sample
// waits for it any more.
func (c *converge) died(d int, now int64) {
	for bk, s := range c.pending {
		if int(bk.origin) == d {
			delete(c.pending, bk)
			c.dropped++
			continue
		}
		c.mark(s, bk, d, now, false)
	}
}

func (c *converge) pendingCount() int { return len(c.pending) }
