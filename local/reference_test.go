package local

// This file is the test oracle: a deliberately naive model of one resource of
// kind tiers or gcra, written from docs/semantics.md alone and sharing no code with
// the engine. The tiers model keeps nothing but the list of committed hits and
// derives every tier state and count from it at the asked instant; retry_after
// is found by trying every millisecond. It is slow on purpose: the differential
// test (diff_test.go) only means something because the two are unrelated.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// refDecision is the oracle's reply to one request, with the fields of
// docs/semantics.md ("Response fields"). Durations are whole milliseconds.
type refDecision struct {
	Kind         config.Kind
	Granted      int
	Remaining    int
	RetryAfterMs int64 // -1 = never
	ResetAfterMs int64

	// tiers
	Tier            int
	TierLimit       int
	TierHits        int
	TierWindowMs    int64
	Burst           bool
	LimitedByHard   bool
	LimitedByGlobal bool
	HardLimit       int
	GlobalLimit     int
	DomainHits      int
	GlobalHits      int

	// gcra
	GCRABurst  int
	GCRAPeriod time.Duration
}

// refFields names every field as the API does (the vectors' "expect" keys),
// plus a few engine-only ones, each formatted so that equal values give equal
// strings.
func refFields(d refDecision) map[string]string {
	return map[string]string{
		"kind":                    string(d.Kind),
		"granted":                 fmt.Sprint(d.Granted),
		"remaining":               fmt.Sprint(d.Remaining),
		"retry_after_ms":          fmt.Sprint(d.RetryAfterMs),
		"reset_after_ms":          fmt.Sprint(d.ResetAfterMs),
		"tier":                    fmt.Sprint(d.Tier),
		"tier_limit":              fmt.Sprint(d.TierLimit),
		"tier_hits":               fmt.Sprint(d.TierHits),
		"tier_window_ms":          fmt.Sprint(d.TierWindowMs),
		"burst":                   fmt.Sprint(d.Burst),
		"limited_by_hard":         fmt.Sprint(d.LimitedByHard),
		"limited_by_global":       fmt.Sprint(d.LimitedByGlobal),
		"hard_limit":              fmt.Sprint(d.HardLimit),
		"global_limit":            fmt.Sprint(d.GlobalLimit),
		"domain_hits_last_second": fmt.Sprint(d.DomainHits),
		"global_hits_last_second": fmt.Sprint(d.GlobalHits),
		"gcra_burst":              fmt.Sprint(d.GCRABurst),
		"gcra_period":             d.GCRAPeriod.String(),
		"shadow":                  "false",
		"lenient":                 "false",
	}
}

// refMs converts a whole-millisecond duration; the oracle works in integer ms.
func refMs(d time.Duration) int64 {
	if d%time.Millisecond != 0 {
		panic(fmt.Sprintf("reference: %v is not a whole number of milliseconds", d))
	}
	return int64(d / time.Millisecond)
}

// refCeilMs rounds a nanosecond count up to whole milliseconds: "A duration in
// a reply is rounded up to the whole millisecond".
func refCeilMs(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns + int64(time.Millisecond) - 1) / int64(time.Millisecond)
}

// ---------------------------------------------------------------------------
// Kind tiers.

// refSecond is the 1 s window of hard_limit and global_limit.
const refSecond = 1000

// refInf is q = ∞ in the walk that computes remaining.
const refInf = math.MaxInt32

type refTier struct {
	limit    int
	window   int64 // ms
	active   int64 // ms
	cooldown int64 // ms
	skip     bool
}

// refHit is one committed hit: when, by whom, in which tier, and the entry
// time of the instance of that tier it belongs to.
type refHit struct {
	at     int64
	domain string
	tier   int // 1-based
	entry  int64
}

// refTiers is the model of one tiers resource. Its whole state is hits.
type refTiers struct {
	tiers  []refTier // 0-based slice of tiers 1..n
	hard   int       // -1: absent, no hard limit ("an absent limit is no limit")
	global int       // -1: absent; 0 grants nothing ("a limit of 0 grants nothing")
	hits   []refHit  // in commit order, so in non-decreasing time

	last    int64
	started bool

	// A memo of retry answers, valid while nothing a decision of the domain
	// can see has changed (see retryAfter). Purely a speed-up.
	domVersion map[string]int
	allVersion int
	memo       map[refMemoKey]refMemo
}

