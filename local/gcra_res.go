package local

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/config"
)

// gcra_res.go is a gcra resource's storage, locks and recording: its
// params per domain, its buckets (one TAT per key), the idle gaps of a
// clustered bucket (gcraidle.go) and its recorder for the cluster, around
// the pure rules of gcra.go.

// gcraRes is one gcra resource.
type gcraRes struct {
	def  *gcraParams
	over map[string]*gcraParams
	keys *store[int64] // TAT, Unix ns
	// spill holds the TATs keys past max_keys share (overflowKey): they
	// are still limited, maybe over-counted, never under-counted.
	spill *store[int64]
	rec   recorder // off alone
	// idle holds, for a clustered resource, the idle gaps keys' own spends
	// discarded lately (gcraidle.go); nil alone.
	idle *store[idleLog]
	// width is the widest time bucket a peer's spend came in, ns: a
	// clustered key is kept that much longer (keep).
	width atomic.Int64
	stats *Stats
}

var _ kindRes = (*gcraRes)(nil)

// gcraFromConfig returns the state of a configured gcra resource, its key
// stores of shards shards.
func gcraFromConfig(rc *config.Resource, maxKeys, shards int, st *Stats) *gcraRes {
	def := newGCRAParams(rc.Burst, rc.Count, rc.Period)
	gr := &gcraRes{def: &def, keys: newStoreOf[int64](maxKeys, shards), spill: newStoreOf[int64](overflowKeys, shards), stats: st}
	for d, o := range rc.Domains {
		if gr.over == nil {
			gr.over = make(map[string]*gcraParams)
		}
		op := newGCRAParams(o.Burst, o.Count, o.Period)
		gr.over[d] = &op
	}
	return gr
}

func (gr *gcraRes) params(domain string) *gcraParams {
	if gr.over != nil {
		if p, ok := gr.over[domain]; ok {
			return p
		}
	}
	return gr.def
}

// decide decides request(q, m) of domain at t (Unix ns) into d.
func (gr *gcraRes) decide(d *Decision, domain string, t, q, m int64) error {
	p := gr.params(domain)
	if q > p.burst {
		return fmt.Errorf("%w: copies: %d is over the burst of %d", ErrCostOverBurst, q, p.burst)
	}
	sh, h := gr.keys.lock(domain)
	var tat int64
	ptat := sh.find(domain, h)
	// A key not stored starts from its overflow TAT (its spends past the
	// cap may be there); one that finds no room is decided on it, under
	// the overflow shard's lock (taken after the key's, never before).
	var osh *shard[int64]
	var oh uint64
	var okey string
	if ptat != nil {
		tat = *ptat
	} else if gr.spill.len() > 0 || gr.keys.len() >= int(gr.keys.max.Load()) {
		okey = overflowKey(h)
		osh, oh = gr.spill.lock(okey)
		tat, _ = osh.get(okey, oh)
	}
	o := gcraDecide(p, tat, t, q, m)
	spilled := false
	if o.changed && ptat == nil {
		placed, evicted := gr.keys.insertEvict(sh, domain, h, o.tat, gr.idleAt(t))
		if evicted {
			gr.stats.Evicted.Add(1)
		}
		if !placed {
			if osh == nil { // the store filled since: decide on the overflow TAT
				okey = overflowKey(h)
				osh, oh = gr.spill.lock(okey)
				otat, _ := osh.get(okey, oh)
				o = gcraDecide(p, otat, t, q, m)
			}
			if o.changed {
				if po := osh.find(okey, oh); po != nil {
					*po = o.tat
				} else {
					gr.spill.insert(osh, okey, oh, o.tat) // never full: overflowKeys keys at most
				}
			}
			spilled = true
		}
	}
	if osh != nil {
		osh.mu.Unlock()
		if spilled || !o.changed {
			gr.stats.Overflowed.Add(1) // decided on its overflow TAT
		}
	}
	if o.changed && gr.rec.on() {
		gr.rec.spend(domain, t/1e6, o.granted)
		if tat < t && gr.idle != nil && !spilled {
			gr.noteIdle(domain, tat, t)
		}
	}
	if ptat != nil && o.changed {
		*ptat = o.tat
	}
	sh.mu.Unlock()
	*d = Decision{
		Kind: config.KindGCRA, Granted: int(o.granted), Remaining: int(o.remaining),
		RetryAfter: time.Duration(o.retryAfter), ResetAfter: time.Duration(o.resetAfter),
		GCRABurst: int(p.burst), GCRAPeriod: p.period, GCRARefill: time.Duration(gcraRefill(p, &o, t)),
	}
	return nil
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
	gr, ok := kindOf[*gcraRes](r)
	if !ok {
		if r == nil || r.unlimited {
			return MaxCopies, nil
		}
		return 0, fmt.Errorf("%w: %q is %s resource; refund is for gcra resources", ErrWrongKind, r.name, kindArticle(r.kind))
	}
	return int(gr.refund(domain, t.UnixNano(), int64(copies))), nil
}

