package local

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/reconcile"
)

// MaxCopies is the most copies one call may ask for.
const MaxCopies = 1_000_000_000

// MaxUnconfigured is how many unconfigured resources (in namespaces that allow
// them) an engine records; past it, their requests are granted leniently and
// not recorded.
const MaxUnconfigured = 10_000

// unconfiguredLimit is the tier limit of the most permissive config, the one
// an unconfigured resource (or one whose namespace ignores its config) gets:
// one tier of MaxCopies hits per second, no hard or global limit.
const unconfiguredLimit = MaxCopies

// Engine is the decision engine: the resource registry, the key stores and the
// copy-limited sessions. Every method takes the decision instant t; none reads
// the clock. Safe for concurrent use.
type Engine struct {
	cfg *config.Config
	res map[string]*resource

	dynMu sync.RWMutex
	dyn   map[string]*resource

	book  *book // shared with the engines Reload makes from this one
	stats *Stats
	clu   *reconcile.Cluster // nil when the node runs alone
}

// Stats counts what the engine did leniently. Read with Load.
type Stats struct {
	// LenientFull counts grants made because a resource tracked max_keys keys.
	LenientFull atomic.Int64
	// LenientUnrecorded counts grants to unconfigured resources past MaxUnconfigured.
	LenientUnrecorded atomic.Int64
}

type resource struct {
	name      string
	kind      config.Kind
	shadow    bool
	unlimited bool // unconfigured-but-allowed, or its namespace ignores config
	tiers     *tiersRes
	gcra      *gcraRes
	copies    *copiesRes
	adaptive  *adaptiveRes // nil when the namespace ignores the config
	pacer     *pacerRes    // nil when the namespace ignores the config
	idleSince int64        // unconfigured resources: when Step first found it empty (ns), 0 = in use
}

// unconfiguredIdle is how long an unconfigured resource stays empty (no key
// tracked, no copy held) before Step forgets it: a client asking for ever
// new names cannot keep MaxUnconfigured of them, and a name in use keeps its
// counts.
const unconfiguredIdle = time.Minute

type tiersRes struct {
	def  *tiersParams
	over map[string]*tiersParams
	keys *store[*tiersState]
	ring *secondRing
	sync *reconcile.Res // records committed hits for the cluster; nil alone
}

type gcraRes struct {
	def  *gcraParams
	over map[string]*gcraParams
	keys *store[int64]  // TAT, Unix ns
	sync *reconcile.Res // nil alone
	// idle holds, for a clustered resource, the idle gaps keys' own spends
	// discarded lately (gcraidle.go); nil alone.
	idle *store[idleLog]
}

// New returns an engine for cfg, which must be validated and normalized
// (config.Parse does both). The engine keeps cfg and never changes it.
func New(cfg *config.Config) *Engine {
	return build(cfg, newBook(), &Stats{})
}

// build makes an engine for cfg over the given book and counters.
func build(cfg *config.Config, b *book, st *Stats) *Engine {
	e := &Engine{
		cfg:   cfg,
		res:   make(map[string]*resource, len(cfg.Resources)),
		dyn:   make(map[string]*resource),
		book:  b,
		stats: st,
	}
	for name, rc := range cfg.Resources {
		ns := cfg.Namespaces[namespaceOf(name)]
		e.res[name] = buildResource(name, rc, ns != nil && ns.IgnoreConfigured)
	}
	return e
}

// SetCaps sets the caps on sessions, holds and transfers (zero fields keep
// their defaults, DefaultCaps). They belong to the book every engine of a
// reload chain shares, so they hold across reloads. Objects already there
// beyond a lowered cap stay; only new ones are refused. Safe for concurrent
// use.
func (e *Engine) SetCaps(c Caps) {
	e.book.mu.Lock()
	e.book.caps = c.orDefault()
	e.book.mu.Unlock()
}

// Config returns the configuration in force.
func (e *Engine) Config() *config.Config { return e.cfg }

// Stats returns the engine's counters of lenient decisions (shared with the
// engines Reload makes from it).
func (e *Engine) Stats() *Stats { return e.stats }

func namespaceOf(name string) string {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return name
}