type refMemoKey struct {
	domain string
	need   int
}

type refMemo struct {
	domVersion, allVersion int
	from                   int64 // the instant the search started
	at                     int64 // first instant that grants, or -1 = never
}

// newRefTiers builds the model from an already normalized tier list; every
// duration must be a whole number of milliseconds.
func newRefTiers(tiers []config.Tier, hard, global int) *refTiers {
	m := &refTiers{hard: hard, global: global, domVersion: map[string]int{}, memo: map[refMemoKey]refMemo{}}
	for _, t := range tiers {
		m.tiers = append(m.tiers, refTier{
			limit: t.Limit, window: refMs(t.Window), active: refMs(t.Active),
			cooldown: refMs(t.Cooldown), skip: t.Skippable,
		})
	}
	return m
}

func (m *refTiers) tier(i int) refTier { return m.tiers[i-1] }

// refView is the state of one domain as seen from the stored hits: for each
// tier its latest instance (entry time and the times of its hits), the
// domain's hit times and every domain's hit times. It only indexes m.hits.
type refView struct {
	m      *refTiers
	has    []bool    // [i]: tier i has had an instance
	entry  []int64   // [i]: entry time of tier i's latest instance
	inst   [][]int64 // [i]: times of the hits of that instance, oldest first
	domain []int64   // the domain's hits
	all    []int64   // every domain's hits
	buf    []refTake // reused by evaluate, which the retry search calls a lot
}

func (m *refTiers) view(d string) *refView {
	n := len(m.tiers)
	v := &refView{m: m, has: make([]bool, n+1), entry: make([]int64, n+1), inst: make([][]int64, n+1)}
	for _, h := range m.hits {
		v.all = append(v.all, h.at)
		if h.domain != d {
			continue
		}
		v.domain = append(v.domain, h.at)
		if !v.has[h.tier] || v.entry[h.tier] != h.entry {
			v.has[h.tier], v.entry[h.tier], v.inst[h.tier] = true, h.entry, nil
		}
		v.inst[h.tier] = append(v.inst[h.tier], h.at)
	}
	return v
}

// refCount is the number of times h in s (sorted, all ≤ u) inside a window of
// length w at u: "A hit made at h is inside a window of length W at time t
// exactly when t - h < W".
func refCount(s []int64, u, w int64) int {
	n := 0
	for k := len(s) - 1; k >= 0 && u-s[k] < w; k-- {
		n++
	}
	return n
}

const (
	refInactive = iota
	refActive
	refCooldown
)

// running: the latest instance of tier i has not ended at u. "Tier i is active
// for t ∈ [e_i, e_i+Ta_i), in cooldown for t ∈ [e_i+Ta_i, e_i+Ta_i+Tc_i), and
// inactive otherwise. When an instance ends its entry time and hits are
// forgotten".
func (v *refView) running(i int, u int64) bool {
	t := v.m.tier(i)
	return v.has[i] && u < v.entry[i]+t.active+t.cooldown
}

func (v *refView) state(i int, u int64) int {
	if !v.running(i, u) {
		return refInactive
	}
	if u < v.entry[i]+v.m.tier(i).active {
		return refActive
	}
	return refCooldown
}

// current: "the active tier with the greatest index, or 0".
func (v *refView) current(u int64) int {
	for i := len(v.m.tiers); i >= 1; i-- {
		if v.state(i, u) == refActive {
			return i
		}
	}
	return 0
}

// tierHits: the hits of the running instance of tier i within its window.
func (v *refView) tierHits(i int, u int64) int {
	if !v.running(i, u) {
		return 0
	}
	return refCount(v.inst[i], u, v.m.tier(i).window)
}

