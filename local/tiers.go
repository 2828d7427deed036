package local

import (
	"math"
	"time"
)

// tiers.go is Charon's leniency-first burst tiers (SEMANTICS.md, kind tiers),
// pure: no clock, no locks, no I/O. Times are Unix milliseconds: a hit made
// during a millisecond counts as made at its start (lenient by < 1 ms).

const second = int64(1000) // ms

// tierParams is one normalized tier, durations in ms.
type tierParams struct {
	limit, window, active, cooldown int64
	skippable                       bool
}

// tiersParams is a tier list with its hard and global limits (NoLimit =
// none; 0 grants nothing).
type tiersParams struct {
	tiers        []tierParams
	hard, global int64
	freshCap     int64 // what a fully reset domain may be granted at once
	firstLimit   int64 // for RateLimit-Policy at tier 0
	firstWindow  int64
}

func newTiersParams(ts []tierParamsInput, hard, global int) *tiersParams {
	p := &tiersParams{hard: int64(hard), global: int64(global)}
	var sum int64
	for _, t := range ts {
		p.tiers = append(p.tiers, tierParams{
			limit: int64(t.limit), window: msCeil(t.window), active: msCeil(t.active),
			cooldown: msCeil(t.cooldown), skippable: t.skippable,
		})
		sum += int64(t.limit)
	}
	if p.hard >= 0 {
		sum = min(sum, p.hard)
	}
	if p.global >= 0 {
		sum = min(sum, p.global)
	}
	p.freshCap = sum
	if len(p.tiers) > 0 {
		p.firstLimit, p.firstWindow = p.tiers[0].limit, p.tiers[0].window
	}
	return p
}

// tierParamsInput is a tier as configured.
type tierParamsInput struct {
	limit                    int
	window, active, cooldown time.Duration
	skippable                bool
}