func buildResource(name string, rc *config.Resource, ignore bool) *resource {
	r := &resource{name: name, kind: rc.Kind, shadow: rc.Shadow}
	maxKeys := rc.MaxKeys
	if maxKeys <= 0 {
		maxKeys = config.DefaultMaxKeys
	}
	if ignore {
		r.unlimited = true
		if rc.Kind == config.KindTiers || rc.Kind == config.KindGCRA {
			r.kind = config.KindTiers
			r.tiers = unlimitedTiers(maxKeys)
			return r
		}
	}
	switch rc.Kind {
	case config.KindTiers:
		tr := &tiersRes{def: tiersFromConfig(rc.Tiers, limitOf(rc.HardLimit), limitOf(rc.GlobalLimit)), keys: newStore[*tiersState](maxKeys), ring: &secondRing{}}
		for d, o := range rc.Domains {
			if tr.over == nil {
				tr.over = make(map[string]*tiersParams)
			}
			tr.over[d] = tiersFromConfig(o.Tiers, limitOf(o.HardLimit), limitOf(rc.GlobalLimit))
		}
		r.tiers = tr
	case config.KindGCRA:
		def := newGCRAParams(rc.Burst, rc.Count, rc.Period)
		gr := &gcraRes{def: &def, keys: newStore[int64](maxKeys)}
		for d, o := range rc.Domains {
			if gr.over == nil {
				gr.over = make(map[string]*gcraParams)
			}
			op := newGCRAParams(o.Burst, o.Count, o.Period)
			gr.over[d] = &op
		}
		r.gcra = gr
	case config.KindCopies:
		r.copies = copiesFromConfig(name, rc, ignore)
	case config.KindAdaptive:
		r.adaptive = adaptiveFromConfig(rc, ignore)
	case config.KindPacer:
		r.pacer = pacerFromConfig(rc, ignore)
	}
	return r
}

func unlimitedTiers(maxKeys int) *tiersRes {
	p := newTiersParams([]tierParamsInput{{limit: unconfiguredLimit, window: time.Second, active: time.Second}}, NoLimit, NoLimit)
	return &tiersRes{def: p, keys: newStore[*tiersState](maxKeys), ring: &secondRing{}}
}

func tiersFromConfig(ts []config.Tier, hard, global int) *tiersParams {
	in := make([]tierParamsInput, len(ts))
	for i, t := range ts {
		in[i] = tierParamsInput{limit: t.Limit, window: t.Window, active: t.Active, cooldown: t.Cooldown, skippable: t.Skippable}
	}
	return newTiersParams(in, hard, global)
}

// limitOf is a config limit field in the engine's terms: NoLimit when
// absent, else the limit (0 grants nothing).
func limitOf(l *int) int { return config.LimitOr(l, NoLimit) }

func copiesFromConfig(name string, rc *config.Resource, unlimited bool) *copiesRes {
	g := int64(limitOf(rc.GlobalLimit))
	eff := func(l *int) int64 { // a limit above the global one, or none, is the global one
		v := int64(limitOf(l))
		if g >= 0 && (v < 0 || v > g) {
			return g
		}
		return v
	}
	r := &copiesRes{
		name: name, domainLimit: eff(rc.DomainLimit), global: g,
		byDomain: make(map[string][]int), perDom: make(map[string]int64),
		unlimited: unlimited, shadow: rc.Shadow,
	}
	for d, o := range rc.Domains {
		if r.overrides == nil {
			r.overrides = make(map[string]int64)
		}
		r.overrides[d] = eff(o.DomainLimit)
	}
	for i, gr := range rc.Groups {
		r.groups = append(r.groups, copiesGroup{name: gr.Name, limit: eff(gr.Limit)})
		for _, d := range gr.Domains {
			r.byDomain[d] = append(r.byDomain[d], i)
		}
	}
	r.perGroup = make([]int64, len(r.groups))
	r.remoteGroup = make([]int64, len(r.groups))
	return r
}