func (v *refView) domainHits(u int64) int { return refCount(v.domain, u, refSecond) }
func (v *refView) globalHits(u int64) int { return refCount(v.all, u, refSecond) }

type refTake struct{ tier, hits int }

// refOutcome is the decision pseudo-code of docs/semantics.md evaluated at u,
// before anything is committed.
type refOutcome struct {
	c             int // the current tier before the request
	take          []refTake
	tierAllowed   int // q − need after the walk: what the tiers alone allow
	granted       int
	limitedHard   bool
	limitedGlobal bool
	ok            bool // false = reject
}

func (v *refView) evaluate(u int64, q, minCopies int) refOutcome {
	m := v.m
	// take reuses v.buf: a caller must be done with one outcome's take
	// before evaluating again on the same view.
	o := refOutcome{take: v.buf[:0]}
	need := q
	o.c = v.current(u)
	if o.c >= 1 {
		// "room = L_c − hits of tier c within its window at t"
		room := m.tier(o.c).limit - v.tierHits(o.c, u)
		if room < 0 {
			panic(fmt.Sprintf("reference: tier %d holds more hits than its limit", o.c))
		}
		k := min(need, room)
		o.take = append(o.take, refTake{o.c, k})
		need -= k
	}
	for j := o.c + 1; need > 0 && j <= len(m.tiers); j++ {
		st := v.state(j, u)
		if st == refCooldown {
			if m.tier(j).skip {
				continue // "skippable: burst past it"
			}
			break // "burst blocked"
		}
		if st != refInactive {
			panic("reference: an active tier above the current one")
		}
		k := min(need, m.tier(j).limit) // "j is inactive: a fresh instance"
		o.take = append(o.take, refTake{j, k})
		need -= k
	}
	o.tierAllowed = q - need
	allowed := o.tierAllowed
	if m.hard >= 0 {
		// "limited_by_hard — H … cut the grant below what the tiers allowed"
		capH := m.hard - v.domainHits(u)
		o.limitedHard = capH < o.tierAllowed
		allowed = min(allowed, capH)
	}
	if m.global >= 0 {
		capG := m.global - v.globalHits(u)
		o.limitedGlobal = capG < o.tierAllowed
		allowed = min(allowed, capG)
	}
	o.granted = max(allowed, 0)
	// "reject (change nothing) if granted < m or granted = 0"
	o.ok = !(o.granted < minCopies || o.granted == 0)
	v.buf = o.take[:0]
	return o
}

// advance checks that time does not go back and forgets hits that can no
// longer be seen at any later instant: outside every 1 s window and in a tier
// instance that has ended. Dropping them changes no answer.
func (m *refTiers) advance(t int64) {
	if m.started && t < m.last {
		panic(fmt.Sprintf("reference: time went back from %d to %d", m.last, t))
	}
	m.started, m.last = true, t
	kept := m.hits[:0]
	for _, h := range m.hits {
		tr := m.tier(h.tier)
		if t-h.at < refSecond || t < h.entry+tr.active+tr.cooldown {
			kept = append(kept, h)
		}
	}
	m.hits = kept
}

