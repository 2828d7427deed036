package local

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/obol-dev/obol/config"
)

// cluster.go is the engine's side of the cluster, with no network in it:
// the interfaces a cluster and the engine meet through (Cluster, Recorder,
// Applier), what a cluster needs to know of a resource (ClusterSpec, the
// slots and spans in which the engine's records are counted), Attach, and
// the Applier methods through which a cluster applies its peers' counts,
// entries and holds to the engine's own state, so that a decision reads
// the merged view from memory and never waits for the network. These
// types live here, below the cluster, so that whatever registers with a
// cluster (the engine, the rate limit service's store) names them without
// linking it.

// Cluster is what resources register with to be counted cluster-wide:
// package reconcile's Cluster implements it. The engine registers its
// resources in Attach (and again in each engine Reload makes).
type Cluster interface {
	// Register makes resource name known to the cluster, as spec
	// describes it, with a the applier of its peers' records, and returns
	// the recorder of this node's. A later call for the same name (a
	// reload) replaces its spec and applier; the recorder may be the same.
	Register(name string, spec ClusterSpec, a Applier) Recorder
}

// Applier is what a cluster applies its peers' records of a resource to:
// the growth of their counts and their holds. Implemented by *Engine.
// Methods are safe for concurrent use, take the instant now (Unix ms),
// never block on the network and ignore keys of resources they do not
// know.
type Applier interface {
	// ApplyCount adds n of a peer's hits (or gcra spends, refunds) of
	// resource/domain in slot, made in the bucket [at, at+width).
	ApplyCount(resource, domain string, slot int, at, width, n, now int64)
	// ApplyEntry says a peer entered tier slot of resource/domain at at
	// (SlotTAT: a gcra TAT; SlotReset: a reset of the key at at).
	ApplyEntry(resource, domain string, slot int, at, now int64)
	// AddRemoteHolds changes the copies peers hold for resource/domain by n.
	AddRemoteHolds(resource, domain string, n int64)
	// EachHold calls fn for every resource/domain this node holds copies of.
	EachHold(fn func(resource, domain string, holds int64))
}

// ClusterSpec is what a cluster needs to know of one resource to count it:
// how long each slot's records matter, and the limits its drift thresholds
// are taken of. Each registrant builds it from what it owns: the engine
// from a resource's normalized config (ClusterSpecOf), the rate limit
// service from its limit values. A resource that only ships holds
// (copies) has no slots.
type ClusterSpec struct {
	// Drift is the drift tolerance, a fraction of a limit in [0, 1]: a key
	// is shipped at once when its unshipped hits reach max(1,
	// Drift·limit/N) for N live nodes; 0 ships every hit at once.
	Drift float64
	// Spans are, per slot, how long a record of it matters (Span).
	Spans []Span
	// Limits are, per slot, the limit the slot's drift threshold is taken
	// of (0: none, so no hurry).
	Limits []int64
	// Hard is the limit of one key's hits of every tier (a threshold on
	// slot 0), Global the limit of every key's together (a threshold on
	// the resource's unshipped hits); 0: none.
	Hard, Global int64
	// ShipLate ships, once, a bucket that left its span before it was ever
	// shipped (gcra: a spend keeps pushing a busy bucket's TAT long after
	// its own span, so peers must see it); otherwise such a bucket counts
	// in no window any more and goes unshipped.
	ShipLate bool
	// Replays says that the engine's reset of a key forgets its peers'
	// counts made after the reset too (gcra: a TAT does not tell its
	// spends apart), so the cluster applies those again after it.
	Replays bool
	// Refunds says that a settle may give hits of the slots back (tiers,
	// Recorder.TierRefund): slot SlotTierRefund+i takes hits of slot i
	// back, and matters as long as slot i's hits do.
	Refunds bool
	// Requested says the resource is a limit set by a request
	// (requested.go): a client chose its windows, so they do not shorten
	// the flush gap the cluster takes of the shortest window.
	Requested bool
}