// lookup finds a resource, creating an unconfigured one (of the kind the
// caller needs) when its namespace allows it. It returns nil, nil when the
// namespace allows it but MaxUnconfigured is reached.
func (e *Engine) lookup(name string, kind config.Kind) (*resource, error) {
	if r, ok := e.res[name]; ok {
		return r, nil
	}
	ns := e.cfg.Namespaces[namespaceOf(name)]
	if ns == nil || !(ns.AllowUnconfigured || ns.IgnoreConfigured) {
		return nil, fmt.Errorf("%w: %q has no config and its namespace %q does not allow unconfigured resources", ErrUnknownResource, name, namespaceOf(name))
	}
	e.dynMu.RLock()
	r, ok := e.dyn[name]
	e.dynMu.RUnlock()
	if ok {
		return r, nil
	}
	e.dynMu.Lock()
	defer e.dynMu.Unlock()
	if r, ok := e.dyn[name]; ok {
		return r, nil
	}
	if len(e.dyn) >= MaxUnconfigured {
		return nil, nil
	}
	r = &resource{name: name, kind: kind, unlimited: true}
	if kind == config.KindCopies {
		r.copies = copiesFromConfig(name, &config.Resource{Kind: config.KindCopies}, true)
	} else {
		r.kind = config.KindTiers
		r.tiers = unlimitedTiers(config.DefaultMaxKeys)
	}
	e.dyn[strings.Clone(name)] = r
	return r, nil
}

func wrongKind(r *resource, call string) error {
	return fmt.Errorf("%w: %q is %s resource; %s is for %s", ErrWrongKind, r.name, kindArticle(r.kind), call, kindsFor(call))
}

func checkCopies(copies, minCopies int) error {
	if copies < 0 || copies > MaxCopies {
		return fmt.Errorf("%w: copies: must be an integer in [0, %d], got %d", ErrBadRequest, MaxCopies, copies)
	}
	if minCopies < 0 || minCopies > copies {
		return fmt.Errorf("%w: min_copies: must be in [0, copies=%d], got %d", ErrBadRequest, copies, minCopies)
	}
	return nil
}

// Request decides whether domain may use copies hits of resource at t, granting
// at least minCopies or nothing (0 ≤ minCopies ≤ copies; copies = 0 is a peek).
// A rejection is a Decision with Granted 0 and a nil error; errors are for
// requests that cannot be decided (unknown resource, wrong kind, bad numbers).
func (e *Engine) Request(t time.Time, resource, domain string, copies, minCopies int) (Decision, error) {
	var d Decision
	err := e.Decide(&d, t, resource, domain, copies, minCopies)
	return d, err
}

// Decide is Request writing its decision into d, which it overwrites whole:
// the hot path of the API, which keeps d in a pooled buffer and so copies no
// Decision around.
func (e *Engine) Decide(d *Decision, t time.Time, resource, domain string, copies, minCopies int) error {
	if err := checkCopies(copies, minCopies); err != nil {
		return err
	}
	r, err := e.lookup(resource, config.KindTiers)
	if err != nil {
		return err
	}
	if r == nil {
		e.stats.LenientUnrecorded.Add(1)
		*d = lenientDecision(config.KindTiers, copies)
		return nil
	}
	switch r.kind {
	case config.KindTiers:
		r.tiers.decide(d, e.stats, domain, t.UnixMilli(), int64(copies), int64(minCopies))
	case config.KindGCRA:
		if err := r.gcra.decide(d, e.stats, domain, t.UnixNano(), int64(copies), int64(minCopies)); err != nil {
			return err
		}
	default:
		return wrongKind(r, "request")
	}
	if r.unlimited {
		d.Lenient = true
	}
	if r.shadow && d.Granted == 0 && copies > 0 {
		d.Granted, d.Shadow = copies, true
	}
	return nil
}

func lenientDecision(k config.Kind, copies int) Decision {
	return Decision{Kind: k, Granted: copies, Remaining: MaxCopies, Lenient: true, HardLimit: NoLimit, GlobalLimit: NoLimit}
}

func (tr *tiersRes) params(domain string) *tiersParams {
	if tr.over != nil {
		if p, ok := tr.over[domain]; ok {
			return p
		}
	}
	return tr.def
}

