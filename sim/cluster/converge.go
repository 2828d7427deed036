package cluster

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
	// byBucket lists, per (key, bucket), the origins of its pending
	// samples (some may be done: looked up in pending), for sums.
	byBucket map[keyBucket][]int32
	lags     []int64
	dropped  int
}

type keyBucket struct {
	key    int32
	bucket int64
}

func newConverge(n int) *converge {
	return &converge{n: n, pending: make(map[bucketKey]*sample), byBucket: make(map[keyBucket][]int32)}
}

// summed notes that node r merged, at now, a sum of key's bucket from
// owner: every pending sample of the bucket that the owner had counted
// (or made) by then, but r's own, is counted at r.
func (c *converge) summed(r, owner int, key int32, bucket int64, now int64) {
	kb := keyBucket{key, bucket}
	origins := c.byBucket[kb]
	live := origins[:0]
	w, bit := owner/64, uint64(1)<<(owner%64)
	for _, o := range origins {
		bk := bucketKey{origin: o, key: key, bucket: bucket}
		s, ok := c.pending[bk]
		if !ok {
			continue
		}
		live = append(live, o)
		if int(o) != r && s.seen[w]&bit != 0 {
			c.mark(s, bk, r, now, true)
		}
	}
	if len(live) == 0 {
		delete(c.byBucket, kb)
		return
	}
	c.byBucket[kb] = live
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
	kb := keyBucket{bk.key, bk.bucket}
	c.byBucket[kb] = append(c.byBucket[kb], bk.origin)
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
