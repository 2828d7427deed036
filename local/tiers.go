package local

import (
	"math"
	"time"
)

// tiers.go is Charon's leniency-first burst tiers (docs/semantics.md, kind tiers),
// pure: no clock, no locks, no I/O. Times are Unix milliseconds: a hit made
// during a millisecond counts as made at its start (lenient by < 1 ms). It
// holds the params, a domain's state, the decision and the merge of peers'
// hits and tier entries into that state; tierswait.go looks ahead from it
// (retry_after, the RateLimit policies), window.go holds its hit records.

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

// newTiersState returns the fresh state of a domain under n tiers. Up to
// four tiers, the instances are in the state's own allocation (the same
// bytes as two), so that a decision finds them next to the state rather
// than at another address.
func newTiersState(n int) *tiersState {
	switch n {
	case 1:
		b := new(struct {
			s  tiersState
			in [1]tierInst
		})
		b.s.inst = b.in[:]
		return &b.s
	case 2:
		b := new(struct {
			s  tiersState
			in [2]tierInst
		})
		b.s.inst = b.in[:]
		return &b.s
	case 3:
		b := new(struct {
			s  tiersState
			in [3]tierInst
		})
		b.s.inst = b.in[:]
		return &b.s
	case 4:
		b := new(struct {
			s  tiersState
			in [4]tierInst
		})
		b.s.inst = b.in[:]
		return &b.s
	}
	return &tiersState{inst: make([]tierInst, n)}
}

// clone returns a copy of s sharing no memory with it.
func (s *tiersState) clone() *tiersState {
	c := &tiersState{inst: make([]tierInst, len(s.inst)), recent: s.recent.clone(), resetAt: s.resetAt}
	for i, in := range s.inst {
		c.inst[i] = tierInst{on: in.on, entered: in.entered, hits: in.hits.clone()}
	}
	return c
}

// claimBound is the most hits of one peer's count that can matter under
// p: one more than its largest limit (a tier's, the hard or the global
// one). A count past it puts every window holding it over every limit, as
// the bound itself does.
func (p *tiersParams) claimBound() int64 {
	m := max(p.hard, p.global)
	for i := range p.tiers {
		m = max(m, p.tiers[i].limit)
	}
	return max(m, 0) + 1
}

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

// tiersOutcome is a tiers decision with every reply field of docs/semantics.md.
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

// walk runs the tier walk of docs/semantics.md for need hits at t on a settled
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

// The merge of peers' records (the cluster). A peer's hits arrive late,
// placed at the start of the time bucket they were made in; a peer's tier
// entry says when it entered a tier. Both change the state the next
// decision reads, never the peer's own.

// freshCount is how long after its bucket ends a peer's tier hit with no
// entry known still begins an instance (mergeCount), ms.
const freshCount = 2000

// countMatters reports whether a peer's hits in slot (0: the domain's and
// the resource's last second; i: tier i), made at at, can still count at
// now: slot 0's only within the last second, a tier's only when the tier
// exists.
func (p *tiersParams) countMatters(slot int, at, now int64) bool {
	if slot == 0 {
		return now-at < second
	}
	return slot <= len(p.tiers)
}

// mergeCount adds a peer's n hits in slot, made in the bucket [at,
// at+width), to s (fitted to p) at now. Slot 0's count toward the hard
// limit. A tier's count only while an instance is active and they are
// inside its window, and only if made in this instance (the bucket ends
// after its entry); one made before the entry, in the same bucket, is
// placed at the entry. Hits of a tier with no instance begin one at their
// bucket's start: the entry that began it may reach this node later, or
// never, and the hits must not be lost meanwhile.
func (s *tiersState) mergeCount(p *tiersParams, slot int, at, width, n, now int64) {
	s.settle(p, now)
	if slot == 0 {
		s.recent.insert(at, n)
		s.resetAt = max(s.resetAt, at+second)
	} else {
		in, tp := &s.inst[slot-1], &p.tiers[slot-1]
		if !in.on && at+width+freshCount > now && at+tp.active+tp.cooldown > now {
			// Fresh hits of a tier (their bucket ended at most freshCount
			// ago: a delta on its way) show it was entered, and is still
			// active, by the start of their bucket; the entry that began
			// it may come later, from another peer, or never (the peer
			// that entered is gone): the instance begins at the bucket's
			// start, and an earlier entry moves it back (mergeEntry).
			// Older hits (a state, a resend) count only in an instance an
			// entry began: theirs may have ended since.
			s.mergeEntry(p, slot-1, at, now)
		}
		if phaseAt(tp, in, now) != phaseActive {
			return // the instance those hits belong to has ended, or they arrived before its entry
		}
		if now-at >= tp.window || at+width <= in.entered {
			return // out of the window, or made in an earlier instance
		}
		at = max(at, in.entered) // a hit of this instance was made after it began
		in.hits.insert(at, n)
		s.resetAt = max(s.resetAt, in.entered+tp.active+tp.cooldown)
	}
	s.retryM = 0
}

// entryMatters reports whether a peer's entry into tier i (0-based) at at
// can change a state at now: the tier exists and that instance has not
// ended.
func (p *tiersParams) entryMatters(i int, at, now int64) bool {
	if i >= len(p.tiers) {
		return false
	}
	tp := &p.tiers[i]
	return at+tp.active+tp.cooldown > now
}

// mergeEntry merges a peer's entry into tier i at at into s (fitted to p)
// at now, earliest-wins per instance: an entry that overlaps the local
// instance (each began before the other ended) moves its start back to the
// earlier one; one after the local instance ended starts a new instance.
// The caller has checked entryMatters.
func (s *tiersState) mergeEntry(p *tiersParams, i int, at, now int64) {
	tp := &p.tiers[i]
	end := at + tp.active + tp.cooldown
	s.settle(p, now)
	in := &s.inst[i]
	switch {
	case !in.on:
		in.on, in.entered = true, at
		in.hits.reset()
	case at < in.entered:
		if end > in.entered { // the same instance, entered earlier elsewhere
			in.entered = at
			in.hits.prune(now - tp.window)
		}
	default:
		// A later entry: the same instance (it began before ours ended),
		// which ours already covers, since settle has kept ours only while
		// it lasts.
	}
	s.resetAt = max(s.resetAt, in.entered+tp.active+tp.cooldown)
	s.retryM = 0
}