// ClusterSpecOf returns the cluster spec of rc, a validated and normalized
// resource: for tiers, each slot's spans the longest of the default's and
// every override's (so that no hit is dropped before its window ends),
// slot 0's limit the hard limit (else the global one) and slot i's the
// least limit of tier i; for gcra, both slots the longest burst offset
// and the default's burst; no slots for the other kinds.
func ClusterSpecOf(rc *config.Resource) ClusterSpec {
	s := ClusterSpec{Drift: *rc.Drift}
	switch rc.Kind {
	case config.KindTiers:
		n := len(rc.Tiers)
		for _, o := range rc.Domains {
			n = max(n, len(o.Tiers))
		}
		s.Hard, s.Global = int64(config.LimitOr(rc.HardLimit, 0)), int64(config.LimitOr(rc.GlobalLimit, 0))
		s.Spans, s.Limits = make([]Span, n+1), make([]int64, n+1)
		s.Limits[SlotTotal] = s.Hard
		if s.Hard == 0 {
			s.Limits[SlotTotal] = s.Global
		}
		widen := func(ts []config.Tier) {
			for i, sp := range tierSpans(ts) {
				s.Spans[i].Hits = max(s.Spans[i].Hits, sp.Hits)
				s.Spans[i].Entry = max(s.Spans[i].Entry, sp.Entry)
				if i == SlotTotal {
					continue
				}
				if l := int64(ts[i-1].Limit); s.Limits[i] == 0 || l < s.Limits[i] {
					s.Limits[i] = l
				}
			}
		}
		widen(rc.Tiers)
		for _, o := range rc.Domains {
			widen(o.Tiers)
		}
		s.Refunds = true
	case config.KindGCRA:
		life := gcraLife(rc.Burst, rc.Count, rc.Period)
		for _, o := range rc.Domains {
			life = max(life, gcraLife(o.Burst, o.Count, o.Period))
		}
		s.Spans = []Span{{Hits: life}, {Hits: life}}
		s.Limits = []int64{int64(rc.Burst), int64(rc.Burst)}
		s.ShipLate, s.Replays = true, true
	}
	return s
}

// specOf is the spec the engine registers resource name of config rc with:
// ClusterSpecOf, marked Requested for a limit set by a request.
func specOf(name string, rc *config.Resource) ClusterSpec {
	s := ClusterSpecOf(rc)
	_, _, s.Requested = SplitLimitedName(name)
	return s
}

// Recorder records what the engine commits on one clustered resource, for
// shipping to peers. The engine calls it with the key's lock held, so that
// a key's records keep the engine's order: its methods must be safe for
// concurrent use, must not block, must not call back into the engine, and
// must not keep domain or taken after they return (they may live on the
// caller's stack).
type Recorder interface {
	// TierHits records that the engine granted total hits of domain (tiers)
	// at at (Unix ms), taken[i] of them in tier i+1, and entered tier i+1
	// at at for every bit i set in entered. Tiers past the 64th are not
	// shared.
	TierHits(domain string, at, total int64, taken []int64, entered uint64)
	// Spend records that a gcra bucket spent n tokens at at (Unix ms).
	Spend(domain string, at, n int64)
	// Refund records that n tokens were refunded to a gcra bucket at at.
	Refund(domain string, at, n int64)
	// Reset records that domain's counts, tier entries and gcra state
	// from before at (Unix ms) are to be forgotten (Engine.Reset), for
	// every peer to forget them too (ApplyEntry with SlotReset). It
	// reports false, recording nothing, when the cluster keeps as many
	// resets as it may: the engine then forgets nothing.
	Reset(domain string, at int64) bool
	// TierRefund records that a settle gave back total of domain's hits
	// (tiers) made at at (Unix ms), taken[i] of them in tier i+1: peers
	// take them back where they still count them (SlotTierRefund).
	TierRefund(domain string, at, total int64, taken []int64)
}

// Slots in which a key's records are counted, shipped and applied
// (ApplyCount): a tiers key's slot 0 is its hits of every tier (the hard
// and global limits' last second), slot i its hits of tier i; a gcra key
// has spends and refunds.
const (
	// SlotTotal is a tiers key's hits of all tiers.
	SlotTotal = 0
	// SlotSpend is a gcra key's tokens spent.
	SlotSpend = 0
	// SlotRefund is a gcra key's tokens refunded.
	SlotRefund = 1
	// SlotTAT is the entry slot (ApplyEntry) of a gcra key's theoretical
	// arrival time as a peer's engine has it: a floor for a node that
	// joins, whose replay of the counts still inside their lifetime
	// cannot know the debt a long-busy bucket carried before them
	// (EachTAT). It is no tier's slot.
	SlotTAT = 1<<31 - 1
	// SlotReset is the entry slot (ApplyEntry) of a reset of a tiers or
	// gcra key: everything the key holds from before the entry's instant
	// is forgotten (Engine.Reset). It is no tier's slot.
	SlotReset = 1<<31 - 2
	// SlotTierRefund is the first slot of a tiers key's hits given back by
	// a settle (Recorder.TierRefund): slot SlotTierRefund+i takes hits of
	// slot i back (ApplyCount). It is past the 64 tiers that are shared,
	// so that an agent of an earlier release ignores it.
	SlotTierRefund = maxTake + 1
)