func (tr *tiersRes) decide(d *Decision, stats *Stats, domain string, t, q, m int64) {
	p := tr.params(domain)
	var ring *secondRing
	if p.global >= 0 {
		ring = tr.ring
		ring.mu.Lock()
		defer ring.mu.Unlock()
	}
	sh, h := tr.keys.lock(domain)
	st, ok := sh.get(domain, h)
	if !ok {
		st = newTiersState(len(p.tiers))
		if q > 0 && !tr.keys.insert(sh, domain, h, st) {
			sh.mu.Unlock()
			stats.LenientFull.Add(1)
			tr.recordGlobal(ring, t, q)
			*d = lenientDecision(config.KindTiers, int(q))
			return
		}
	}
	var rec *tierRecord
	var recBuf tierRecord
	if tr.sync != nil {
		rec = &recBuf
	}
	o := tiersDecide(p, st, t, q, m, ring, rec)
	if rec != nil && o.granted > 0 {
		tr.sync.TierHits(domain, t, o.granted, rec.taken[:min(len(p.tiers), maxTake)], rec.entered)
	}
	if !ok && q > 0 && o.granted == 0 {
		tr.keys.remove(sh, domain, h) // a rejected first request leaves nothing behind
	}
	sh.mu.Unlock()
	if ring == nil {
		r := tr.ring
		r.mu.Lock()
		if o.granted > 0 {
			r.add(t, o.granted)
		}
		o.globalHits = r.count(t)
		r.mu.Unlock()
	}
	*d = Decision{
		Kind: config.KindTiers, Granted: int(o.granted), Remaining: int(o.remaining),
		RetryAfter: msDuration(o.retryAfter), ResetAfter: msDuration(o.resetAfter),
		Tier: o.tier, TierLimit: int(o.tierLimit), TierHits: int(o.tierHits),
		TierWindow: msDuration(o.tierWindow), Burst: o.burst,
		LimitedByHard: o.limitedByHard, LimitedByGlobal: o.limitedByGlob,
		HardLimit: int(p.hard), GlobalLimit: int(p.global),
		DomainHitsLastSecond: int(o.domainHits), GlobalHitsLastSecond: int(o.globalHits),
		FirstTierLimit: int(p.firstLimit), FirstTierWindow: msDuration(p.firstWindow),
		PolicyTier: o.policyTier, PolicyTierRemaining: int(o.policyRoom), PolicyTierRefill: msDuration(o.policyRefill),
		HardRefill: msDuration(o.hardRefill), GlobalRefill: msDuration(o.globalRefill),
	}
}

// recordGlobal records lenient hits in the resource's last second.
func (tr *tiersRes) recordGlobal(locked *secondRing, t, n int64) {
	if locked == nil {
		tr.ring.mu.Lock()
		defer tr.ring.mu.Unlock()
	}
	tr.ring.add(t, n)
}

func msDuration(ms int64) time.Duration {
	if ms < 0 {
		return Never
	}
	return time.Duration(ms) * time.Millisecond
}

func (gr *gcraRes) params(domain string) *gcraParams {
	if gr.over != nil {
		if p, ok := gr.over[domain]; ok {
			return p
		}
	}
	return gr.def
}

func (gr *gcraRes) decide(d *Decision, stats *Stats, domain string, t, q, m int64) error {
	p := gr.params(domain)
	if q > p.burst {
		return fmt.Errorf("%w: copies: %d is over the burst of %d", ErrCostOverBurst, q, p.burst)
	}
	sh, h := gr.keys.lock(domain)
	var tat int64
	ptat := sh.find(domain, h)
	if ptat != nil {
		tat = *ptat
	}
	o := gcraDecide(p, tat, t, q, m)
	if o.changed && gr.sync != nil {
		gr.sync.Spend(domain, t/1e6, o.granted)
		if tat < t && gr.idle != nil {
			gr.noteIdle(domain, tat, t)
		}
	}
	if o.changed {
		if ptat != nil {
			*ptat = o.tat
		} else if !gr.keys.insert(sh, domain, h, o.tat) {
			sh.mu.Unlock()
			stats.LenientFull.Add(1)
			*d = lenientDecision(config.KindGCRA, int(q))
			return nil
		}
	}
	sh.mu.Unlock()
	*d = Decision{
		Kind: config.KindGCRA, Granted: int(o.granted), Remaining: int(o.remaining),
		RetryAfter: time.Duration(o.retryAfter), ResetAfter: time.Duration(o.resetAfter),
		GCRABurst: int(p.burst), GCRAPeriod: p.period, GCRARefill: time.Duration(gcraRefill(p, &o, t)),
	}
	return nil
}

