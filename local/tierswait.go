package local

import "math"

// tierswait.go is the part of the tiers reply that looks ahead, pure like
// tiers.go: retry_after (the least wait until a request would be granted)
// and the RateLimit policies with their refills (the least wait until more
// of a quota is available). Both read a settled state and change nothing
// but the outcome. Times are Unix milliseconds.

// retryAfter finds the least wait after which a request of m hits would be
// granted with no other traffic. State changes only when a hit leaves a
// window, a tier changes phase, or a hit leaves a 1 s window, so it visits
// those moments in order (a k-way merge over the sources, no allocation) and
// returns the first that admits m. The caller has checked m ≤ freshCap, which
// the state reaches once every source is exhausted.
func (s *tiersState) retryAfter(p *tiersParams, t, m int64, ring *secondRing) int64 {
	n := len(p.tiers)
	var curBuf [maxTake]tierCursor
	var cur []tierCursor
	if n <= maxTake {
		cur = curBuf[:n]
	} else {
		cur = make([]tierCursor, n)
	}
	for i := range cur {
		cur[i] = tierCursor{hits: s.inst[i].hits.live(), sum: s.inst[i].hits.sum}
	}
	recent := tierCursor{hits: s.recent.live(), sum: s.recent.sum}
	var rc ringCursor
	useRing := p.global >= 0 && ring != nil
	if useRing {
		rc = newRingCursor(ring)
	}
	x := t
	for {
		next := int64(math.MaxInt64)
		for i := range cur {
			in, tp := &s.inst[i], &p.tiers[i]
			if !in.on {
				continue
			}
			if e := in.entered + tp.active; e > x {
				next = min(next, e)
			}
			if e := in.entered + tp.active + tp.cooldown; e > x {
				next = min(next, e)
			}
			if e, ok := cur[i].nextLeave(x, tp.window); ok {
				next = min(next, e)
			}
		}
		if p.hard >= 0 {
			if e, ok := recent.nextLeave(x, second); ok {
				next = min(next, e)
			}
		}
		if useRing {
			if e, ok := rc.nextEvent(x); ok {
				next = min(next, e)
			}
		}
		if next == math.MaxInt64 {
			return x - t // everything has reset: freshCap ≥ m admits
		}
		x = next
		// Capacity at x with no new traffic.
		c := 0
		for i := n - 1; i >= 0; i-- {
			if phaseAt(&p.tiers[i], &s.inst[i], x) == phaseActive {
				c = i + 1
				break
			}
		}
		var walked int64
		if c >= 1 {
			walked = max(0, p.tiers[c-1].limit-cur[c-1].countAt(x, p.tiers[c-1].window))
		}
		for j := c + 1; walked < m && j <= n; j++ {
			if phaseAt(&p.tiers[j-1], &s.inst[j-1], x) == phaseCooldown {
				if p.tiers[j-1].skippable {
					continue
				}
				break
			}
			walked += p.tiers[j-1].limit
		}
		capX := int64(math.MaxInt64)
		if p.hard >= 0 {
			capX = min(capX, p.hard-recent.countAt(x, second))
		}
		if useRing {
			capX = min(capX, p.global-rc.countAt(x))
		}
		if min(walked, capX) >= m {
			return x - t
		}
	}
}

// tierCursor walks the future of a deque of hits: how many are still inside
// a window at a later instant, with no new hits.
type tierCursor struct {
	hits []stamp
	k    int
	sum  int64
}

// countAt returns the hits with x − at < w (ascending x).
func (c *tierCursor) countAt(x, w int64) int64 {
	for c.k < len(c.hits) && x-c.hits[c.k].at >= w {
		c.sum -= c.hits[c.k].n
		c.k++
	}
	return c.sum
}

// nextLeave returns the first instant after x at which a hit leaves the window w.
func (c *tierCursor) nextLeave(x, w int64) (int64, bool) {
	for k := c.k; k < len(c.hits); k++ {
		if e := c.hits[k].at + w; e > x {
			return e, true
		}
	}
	return 0, false
}