// Request decides request(copies q, min_copies minCopies) of domain d at t (ms).
func (m *refTiers) Request(t int64, d string, q, minCopies int) refDecision {
	m.advance(t)
	v := m.view(d)
	o := v.evaluate(t, q, minCopies)
	burst := false
	if o.ok {
		// "commit the first `granted` hits of `take`, lowest tier first; a tier
		// that receives a hit and was inactive is entered: e_j = t."
		left := o.granted
		for _, tk := range o.take {
			give := min(tk.hits, left)
			if give == 0 {
				continue
			}
			e := v.entry[tk.tier]
			if !v.running(tk.tier, t) {
				e = t
				if tk.tier > o.c {
					// "burst — this request entered a tier above the one
					// that was current before it"
					burst = true
				}
			}
			for range give {
				m.hits = append(m.hits, refHit{at: t, domain: d, tier: tk.tier, entry: e})
			}
			left -= give
		}
		if left != 0 {
			panic("reference: granted more than the walk took")
		}
		m.domVersion[d]++
		m.allVersion++
		v = m.view(d)
	}
	dec := refDecision{
		Kind:            config.KindTiers,
		Burst:           burst,
		LimitedByHard:   o.limitedHard,
		LimitedByGlobal: o.limitedGlobal,
		HardLimit:       m.hard,
		GlobalLimit:     m.global,
		DomainHits:      v.domainHits(t),
		GlobalHits:      v.globalHits(t),
	}
	if o.ok {
		dec.Granted = o.granted
	}
	// "tier, tier_limit, tier_hits — the current tier, its limit (0 for tier
	// 0) and the hits in its window", after the decision.
	dec.Tier = v.current(t)
	if dec.Tier > 0 {
		dec.TierLimit = m.tier(dec.Tier).limit
		dec.TierHits = v.tierHits(dec.Tier, t)
		dec.TierWindowMs = m.tier(dec.Tier).window
	}
	// "remaining — … the same walk with q = ∞, capped by H and G"
	dec.Remaining = v.evaluate(t, refInf, 0).granted
	dec.RetryAfterMs = m.retryAfter(v, d, t, max(minCopies, 1))
	dec.ResetAfterMs = m.resetAfter(v, t)
	return dec
}

// resetAfter: "the least wait after which every tier of the domain is inactive
// and the domain has no hit within 1 s".
func (m *refTiers) resetAfter(v *refView, t int64) int64 {
	end := t
	for i := 1; i <= len(m.tiers); i++ {
		if v.running(i, t) {
			tr := m.tier(i)
			end = max(end, v.entry[i]+tr.active+tr.cooldown)
		}
	}
	for _, h := range v.domain {
		end = max(end, h+refSecond)
	}
	return end - t
}

// retryAfter: "the least wait after which a request of min_copies hits (at
// least 1) would be granted, assuming no other traffic; 0 when it would be
// granted now; −1 when it never would". Found by brute force: every
// millisecond from t is tried, until the instant after which nothing the
// decision looks at changes any more (the domain's tiers have all ended and no
// hit of any domain is within 1 s).
func (m *refTiers) retryAfter(v *refView, d string, t int64, need int) int64 {
	key := refMemoKey{d, need}
	dv, av := m.domVersion[d], 0
	if m.global >= 0 {
		av = m.allVersion // other domains are seen only through G
	}
	if c, ok := m.memo[key]; ok && c.domVersion == dv && c.allVersion == av && c.from <= t {
		// Nothing visible changed since the search from c.from: every instant
		// in [c.from, c.at) was tried and refused, so the answer still holds.
		if c.at < 0 {
			return -1
		}
		if c.at >= t {
			return c.at - t
		}
	}
	horizon := t
	for i := 1; i <= len(m.tiers); i++ {
		if v.running(i, t) {
			tr := m.tier(i)
			horizon = max(horizon, v.entry[i]+tr.active+tr.cooldown)
		}
	}
	for _, h := range v.all {
		horizon = max(horizon, h+refSecond)
	}
	at := int64(-1)
	for u := t; u <= horizon; u++ {
		if v.evaluate(u, need, need).ok {
			at = u
			break
		}
	}
	m.memo[key] = refMemo{domVersion: dv, allVersion: av, from: t, at: at}
	if at < 0 {
		return -1
	}
	return at - t
}

// ---------------------------------------------------------------------------
// Kind gcra, in integer nanoseconds.

type refGCRA struct {
	burst  int
	period time.Duration
	ei     int64 // "EI = period/count in whole nanoseconds (integer division)"
	b      int64 // "B = EI·burst"
	tat    map[string]int64
}

func newRefGCRA(burst, count int, period time.Duration) *refGCRA {
	ei := int64(period) / int64(count)
	return &refGCRA{burst: burst, period: period, ei: ei, b: ei * int64(burst), tat: map[string]int64{}}
}

// refFloorDiv is floor(a/b) for b > 0.
func refFloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// base is max(tat, t), an unset tat meaning a full bucket.
func (g *refGCRA) base(d string, t int64) int64 {
	if tat, ok := g.tat[d]; ok && tat > t {
		return tat
	}
	return t
}