// gcraRefill is the wait from t until the bucket holds one more token than
// o.remaining: it holds floor(x/EI) tokens (at least 0) for x = t + B −
// max(tat, t), and x grows with time.
func gcraRefill(p *gcraParams, o *gcraOutcome, t int64) int64 {
	x := t + p.b - max(o.tat, t)
	return (o.remaining+1)*p.ei - x
}

// Refund returns copies tokens to a gcra bucket and reports what remains.
func (e *Engine) Refund(t time.Time, resource, domain string, copies int) (int, error) {
	if err := checkCopies(copies, 0); err != nil {
		return 0, err
	}
	r, err := e.lookup(resource, config.KindGCRA)
	if err != nil {
		return 0, err
	}
	if r == nil || r.kind != config.KindGCRA {
		if r == nil || r.unlimited {
			return MaxCopies, nil
		}
		return 0, fmt.Errorf("%w: %q is %s resource; refund is for gcra resources", ErrWrongKind, r.name, kindArticle(r.kind))
	}
	gr, tn := r.gcra, t.UnixNano()
	p := gr.params(domain)
	sh, h := gr.keys.lock(domain)
	defer sh.mu.Unlock()
	var tat int64
	ptat := sh.find(domain, h)
	if ptat != nil {
		tat = *ptat
	}
	if gr.sync != nil && tat > tn && copies > 0 {
		gr.sync.Refund(domain, tn/1e6, int64(copies))
	}
	tat, remaining := gcraRefund(p, tat, tn, int64(copies))
	if ptat != nil {
		if tat <= tn && gr.idle == nil { // clustered, a key outlives its TAT (applyCount)
			gr.keys.remove(sh, domain, h)
		} else {
			*ptat = tat
		}
	}
	return int(remaining), nil
}

// OpenSession starts a session (a lease) of the given ttl and returns its id.
func (e *Engine) OpenSession(t time.Time, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("%w: ttl_ms: must be > 0, got %d", ErrBadRequest, ttl.Milliseconds())
	}
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.openSession(t.UnixNano(), int64(ttl))
	if err != nil {
		return "", err
	}
	return s.id, nil
}

// KeepAlive renews a session for another ttl and returns the ttl.
func (e *Engine) KeepAlive(t time.Time, id string) (time.Duration, error) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.session(id)
	if err != nil {
		return 0, err
	}
	e.book.keepAlive(s, t.UnixNano())
	return time.Duration(s.ttl), nil
}

// EndSession ends a session, releasing every copy it holds; it returns how many.
func (e *Engine) EndSession(t time.Time, id string) (int, error) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.session(id)
	if err != nil {
		return 0, err
	}
	return int(e.book.endSession(s)), nil
}

// Reserve takes between minCopies and copies copies of resource for domain in
// session. A rejection is a Reservation with Granted 0, no hold and no error.
func (e *Engine) Reserve(t time.Time, resource, domain string, copies, minCopies int, session string) (Reservation, error) {
	if err := checkCopies(copies, minCopies); err != nil {
		return Reservation{}, err
	}
	r, err := e.lookup(resource, config.KindCopies)
	if err != nil {
		return Reservation{}, err
	}
	if r == nil {
		return Reservation{}, fmt.Errorf("%w: %q: too many unconfigured resources (%d) to track another copy-limited one", ErrUnknownResource, resource, MaxUnconfigured)
	}
	if r.kind != config.KindCopies {
		return Reservation{}, wrongKind(r, "reserve")
	}
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.session(session)
	if err != nil {
		return Reservation{}, err
	}
	if copies > 0 {
		if err := e.book.roomForHold(s); err != nil {
			return Reservation{}, err
		}
	}
	cr := r.copies
	n, h, shadow := e.book.reserve(cr, domain, int64(copies), int64(minCopies), s)
	res := Reservation{
		Granted: int(n), DomainLimit: int(cr.limitFor(domain)), GlobalLimit: int(cr.global),
		DomainHolds: int(cr.perDom[domain] + cr.remote[domain]), GlobalHolds: int(cr.total + cr.remoteTotal),
		Groups: cr.groupsOf(domain), Shadow: shadow, Lenient: cr.unlimited,
	}
	if h != nil {
		res.Hold = h.id
	}
	return res, nil
}

