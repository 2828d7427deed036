package local

import (
	"time"
	"unsafe"

	"github.com/obol-dev/obol/config"
)

// cluster.go is the engine's side of the cluster, with no network in it:
// the two interfaces a cluster implements (Cluster, Recorder), the slots
// and spans in which the engine's records are counted, Attach, and the
// Applier methods through which a cluster applies its peers' counts,
// entries and holds to the engine's own state, so that a decision reads
// the merged view from memory and never waits for the network.

// Cluster is what Attach joins an engine to: package reconcile's Cluster
// implements it. Its methods are called by Attach only.
type Cluster interface {
	// Recorder returns the recorder of resource name, configured as rc
	// (a configured tiers, gcra or copies resource: copies ship holds, not
	// counts, and record nothing). A reload calls it again for each
	// resource with its new config; the recorder a name gets may be the
	// same.
	Recorder(name string, rc *config.Resource) Recorder
	// SetEngine makes e the engine the cluster applies its peers' counts,
	// tier entries and holds to (Applier), and asks of this node's holds;
	// an engine made by Reload replaces its predecessor.
	SetEngine(e *Engine)
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
)

// Span is how long, in ms, a record of one slot matters to a decision: Hits
// for a hit (a spend, a refund), which leaves with its window; Entry for a
// tier entry, which ends with the tier's active and cooldown (0 for a slot
// that has none).
type Span struct{ Hits, Entry int64 }

// TierSpans returns the spans of a tiers key's slots under the tier list
// ts, as the engine decides them: slot 0, the last second; slot i, tier i's
// window, and its active plus cooldown.
func TierSpans(ts []config.Tier) []Span {
	p := tiersParamsOf(ts, NoLimit, NoLimit)
	out := make([]Span, len(p.tiers)+1)
	out[SlotTotal] = Span{Hits: second}
	for i, tp := range p.tiers {
		out[i+1] = Span{Hits: tp.window, Entry: tp.active + tp.cooldown}
	}
	return out
}

// GCRALife returns how long, in ms, a spend or a refund matters to a gcra
// bucket of burst, refilled by count per period: its burst offset
// burst·⌊period/count⌋, rounded up, at least 1 ms; a second when count is
// not positive.
func GCRALife(burst, count int, period time.Duration) int64 {
	if count <= 0 {
		return second
	}
	p := newGCRAParams(burst, count, period)
	return max(1, msCeil(time.Duration(p.b)))
}

// Attach joins e to cluster c: every hit e commits on a configured tiers or
// gcra resource is recorded in c for shipping, and c applies its peers'
// counts and holds to e. Call it once, before e decides anything; an engine
// made by Reload is attached to the same cluster.
func (e *Engine) Attach(c Cluster) {
	e.clu = c
	for name, r := range e.res {
		if !r.unlimited {
			r.k.attach(c, name, e.cfg.Resources[name])
		}
	}
	c.SetEngine(e)
}

// Cluster returns the cluster e is attached to, or nil.
func (e *Engine) Cluster() Cluster { return e.clu }

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
	r, ok := e.res[resource]
	if !ok || r.unlimited || n <= 0 {
		return
	}
	r.k.applyCount(domain, slot, at, width, n, now)
}

// ApplyEntry records that a peer entered tier slot of resource/domain at at
// (Unix ms). Entries merge earliest-wins per instance: an entry that
// overlaps the local instance (each began before the other ended) moves its
// start back to the earlier one; one after the local instance ended starts a
// new instance; an older one that has ended by now changes nothing.
func (e *Engine) ApplyEntry(resource, domain string, slot int, at, now int64) {
	r, ok := e.res[resource]
	if !ok || r.unlimited {
		return
	}
	r.k.applyEntry(domain, slot, at, now)
}

// EachTAT calls fn with every gcra key this node's engine holds whose
// bucket is not full at now (Unix ms): its theoretical arrival time, Unix
// ms (rounded up). A joiner takes it as a floor (ApplyEntry with SlotTAT).
func (e *Engine) EachTAT(now int64, fn func(resource, domain string, tat int64)) {
	for name, r := range e.res {
		if g, ok := r.k.(*gcraRes); ok && !r.unlimited {
			g.eachTAT(now*1e6, func(domain string, tat int64) { fn(name, domain, (tat+1e6-1)/1e6) })
		}
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

func (w recorder) spend(domain string, at, n int64)  { w.r.Spend(hideString(domain), at, n) }
func (w recorder) refund(domain string, at, n int64) { w.r.Refund(hideString(domain), at, n) }

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