// Request decides request(q, minCopies) of domain d at tMs. It reports false
// for "q > burst is a client error", changing nothing.
func (g *refGCRA) Request(tMs int64, d string, q, minCopies int) (refDecision, bool) {
	if q > g.burst {
		return refDecision{}, false
	}
	t := tMs * int64(time.Millisecond)
	base := g.base(d, t)
	fit := refFloorDiv(t+g.b-base, g.ei)
	granted := min(int64(q), fit)
	dec := refDecision{Kind: config.KindGCRA, GCRABurst: g.burst, GCRAPeriod: g.period}
	if !(granted < int64(minCopies) || granted <= 0) {
		g.tat[d] = base + granted*g.ei
		dec.Granted = int(granted)
	}
	g.fill(&dec, d, t, max(minCopies, 1))
	return dec, true
}

func (g *refGCRA) fill(dec *refDecision, d string, t int64, need int) {
	base := g.base(d, t)
	// "remaining = floor((t + B − max(tat, t)) / EI) after the decision"
	dec.Remaining = int(refFloorDiv(t+g.b-base, g.ei))
	// "max(0, max(tat,t) + m·EI − B − t)"
	dec.RetryAfterMs = refCeilMs(base + int64(need)*g.ei - g.b - t)
	// "reset_after_ms = max(0, tat − t)"
	dec.ResetAfterMs = refCeilMs(base - t)
}

// Refund: "tat = max(tat − q·EI, t); refunding a full bucket changes nothing".
// It returns the remaining after the refund.
func (g *refGCRA) Refund(tMs int64, d string, q int) int {
	t := tMs * int64(time.Millisecond)
	if tat, ok := g.tat[d]; ok {
		g.tat[d] = max(tat-int64(q)*g.ei, t)
	}
	return int(refFloorDiv(t+g.b-g.base(d, t), g.ei))
}

// refEventRetry is retry_after computed the way docs/semantics.md argues it can be:
// "state only changes when a hit leaves a window, a tier changes state, or a
// hit leaves a 1 s window, so the earliest such moment that admits the
// request is it". Only those instants (and t itself) are tried.
func (m *refTiers) refEventRetry(d string, t int64, need int) int64 {
	v := m.view(d)
	cands := []int64{t}
	for i := 1; i <= len(m.tiers); i++ {
		if !v.running(i, t) {
			continue
		}
		tr := m.tier(i)
		cands = append(cands, v.entry[i]+tr.active, v.entry[i]+tr.active+tr.cooldown)
		for _, h := range v.inst[i] {
			cands = append(cands, h+tr.window)
		}
	}
	for _, h := range v.all {
		cands = append(cands, h+refSecond)
	}
	slices.Sort(cands)
	for _, u := range cands {
		if u >= t && v.evaluate(u, need, need).ok {
			return u - t
		}
	}
	return -1
}

// TestReferenceRetryAtEventInstants checks the oracle's brute-force
// retry_after against docs/semantics.md's own argument for it (see refEventRetry):
// if they differ, either the oracle or that sentence is wrong.
func TestReferenceRetryAtEventInstants(t *testing.T) {
	for i := range 200 {
		r := rand.New(rand.NewPCG(1, uint64(i)))
		_, res := diffGenTiers(r)
		m := newRefTiers(res.Tiers, refLimit(res.HardLimit), refLimit(res.GlobalLimit))
		reqs, _ := diffGenTiersTrace(r, res)
		for k, req := range reqs {
			copies, minCopies := req.args()
			d := m.Request(req.AtMs, req.Domain, copies, minCopies)
			if ev := m.refEventRetry(req.Domain, req.AtMs, max(minCopies, 1)); ev != d.RetryAfterMs {
				t.Fatalf("trace %d request #%d %s on %+v (hard %d, global %d): brute force retry_after %d ms, event instants %d ms",
					i, k, confRequestString(req), res.Tiers, m.hard, m.global, d.RetryAfterMs, ev)
			}
		}
	}
}