// refund gives q tokens back to domain's bucket at t (Unix ns) and returns
// what remains.
func (gr *gcraRes) refund(domain string, t, q int64) int64 {
	p := gr.params(domain)
	sh, h := gr.keys.lock(domain)
	defer sh.mu.Unlock()
	var tat int64
	ptat := sh.find(domain, h)
	if ptat != nil {
		tat = *ptat
	}
	if gr.rec.on() && tat > t && q > 0 {
		gr.rec.refund(domain, t/1e6, q)
	}
	tat, remaining := gcraRefund(p, tat, t, q)
	if ptat != nil {
		if tat <= t && gr.idle == nil { // clustered, a key outlives its TAT (applyCount)
			gr.keys.remove(sh, domain, h)
		} else {
			*ptat = tat
		}
	}
	return remaining
}

// state reports domain's TAT at t (when the bucket is not full) and the
// decision of a peek.
func (gr *gcraRes) state(domain string, t time.Time) (ks KeyState) {
	sh, h := gr.keys.lock(domain)
	tat, ok := sh.get(domain, h)
	sh.mu.Unlock()
	if ok && tat > t.UnixNano() {
		ks.Tracked, ks.TAT = true, time.Unix(0, tat)
	}
	var d Decision
	_ = gr.decide(&d, domain, t.UnixNano(), 0, 0)
	ks.Peek = &d
	return ks
}

// idleAt returns whether a bucket of TAT tat is idle at t (Unix ns): full
// again, and, clustered, kept idleKeep past that (sweep's rule).
func (gr *gcraRes) idleAt(t int64) func(tat int64) bool {
	if gr.idle == nil {
		return func(tat int64) bool { return tat <= t }
	}
	keep := gr.keep()
	return func(tat int64) bool { return tat+keep <= t }
}

// keep is how long, ns, a clustered key outlives its TAT: idleKeep, plus
// the widest bucket a peer's spend came in. A peer's spend is placed at
// its bucket's start, up to a bucket before it happened, so its TAT may
// have passed when it arrives while the spends that follow it in the same
// bucket are still on their way: they must find it, or each would start
// from a full bucket and be lost (a burst of a peer's spends shipped in
// parts, each alone refilled by the time it lands).
func (gr *gcraRes) keep() int64 { return idleKeep.Nanoseconds() + gr.width.Load() }

// sweep drops the buckets that are full again by t; a clustered one is
// kept idleKeep past its TAT, with its idle gaps (see applyCount).
func (gr *gcraRes) sweep(t time.Time) {
	tn := t.UnixNano()
	gr.spill.sweep(func(tat int64) bool { return tat <= tn })
	if gr.idle == nil {
		gr.keys.sweep(func(tat int64) bool { return tat <= tn })
		return
	}
	keep := gr.keep()
	gr.keys.sweep(func(tat int64) bool { return tat+keep <= tn })
	gr.idle.sweep(func(l idleLog) bool { return l.last()+keep <= tn })
}

func (gr *gcraRes) load() (keys, holds, peerHolds int) { return gr.keys.len(), 0, 0 }

// adopt keeps old's buckets and idle gaps: what remains is read with the
// new burst and emission interval.
func (gr *gcraRes) adopt(old kindRes, rc *config.Resource) kindRes {
	o := old.(*gcraRes)
	gr.keys, gr.spill, gr.idle = o.keys, o.spill, o.idle
	maxKeys := int64(rc.MaxKeys)
	gr.keys.max.Store(maxKeys)
	if gr.idle != nil {
		gr.idle.max.Store(maxKeys)
	}
	return gr
}

// attach records the resource's spends and refunds in c, and keeps its
// buckets' idle gaps from now on.
func (gr *gcraRes) attach(c Cluster, name string, rc *config.Resource, a Applier) {
	gr.rec = recorder{c.Register(name, specOf(name, rc), a)}
	if gr.idle == nil {
		gr.idle = newStoreOf[idleLog](int(gr.keys.max.Load()), len(gr.keys.shards))
	}
}

// idleKeep is how long a clustered gcra key outlives its TAT, and its idle
// gaps the newest of them: a peer's spend dated before the TAT must still
// find both to land where it happened. It covers the resends of a change
// (16 ticks: 4 s at 250 ms, 16 s at 1 s) and the resync after a silence. A
// spend delivered later than that (a long partition) lands on a bucket
// that forgot its past and grants more than one exact bucket would: the
// over-admission of a partition, which fail open accepts.
const idleKeep = 30 * time.Second

// widen records w (ns) as the widest bucket a peer's spend came in, up to
// maxWidth.
func (gr *gcraRes) widen(w int64) {
	for w <= maxWidth {
		cur := gr.width.Load()
		if w <= cur || gr.width.CompareAndSwap(cur, w) {
			return
		}
	}
}

// maxWidth bounds the bucket width keep adds, ns: the mesh's widest bucket
// is a minute; a wider claim is no peer's and adds nothing.
const maxWidth = int64(time.Minute)