// Release returns copies copies of a hold; it reports the released and still held.
func (e *Engine) Release(t time.Time, hold string, copies int) (released, held int, err error) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	h, err := e.book.hold(hold)
	if err != nil {
		return 0, 0, err
	}
	if err := e.book.release(h, int64(copies)); err != nil {
		return 0, int(h.n), err
	}
	return copies, int(h.n), nil
}

// HoldResource returns the name of the resource of an open hold; ok is
// false when the hold is unknown, released or its session ended (as of the
// last call that expired sessions). The API labels the metrics of release
// and transfer with it. Safe for concurrent use.
func (e *Engine) HoldResource(hold string) (resource string, ok bool) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	h, found := e.book.holds[hold]
	if !found {
		return "", false
	}
	return h.res.name, true
}

// Transfer moves copies copies of a hold into staging for ttl and returns the
// transfer id; they stay counted until seized or expired.
func (e *Engine) Transfer(t time.Time, hold string, copies int, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("%w: ttl_ms: must be > 0, got %d", ErrBadRequest, ttl.Milliseconds())
	}
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	h, err := e.book.hold(hold)
	if err != nil {
		return "", err
	}
	x, err := e.book.transfer(h, int64(copies), t.UnixNano(), int64(ttl))
	if err != nil {
		return "", err
	}
	return x.id, nil
}

// Seize moves a staged transfer into a new hold of session.
func (e *Engine) Seize(t time.Time, transfer, session string) (Seized, error) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.session(session)
	if err != nil {
		return Seized{}, err
	}
	h, err := e.book.seize(transfer, s)
	if err != nil {
		return Seized{}, err
	}
	out := Seized{Hold: h.id, Resource: h.res.name, Domain: h.domain, Copies: int(h.n)}
	for _, g := range h.res.groupsOf(h.domain) {
		out.Groups = append(out.Groups, g.Name)
	}
	return out, nil
}

// State reports a key's state at t without spending.
func (e *Engine) State(t time.Time, resource, domain string) (KeyState, error) {
	ks := KeyState{Resource: resource, Domain: domain}
	r, ok := e.res[resource]
	if !ok {
		e.dynMu.RLock()
		r, ok = e.dyn[resource]
		e.dynMu.RUnlock()
	}
	if !ok {
		if _, err := e.lookup(resource, config.KindTiers); err != nil {
			return ks, err
		}
		return ks, nil // allowed but never used: nothing recorded
	}
	ks.Kind = r.kind
	switch r.kind {
	case config.KindTiers:
		tr := r.tiers
		p := tr.params(domain)
		tm := t.UnixMilli()
		sh, h := tr.keys.lock(domain)
		if st, ok := sh.get(domain, h); ok {
			ks.Tracked = true
			st.fit(p)
			st.settle(p, tm)
			for i := range st.inst {
				in, tp := &st.inst[i], &p.tiers[i]
				ts := TierState{Index: i + 1, Limit: int(tp.limit), State: [...]string{"inactive", "active", "cooldown"}[phaseAt(tp, in, tm)]}
				if in.on {
					ts.EnteredAt = time.UnixMilli(in.entered)
					ts.Hits = int(in.hits.sum)
				}
				ks.Tiers = append(ks.Tiers, ts)
			}
		}
		sh.mu.Unlock()
		var d Decision
		tr.decide(&d, e.stats, domain, tm, 0, 0)
		ks.Peek = &d
	case config.KindGCRA:
		gr := r.gcra
		sh, h := gr.keys.lock(domain)
		tat, ok := sh.get(domain, h)
		sh.mu.Unlock()
		if ok && tat > t.UnixNano() {
			ks.Tracked, ks.TAT = true, time.Unix(0, tat)
		}
		var d Decision
		_ = gr.decide(&d, e.stats, domain, t.UnixNano(), 0, 0)
		ks.Peek = &d
	case config.KindCopies:
		e.book.mu.Lock()
		e.book.expire(t.UnixNano())
		ks.Holds = int(r.copies.perDom[domain] + r.copies.remote[domain])
		ks.Tracked = ks.Holds > 0
		e.book.mu.Unlock()
	case config.KindAdaptive:
		sweepAdaptive(r, t)
		if st, ok := e.AdaptiveState(resource); ok {
			ks.Adaptive, ks.Tracked = &st, true
		}
	}
	return ks, nil
}