// Span is how long, in ms, a record of one slot matters to a decision: Hits
// for a hit (a spend, a refund), which leaves with its window; Entry for a
// tier entry, which ends with the tier's active and cooldown (0 for a slot
// that has none).
type Span struct{ Hits, Entry int64 }

// tierSpans returns the spans of a tiers key's slots under the tier list
// ts, as the engine decides them: slot 0, the last second; slot i, tier i's
// window, and its active plus cooldown.
func tierSpans(ts []config.Tier) []Span {
	p := tiersParamsOf(ts, NoLimit, NoLimit)
	out := make([]Span, len(p.tiers)+1)
	out[SlotTotal] = Span{Hits: second}
	for i, tp := range p.tiers {
		out[i+1] = Span{Hits: tp.window, Entry: tp.active + tp.cooldown}
	}
	return out
}

// gcraLife returns how long, in ms, a spend or a refund matters to a gcra
// bucket of burst, refilled by count per period: its burst offset
// burst·⌊period/count⌋, rounded up, at least 1 ms; a second when count is
// not positive.
func gcraLife(burst, count int, period time.Duration) int64 {
	if count <= 0 {
		return second
	}
	p := newGCRAParams(burst, count, period)
	return max(1, msCeil(time.Duration(p.b)))
}

// Attach joins e to cluster c: it registers each configured tiers, gcra
// and copies resource of e with c (ClusterSpecOf), so that every hit e
// commits on a tiers or gcra one is recorded in c for shipping and c
// applies its peers' counts and holds to e. Call it once, before e decides
// anything; an engine made by Reload registers its resources with the same
// cluster, and peers' records go to it from then on.
func (e *Engine) Attach(c Cluster) {
	a := &attachment{c: c}
	a.cur.Store(e)
	e.register(a)
}

// register registers e's resources with a's cluster, a their applier. An
// unlimited rate resource records nothing and applies nothing, so it is
// not registered; an unlimited copies one still counts its peers' holds.
func (e *Engine) register(a *attachment) {
	e.att = a
	for name, r := range e.res {
		if !r.unlimited || r.kind == config.KindCopies {
			r.k.attach(a.c, name, e.cfg.Resources[name], a)
		}
	}
}

// attachment is an engine's place in its cluster, shared with the engines
// Reload makes from it: the applier its resources are registered with,
// which passes peers' records on to the engine in force (the last one
// registered). So a reload needs no call from the cluster back, and a
// resource it removed leaves its registration pointing at the engine in
// force, which ignores it, rather than at a retired engine.
type attachment struct {
	c   Cluster
	cur atomic.Pointer[Engine]
}

var _ Applier = (*attachment)(nil)

func (a *attachment) ApplyCount(resource, domain string, slot int, at, width, n, now int64) {
	a.cur.Load().ApplyCount(resource, domain, slot, at, width, n, now)
}

func (a *attachment) ApplyEntry(resource, domain string, slot int, at, now int64) {
	a.cur.Load().ApplyEntry(resource, domain, slot, at, now)
}

func (a *attachment) AddRemoteHolds(resource, domain string, n int64) {
	a.cur.Load().AddRemoteHolds(resource, domain, n)
}

func (a *attachment) EachHold(fn func(resource, domain string, holds int64)) {
	a.cur.Load().EachHold(fn)
}

// Resolve is the engine in force's (Engine.Resolve).
func (a *attachment) Resolve(resource string) bool { return a.cur.Load().Resolve(resource) }

// EachTAT is the engine in force's (Engine.EachTAT).
func (a *attachment) EachTAT(now int64, fn func(resource, domain string, tat int64)) {
	a.cur.Load().EachTAT(now, fn)
}

// Cluster returns the cluster e is attached to, or nil.
func (e *Engine) Cluster() Cluster {
	if e.att == nil {
		return nil
	}
	return e.att.c
}

// ApplyCount adds n hits a peer made (or, for gcra, tokens it spent or
// refunded) to resource/domain's slot, made in the time bucket [at,
// at+width) (Unix ms) and placed at its start, as of now. Tiers slot 0 is
// the domain's and the resource's last second (hard and global limits),
// slot i is tier i, whose hits count only while an instance is active and
// they are inside its window. Keys of unknown or unlimited resources are
// ignored; a new key is added when the store has room, else counted in
// its overflow state. A tiers count is clamped to the resource's largest
// limit + 1, which changes no decision; a gcra spend saturates.
func (e *Engine) ApplyCount(resource, domain string, slot int, at, width, n, now int64) {
	r, ok := e.known(resource)
	if !ok || r.unlimited || n <= 0 {
		return
	}
	r.k.applyCount(domain, slot, at, width, n, now)
}