// noteIdle records, in a locked key shard, that a spend at t found domain's
// bucket idle since tat. A full idle store records nothing (a late peer's
// spend then finds no gap to fill: toward denial).
func (gr *gcraRes) noteIdle(domain string, tat, t int64) {
	sh, h := gr.idle.lock(domain)
	if l := sh.find(domain, h); l != nil {
		l.note(tat, t)
	} else {
		var l idleLog
		l.note(tat, t)
		gr.idle.insert(sh, domain, h, l)
	}
	sh.mu.Unlock()
}

// applyCount applies a peer's spend (SlotSpend) or refund (SlotRefund) of
// n tokens to domain's bucket. A spend dated at is inserted into the
// bucket's chain where it happened (gcraApplySpend); a refund gives tokens
// back now. The key is kept for keep (idleKeep and a bucket) after its TAT
// passes, so that a later-delivered spend dated before it still sees it.
func (gr *gcraRes) applyCount(domain string, slot int, at, width, n, now int64) {
	p := gr.params(domain)
	atNs, nowNs := at*1e6, now*1e6
	gr.widen(width * 1e6)
	sh, h := gr.keys.lock(domain)
	defer sh.mu.Unlock()
	ptat, tat := gr.bucket(sh, domain, h)
	switch slot {
	case SlotSpend:
		if gr.idle == nil {
			tat = gcraApplySpend(p, tat, atNs, n, nil)
			break
		}
		ish, ih := gr.idle.lock(domain) // after the key's shard, as in decide
		var l idleLog
		pl := ish.find(domain, ih)
		if pl != nil {
			l = *pl
		}
		tat = gcraApplySpend(p, tat, atNs, n, &l)
		switch {
		case pl != nil:
			*pl = l
		case l.n > 0:
			gr.idle.insert(ish, domain, ih, l)
		}
		ish.mu.Unlock()
	case SlotRefund:
		tat, _ = gcraRefund(p, tat, nowNs, n)
	default:
		return
	}
	switch {
	case ptat != nil:
		*ptat = tat
	case tat > nowNs || (gr.idle != nil && tat+gr.keep() > nowNs):
		gr.keepOrSpill(sh, domain, h, tat, nowNs)
	}
}

// A gcra resource has no tiers and holds no copies.

// applyEntry takes a peer's TAT of domain's bucket (SlotTAT, at in Unix
// ms) as a floor: the bucket holds at least the debt the peer's does. Any
// other slot is no gcra entry and changes nothing.
func (gr *gcraRes) applyEntry(domain string, slot int, at, now int64) {
	if slot != SlotTAT || at <= now {
		return
	}
	// No bucket owes more than its burst offset: a TAT further ahead is
	// no peer's (clamped).
	tat := min(at*1e6, now*1e6+gr.params(domain).b)
	sh, h := gr.keys.lock(domain)
	defer sh.mu.Unlock()
	if p := sh.find(domain, h); p != nil {
		*p = max(*p, tat)
		return
	}
	gr.keepOrSpill(sh, domain, h, tat, now*1e6)
}

// bucket returns where domain's TAT is stored in locked key shard sh (h
// its hash; nil when the key is not stored) and the TAT: a key not stored
// reads its overflow TAT (its spends past the cap may be there), whose
// shard is locked after the key's, never before.
func (gr *gcraRes) bucket(sh *shard[int64], domain string, h uint64) (*int64, int64) {
	if p := sh.find(domain, h); p != nil {
		return p, *p
	}
	if gr.spill.len() == 0 {
		return nil, 0
	}
	k := overflowKey(h)
	osh, oh := gr.spill.lock(k)
	tat, _ := osh.get(k, oh)
	osh.mu.Unlock()
	return nil, tat
}

// keepOrSpill stores a peer's TAT of a new key in locked key shard sh at
// now (Unix ns): in the store, in place of an idle key when it is full,
// else as a floor of the key's overflow TAT.
func (gr *gcraRes) keepOrSpill(sh *shard[int64], domain string, h uint64, tat, now int64) {
	placed, evicted := gr.keys.insertEvict(sh, domain, h, tat, gr.idleAt(now))
	if evicted {
		gr.stats.Evicted.Add(1)
	}
	if placed {
		return
	}
	gr.stats.Overflowed.Add(1)
	k := overflowKey(h)
	osh, oh := gr.spill.lock(k)
	if p := osh.find(k, oh); p != nil {
		*p = max(*p, tat)
	} else {
		gr.spill.insert(osh, k, oh, tat)
	}
	osh.mu.Unlock()
}

// eachTAT calls fn with every domain whose TAT (Unix ns) is after now.
func (gr *gcraRes) eachTAT(now int64, fn func(domain string, tat int64)) {
	gr.keys.each(func(domain string, tat int64) {
		if tat > now {
			fn(domain, tat)
		}
	})
}

func (gr *gcraRes) release() int64               { return 0 }
func (gr *gcraRes) addRemote(string, int64)      {}
func (gr *gcraRes) eachHold(func(string, int64)) {}