// msCeil is d in whole milliseconds, rounded up.
func msCeil(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// tierInst is the state of one tier of one domain: its entry time and the
// hits of this instance that are still within the tier's window.
type tierInst struct {
	on      bool
	entered int64
	hits    deque
}

// tiersState is one domain's state: its tiers and its hits of the last second.
type tiersState struct {
	inst   []tierInst
	recent deque
	// resetAt is when every tier is inactive and no hit is within 1 s.
	resetAt int64
	// retryAt caches the instant a request of retryM hits is next admitted.
	// Without a global limit it depends only on this key's state, so it holds
	// until the key commits a hit (which clears it): a domain hammering its
	// limit gets its answer without a new search.
	retryAt, retryM int64
	retryP          *tiersParams // the params the cache was computed under
}

// fit adapts s to p, the params it is decided under now. A reload may have
// changed the tier list: tiers beyond the new count are forgotten, new ones
// start inactive, and a retry instant cached under other params is dropped.
func (s *tiersState) fit(p *tiersParams) {
	if s.retryP != p {
		s.retryP, s.retryM = p, 0
	}
	switch n := len(p.tiers); {
	case len(s.inst) > n:
		s.inst = s.inst[:n]
	case len(s.inst) < n:
		s.inst = append(s.inst, make([]tierInst, n-len(s.inst))...)
	}
}

func newTiersState(n int) *tiersState { return &tiersState{inst: make([]tierInst, n)} }

// phase of a tier instance at x.
const (
	phaseInactive = iota
	phaseActive
	phaseCooldown
)

func phaseAt(tp *tierParams, in *tierInst, x int64) int {
	if !in.on {
		return phaseInactive
	}
	switch d := x - in.entered; {
	case d < tp.active:
		return phaseActive
	case d < tp.active+tp.cooldown:
		return phaseCooldown
	}
	return phaseInactive
}

// settle brings s to t: instances that ended are forgotten, hits that left
// their window or the last second are dropped.
func (s *tiersState) settle(p *tiersParams, t int64) {
	for i := range s.inst {
		in, tp := &s.inst[i], &p.tiers[i]
		switch phaseAt(tp, in, t) {
		case phaseInactive:
			if in.on {
				in.on = false
				in.hits.reset()
			}
		case phaseCooldown:
			in.hits.reset() // a tier in cooldown takes no hits; its window no longer matters
		default:
			in.hits.prune(t - tp.window)
		}
	}
	s.recent.prune(t - second)
}

// current returns the active tier with the greatest index (1-based), or 0.
func (s *tiersState) current(p *tiersParams, t int64) int {
	for i := len(s.inst) - 1; i >= 0; i-- {
		if phaseAt(&p.tiers[i], &s.inst[i], t) == phaseActive {
			return i + 1
		}
	}
	return 0
}

// tiersOutcome is a tiers decision with every reply field of SEMANTICS.md.
type tiersOutcome struct {
	granted, remaining                  int64
	retryAfter, resetAfter              int64 // ms; retryAfter −1 = never
	tier                                int
	tierLimit, tierHits, tierWindow     int64
	burst, limitedByHard, limitedByGlob bool
	domainHits, globalHits              int64
	// The RateLimit figures (policies): the tier policy a request is
	// closest to the limit of, its room and refill, and the hard and
	// global refills (ms; −1 = never). See Decision.
	policyTier               int
	policyRoom, policyRefill int64
	hardRefill, globalRefill int64
}

// tierRecord is what a decision committed, tier by tier: hits taken and
// tiers entered (bit i for tier i+1).
type tierRecord struct {
	taken   [maxTake]int64
	entered uint64
}

// maxTake bounds the ordered (tier, hits) list a walk builds on the stack.
const maxTake = 64

// walk runs the tier walk of SEMANTICS.md for need hits at t on a settled
// state, writing the planned hits per tier (0-based) into take. It returns
// what the tiers allow and the current tier.
func (s *tiersState) walk(p *tiersParams, t, need int64, take []int64) (int64, int) {
	q := need
	c := s.current(p, t)
	if c >= 1 {
		room := max(0, p.tiers[c-1].limit-s.inst[c-1].hits.sum)
		n := min(need, room)
		if take != nil {
			take[c-1] = n
		}
		need -= n
	}
	for j := c + 1; need > 0 && j <= len(p.tiers); j++ {
		if phaseAt(&p.tiers[j-1], &s.inst[j-1], t) == phaseCooldown {
			if p.tiers[j-1].skippable {
				continue
			}
			break
		}
		n := min(need, p.tiers[j-1].limit)
		if take != nil {
			take[j-1] = n
		}
		need -= n
	}
	return q - need, c
}

// capAt is the most hits H and G still allow at t, given the domain's and
// everyone's hits in the last second (MaxInt64 when neither is set).
func (p *tiersParams) capAt(domainHits, globalHits int64) int64 {
	c := int64(math.MaxInt64)
	if p.hard >= 0 {
		c = min(c, p.hard-domainHits)
	}
	if p.global >= 0 {
		c = min(c, p.global-globalHits)
	}
	return c
}

// tiersDecide decides request(q, m) at t for state s, commits on a grant and
// fills the reply. ring is the resource's last-second record of every
// domain's hits: when it is given, the caller holds ring.mu, and the decision
// reads it (G) and records the grant in it. With ring nil (allowed when G is
// NoLimit) the caller records the grant and fills globalHits itself.
// When rec is given, the decision also writes into it the hits it committed
// to each tier and the tiers it entered, for the cluster.
func tiersDecide(p *tiersParams, s *tiersState, t, q, m int64, ring *secondRing, rec *tierRecord) tiersOutcome {
	s.fit(p)
	s.settle(p, t)
	var glob int64
	if ring != nil {
		glob = ring.count(t)
	}
	var takeBuf [maxTake]int64
	var take []int64
	if len(p.tiers) <= maxTake {
		take = takeBuf[:len(p.tiers)]
	} else {
		take = make([]int64, len(p.tiers))
	}
	tierAllowed, c0 := s.walk(p, t, q, take)
	var o tiersOutcome
	allowed := tierAllowed
	if p.hard >= 0 && p.hard-s.recent.sum < tierAllowed {
		allowed = min(allowed, p.hard-s.recent.sum)
		o.limitedByHard = true
	}
	if p.global >= 0 && p.global-glob < tierAllowed {
		allowed = min(allowed, p.global-glob)
		o.limitedByGlob = true
	}
	granted := max(allowed, 0)
	if q > 0 && granted >= m && granted > 0 {
		o.granted = granted
		left := granted
		for i := range take {
			n := min(take[i], left)
			if n == 0 {
				continue
			}
			in := &s.inst[i]
			if !in.on || phaseAt(&p.tiers[i], in, t) == phaseInactive {
				in.on, in.entered = true, t
				in.hits.reset()
				if i+1 > c0 {
					o.burst = true
				}
				if rec != nil && i < 64 {
					rec.entered |= 1 << uint(i)
				}
			}
			in.hits.push(t, n)
			if rec != nil && i < maxTake {
				rec.taken[i] = n
			}
			left -= n
			if left == 0 {
				break
			}
		}
		s.recent.push(t, granted)
		s.retryM = 0 // the state changed: the cached retry no longer holds
		if ring != nil {
			ring.add(t, granted)
			glob += granted
		}
	}
	s.report(p, &o, t, max(m, 1), glob, ring)
	return o
}

// report fills the reply fields that describe the state after a decision.
func (s *tiersState) report(p *tiersParams, o *tiersOutcome, t, m, glob int64, ring *secondRing) {
	c := s.current(p, t)
	o.tier = c
	if c >= 1 {
		o.tierLimit = p.tiers[c-1].limit
		o.tierHits = s.inst[c-1].hits.sum
		o.tierWindow = p.tiers[c-1].window
	}
	o.domainHits, o.globalHits = s.recent.sum, glob
	capNow := p.capAt(s.recent.sum, glob)
	walked, _ := s.walk(p, t, math.MaxInt64, nil)
	o.remaining = max(0, min(walked, capNow))
	// reset_after: every tier inactive and no hit within 1 s.
	reset := t
	for i := range s.inst {
		if in := &s.inst[i]; in.on {
			reset = max(reset, in.entered+p.tiers[i].active+p.tiers[i].cooldown)
		}
	}
	if last, ok := s.recent.last(); ok {
		reset = max(reset, last+second)
	}
	s.resetAt = reset
	o.resetAfter = reset - t
	s.policies(p, o, t, c, glob, ring)
	switch {
	case o.remaining >= m:
		o.retryAfter = 0
	case m > p.freshCap:
		o.retryAfter = -1
	case p.global < 0 && s.retryM == m && t < s.retryAt:
		o.retryAfter = s.retryAt - t
	default:
		o.retryAfter = s.retryAfter(p, t, m, ring)
		if p.global < 0 {
			s.retryAt, s.retryM = t+o.retryAfter, m
		}
	}
}

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