// Keys returns how many keys resource tracks now.
func (e *Engine) Keys(resource string) int {
	r, ok := e.res[resource]
	if !ok {
		return 0
	}
	switch {
	case r.tiers != nil:
		return r.tiers.keys.len()
	case r.gcra != nil:
		return r.gcra.keys.len()
	}
	return 0
}

// Step drops keys that have fully reset, ends expired sessions and
// transfers, and counts adaptive tickets outstanding for their resource's
// timeout as backoffs, as of t. The agent calls it from a ticker; tests call
// it directly.
// It visits every key: about 10 ms per million keys.
func (e *Engine) Step(t time.Time) {
	tm, tn := t.UnixMilli(), t.UnixNano()
	sweep := func(r *resource) {
		switch {
		case r.tiers != nil:
			r.tiers.keys.sweep(func(s *tiersState) bool { return s.resetAt <= tm })
		case r.gcra != nil:
			if r.gcra.idle == nil {
				r.gcra.keys.sweep(func(tat int64) bool { return tat <= tn })
			} else {
				// Clustered: kept idleKeep past the TAT (see applyCount).
				keep := idleKeep.Nanoseconds()
				r.gcra.keys.sweep(func(tat int64) bool { return tat+keep <= tn })
				r.gcra.idle.sweep(func(l idleLog) bool { return l.last()+keep <= tn })
			}
		case r.adaptive != nil:
			sweepAdaptive(r, t)
		}
	}
	for _, r := range e.res {
		sweep(r)
	}
	e.book.mu.Lock()
	e.book.expire(tn)
	e.book.mu.Unlock()
	var gone []string
	e.dynMu.RLock() // lookups go on while the keys are swept
	for name, r := range e.dyn {
		sweep(r)
		if !e.dynEmpty(r) {
			r.idleSince = 0 // idleSince is Step's alone
			continue
		}
		switch {
		case r.idleSince == 0:
			r.idleSince = tn
		case tn-r.idleSince >= int64(unconfiguredIdle):
			gone = append(gone, name)
		}
	}
	e.dynMu.RUnlock()
	if len(gone) > 0 {
		e.dynMu.Lock()
		for _, name := range gone {
			delete(e.dyn, name)
		}
		e.dynMu.Unlock()
	}
}

// dynEmpty reports whether an unconfigured resource tracks nothing.
func (e *Engine) dynEmpty(r *resource) bool {
	switch {
	case r.tiers != nil:
		return r.tiers.keys.len() == 0
	case r.copies != nil:
		e.book.mu.Lock()
		defer e.book.mu.Unlock()
		return r.copies.total == 0 && r.copies.remoteTotal == 0
	}
	return true
}

// Usage is a resource's load, as the metrics show it.
type Usage struct {
	Resource string
	Kind     config.Kind
	Keys     int // keys tracked (tiers, gcra)
	Holds    int // copies held or staged (copies)
}

// Usage returns every configured resource's tracked keys and holds, sorted
// by name. It reads counters only; safe to call at any time.
func (e *Engine) Usage() []Usage {
	out := make([]Usage, 0, len(e.res))
	e.book.mu.Lock()
	for name, r := range e.res {
		u := Usage{Resource: name, Kind: r.kind}
		switch {
		case r.tiers != nil:
			u.Keys = r.tiers.keys.len()
		case r.gcra != nil:
			u.Keys = r.gcra.keys.len()
		case r.copies != nil:
			u.Holds = int(r.copies.total)
		}
		out = append(out, u)
	}
	e.book.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

// Sessions returns how many sessions are open, holds exist and transfers
// are staged.
func (e *Engine) Sessions() (sessions, holds, transfers int) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	return len(e.book.sessions), len(e.book.holds), len(e.book.transfers)
}