// ApplyEntry records that a peer entered tier slot of resource/domain at at
// (Unix ms). Entries merge earliest-wins per instance: an entry that
// overlaps the local instance (each began before the other ended) moves its
// start back to the earlier one; one after the local instance ended starts a
// new instance; an older one that has ended by now changes nothing. An
// entry of SlotReset is a peer's reset of the key at at (reset.go).
func (e *Engine) ApplyEntry(resource, domain string, slot int, at, now int64) {
	r, ok := e.known(resource)
	if !ok || r.unlimited {
		return
	}
	if slot == SlotReset {
		e.resetFrom(r, domain, at, now)
		return
	}
	r.k.applyEntry(domain, slot, at, now)
}

// EachTAT calls fn with every gcra key this node's engine holds whose
// bucket is not full at now (Unix ms): its theoretical arrival time, Unix
// ms (rounded up). A joiner takes it as a floor (ApplyEntry with SlotTAT).
func (e *Engine) EachTAT(now int64, fn func(resource, domain string, tat int64)) {
	each := func(name string, r *resource) {
		if g, ok := r.k.(*gcraRes); ok && !r.unlimited {
			g.eachTAT(now*1e6, func(domain string, tat int64) { fn(name, domain, tat/1e6+min(tat%1e6, 1)) }) // rounded up, without overflow at a saturated TAT
		}
	}
	for name, r := range e.res {
		each(name, r)
	}
	e.dynMu.RLock()
	defined := make(map[string]*resource)
	for name, r := range e.dyn {
		if r.defined {
			defined[name] = r
		}
	}
	e.dynMu.RUnlock()
	for name, r := range defined {
		each(name, r)
	}
}

// AddRemoteHolds changes the copies peers hold of resource/domain by n.
func (e *Engine) AddRemoteHolds(resource, domain string, n int64) {
	r, ok := e.res[resource]
	if !ok || n == 0 {
		return
	}
	r.k.addRemote(domain, n)
}

// EachHold calls fn for every configured resource and domain this node holds
// (or stages) copies of; peers' holds are not included.
func (e *Engine) EachHold(fn func(resource, domain string, holds int64)) {
	for name, r := range e.res {
		if !r.unlimited {
			r.k.eachHold(func(domain string, holds int64) { fn(name, domain, holds) })
		}
	}
}

// recorder is a resource's Recorder as its kind calls it (r nil when the
// node runs alone). Recorder's contract is that it keeps neither domain
// nor taken, so recorder hides them from escape analysis: a decision's
// domain, which the API converts from its request buffer on the stack, and
// its record of the tiers taken stay there instead of moving to the heap
// for a call the compiler cannot see through.
type recorder struct{ r Recorder }

func (w recorder) on() bool { return w.r != nil }

func (w recorder) tierHits(domain string, at, total int64, taken []int64, entered uint64) {
	w.r.TierHits(hideString(domain), at, total, hideSlice(taken), entered)
}

func (w recorder) spend(domain string, at, n int64)   { w.r.Spend(hideString(domain), at, n) }
func (w recorder) refund(domain string, at, n int64)  { w.r.Refund(hideString(domain), at, n) }
func (w recorder) reset(domain string, at int64) bool { return w.r.Reset(hideString(domain), at) }
func (w recorder) tierRefund(domain string, at, total int64, taken []int64) {
	w.r.TierRefund(hideString(domain), at, total, hideSlice(taken))
}

// hide returns p such that escape analysis does not follow it (the pointer
// goes through a uintptr). The callee must not keep it.
func hide[T any](p *T) *T {
	x := uintptr(unsafe.Pointer(p))
	return *(**T)(unsafe.Pointer(&x))
}

func hideString(s string) string { return unsafe.String(hide(unsafe.StringData(s)), len(s)) }

func hideSlice[T any](s []T) []T { return unsafe.Slice(hide(unsafe.SliceData(s)), len(s)) }

// Contribution is one node's share of a key: what the cluster counts of it
// from each origin (reconcile fills it; GET /v1/state shows it under
// "origins"). It lives here, below both, so that the API shows it without
// linking the cluster.
type Contribution struct {
	Origin string `json:"origin"`
	Self   bool   `json:"self,omitempty"`
	Gone   bool   `json:"gone,omitempty"`
	// Counts are its hits per slot still inside the slot's window (tiers:
	// [0] every tier, [i] tier i; gcra: [0] spends, [1] refunds).
	Counts []int64 `json:"counts,omitempty"`
	// Entries are its tier entries, Unix ms by tier.
	Entries map[int]int64 `json:"entries,omitempty"`
	Holds   int64         `json:"holds,omitempty"`
	// LastSyncAgeMs is how long ago its last packet arrived.
	LastSyncAgeMs int64 `json:"last_sync_age_ms,omitempty"`
}