// policies fills the RateLimit figures of o (Decision.PolicyTier and the
// refills) for the settled state at t, whose current tier is c. A policy's
// refill is the least wait until more of its quota is available, with no
// other traffic: the time within which the domain can use no more than
// what it has left under that policy (and, with nothing used, its window,
// since hits made now leave it only then).
//
// The tier policy is chosen among the tiers a request draws from now: the
// current tier (its room) and the tiers the walk would enter above it
// (their limits); when there is none (every tier the walk visits is cooling
// down), among those cooling-down tiers, with room 0 until their cooldown
// ends. The one with the least room wins; ties go to the longer refill,
// then to the lower tier. The global refill costs a scan of the ring, so it
// is computed only when the global limit has no more left than the tier
// policy and the hard limit (else it cannot be reported).
func (s *tiersState) policies(p *tiersParams, o *tiersOutcome, t int64, c int, glob int64, ring *secondRing) {
	var best pick
	if c >= 1 {
		tp, in := &p.tiers[c-1], &s.inst[c-1]
		best.offer(c, max(0, tp.limit-in.hits.sum), activeRefill(tp, in, t))
	}
	for j := c + 1; j <= len(p.tiers); j++ {
		tp := &p.tiers[j-1]
		if phaseAt(tp, &s.inst[j-1], t) == phaseCooldown {
			if tp.skippable {
				continue
			}
			break
		}
		best.offer(j, tp.limit, tp.window) // inactive: entered fresh
	}
	if best.k == 0 {
		for j := 1; j <= len(p.tiers); j++ { // all cooling down (c = 0)
			tp, in := &p.tiers[j-1], &s.inst[j-1]
			best.offer(j, 0, in.entered+tp.active+tp.cooldown-t)
			if !tp.skippable {
				break
			}
		}
	}
	o.policyTier, o.policyRoom, o.policyRefill = best.k, best.room, best.refill
	if best.k == 0 {
		best.room, best.refill = math.MaxInt64, -1 // no tier: nothing to beat
	}
	o.hardRefill = 0
	hardRoom := int64(math.MaxInt64)
	if p.hard >= 0 {
		hardRoom = max(0, p.hard-s.recent.sum)
		switch live := s.recent.live(); {
		case p.hard == 0:
			o.hardRefill = -1
		case len(live) > 0:
			o.hardRefill = live[0].at + second - t
		default:
			o.hardRefill = second
		}
	}
	o.globalRefill = 0
	if p.global >= 0 && ring != nil {
		if room := max(0, p.global-glob); room <= best.room && room <= hardRoom {
			rc := newRingCursor(ring)
			switch e, ok := rc.nextEvent(t); {
			case p.global == 0:
				o.globalRefill = -1
			case ok:
				o.globalRefill = e - t
			default:
				o.globalRefill = second
			}
		}
	}
}

// activeRefill is the refill of an active tier at t: when its oldest hit
// leaves its window (a hit made now, when it has none), if that is before
// the instance ends; else when its cooldown ends and it can be entered
// afresh (a tier in cooldown takes no hits, whatever leaves its window).
func activeRefill(tp *tierParams, in *tierInst, t int64) int64 {
	x := t + tp.window
	if live := in.hits.live(); len(live) > 0 {
		x = live[0].at + tp.window
	}
	if end := in.entered + tp.active; x >= end {
		x = end + tp.cooldown
	}
	return x - t
}

// pick is the running choice of policies: the least room, then the longer
// refill (−1, never, is the longest), then the first offered.
type pick struct {
	k            int
	room, refill int64
}

// offer considers policy k with its room and refill (ms, −1 = never).
func (b *pick) offer(k int, room, refill int64) {
	if b.k != 0 && (room > b.room || room == b.room && !longer(refill, b.refill)) {
		return
	}
	b.k, b.room, b.refill = k, room, refill
}

// longer reports whether refill a is strictly longer than b (−1 = never).
func longer(a, b int64) bool {
	switch {
	case b < 0:
		return false
	case a < 0:
		return true
	}
	return a > b
}
