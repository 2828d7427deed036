package local

import (
	"time"

	"github.com/obol-dev/obol/reconcile"
)

// cluster.go joins the engine to the cluster: it records the hits the engine
// commits on the resource's reconcile handle, and it applies the growth of
// peers' counts to the engine's own state, so that a decision reads the
// merged view from memory and never waits for the network.

var _ reconcile.Applier = (*Engine)(nil)

// Attach joins e to cluster c: every hit e commits on a configured tiers or
// gcra resource is recorded in c for shipping, and c applies its peers'
// counts and holds to e. Call it once, before e decides anything; an engine
// made by Reload is attached to the same cluster.
func (e *Engine) Attach(c *reconcile.Cluster) {
	e.clu = c
	for name, r := range e.res {
		if r.unlimited {
			continue
		}
		switch {
		case r.tiers != nil:
			r.tiers.sync = c.Resource(name, e.cfg.Resources[name])
		case r.gcra != nil:
			r.gcra.sync = c.Resource(name, e.cfg.Resources[name])
			if r.gcra.idle == nil {
				r.gcra.idle = newStore[idleLog](int(r.gcra.keys.max.Load()))
			}
		case r.copies != nil:
			c.Resource(name, e.cfg.Resources[name])
		}
	}
	c.SetApplier(e)
}

// Cluster returns the cluster e is attached to, or nil.
func (e *Engine) Cluster() *reconcile.Cluster { return e.clu }

// ApplyCount adds n hits a peer made (or, for gcra, tokens it spent or
// refunded) to resource/domain's slot, made in the time bucket [at,
// at+width) (Unix ms) and placed at its start, as of now. Tiers slot 0 is the domain's and the
// resource's last second (hard and global limits), slot i is tier i, whose
// hits count only while an instance is active and they are inside its
// window. Keys of unknown or unlimited resources are ignored; a new key is
// added when the store has room (else the hits are dropped: lenient).
func (e *Engine) ApplyCount(resource, domain string, slot int, at, width, n, now int64) {
	r, ok := e.res[resource]
	if !ok || r.unlimited || n <= 0 {
		return
	}
	switch {
	case r.tiers != nil:
		r.tiers.applyCount(domain, slot, at, width, n, now)
	case r.gcra != nil:
		r.gcra.applyCount(domain, slot, at, n, now)
	}
}

// ApplyEntry records that a peer entered tier slot of resource/domain at at
// (Unix ms). Entries merge earliest-wins per instance: an entry that
// overlaps the local instance (each began before the other ended) moves its
// start back to the earlier one; one after the local instance ended starts a
// new instance; an older one that has ended by now changes nothing.
func (e *Engine) ApplyEntry(resource, domain string, slot int, at, now int64) {
	r, ok := e.res[resource]
	if !ok || r.unlimited || r.tiers == nil || slot < 1 {
		return
	}
	r.tiers.applyEntry(domain, slot-1, at, now)
}

// AddRemoteHolds changes the copies peers hold of resource/domain by n.
func (e *Engine) AddRemoteHolds(resource, domain string, n int64) {
	r, ok := e.res[resource]
	if !ok || r.copies == nil || n == 0 {
		return
	}
	e.book.mu.Lock()
	r.copies.addRemote(domain, n)
	e.book.mu.Unlock()
}

// EachHold calls fn for every configured resource and domain this node holds
// (or stages) copies of; peers' holds are not included.
func (e *Engine) EachHold(fn func(resource, domain string, holds int64)) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	for name, r := range e.res {
		if r.copies == nil || r.unlimited {
			continue
		}
		for d, v := range r.copies.perDom {
			if v > 0 {
				fn(name, d, v)
			}
		}
	}
}

// keyOrNew returns domain's state in a locked shard, adding it when absent;
// nil when the store is full.
func (tr *tiersRes) keyOrNew(domain string) (*shard[*tiersState], *tiersState) {
	p := tr.params(domain)
	sh, h := tr.keys.lock(domain)
	st, ok := sh.get(domain, h)
	if !ok {
		st = newTiersState(len(p.tiers))
		if !tr.keys.insert(sh, domain, h, st) {
			return sh, nil
		}
	}
	st.fit(p)
	return sh, st
}

func (tr *tiersRes) applyCount(domain string, slot int, at, width, n, now int64) {
	p := tr.params(domain)
	if slot == 0 {
		if now-at >= second {
			return
		}
		tr.ring.mu.Lock()
		tr.ring.add(at, n)
		tr.ring.mu.Unlock()
	}
	if slot > len(p.tiers) {
		return
	}
	sh, st := tr.keyOrNew(domain)
	defer sh.mu.Unlock()
	if st == nil {
		return
	}
	st.settle(p, now)
	if slot == 0 {
		st.recent.insert(at, n)
		st.resetAt = max(st.resetAt, at+second)
	} else {
		in, tp := &st.inst[slot-1], &p.tiers[slot-1]
		if phaseAt(tp, in, now) != phaseActive {
			return // the instance those hits belong to has ended, or they arrived before its entry
		}
		if now-at >= tp.window || at+width <= in.entered {
			return // out of the window, or made in an earlier instance
		}
		at = max(at, in.entered) // a hit of this instance was made after it began
		in.hits.insert(at, n)
		st.resetAt = max(st.resetAt, in.entered+tp.active+tp.cooldown)
	}
	st.retryM = 0
}

func (tr *tiersRes) applyEntry(domain string, i int, at, now int64) {
	p := tr.params(domain)
	if i >= len(p.tiers) {
		return
	}
	tp := &p.tiers[i]
	end := at + tp.active + tp.cooldown
	if end <= now {
		return // that instance is over
	}
	sh, st := tr.keyOrNew(domain)
	defer sh.mu.Unlock()
	if st == nil {
		return
	}
	st.settle(p, now)
	in := &st.inst[i]
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
	st.resetAt = max(st.resetAt, in.entered+tp.active+tp.cooldown)
	st.retryM = 0
}

// idleKeep is how long a clustered gcra key outlives its TAT, and its idle
// gaps the newest of them: a peer's spend dated before the TAT must still
// find both to land where it happened. It covers the resends of a change
// (16 ticks: 4 s at 250 ms, 16 s at 1 s) and the resync after a silence. A
// spend delivered later than that (a long partition) lands on a bucket
// that forgot its past and grants more than one exact bucket would: the
// over-admission of a partition, which fail open accepts.
const idleKeep = 30 * time.Second

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

// applyCount applies a peer's spend or refund of n tokens to domain's
// bucket. A spend dated at is inserted into the bucket's chain where it
// happened (gcraApplySpend); a refund gives tokens back now. The key is
// kept for idleKeep after its TAT passes, so that a later-delivered spend
// dated before it still sees it.
func (gr *gcraRes) applyCount(domain string, slot int, at, n, now int64) {
	p := gr.params(domain)
	atNs, nowNs := at*1e6, now*1e6
	sh, h := gr.keys.lock(domain)
	defer sh.mu.Unlock()
	ptat := sh.find(domain, h)
	var tat int64
	if ptat != nil {
		tat = *ptat
	}
	switch slot {
	case reconcile.SlotSpend:
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
	case reconcile.SlotRefund:
		tat, _ = gcraRefund(p, tat, nowNs, n)
	default:
		return
	}
	switch {
	case ptat != nil:
		*ptat = tat
	case tat > nowNs || (gr.idle != nil && tat+idleKeep.Nanoseconds() > nowNs):
		gr.keys.insert(sh, domain, h, tat)
	}
}

// addRemote changes the holds peers have of domain (the caller holds the
// book's lock). A peer's holds count against every limit like local ones.
func (r *copiesRes) addRemote(domain string, n int64) {
	if r.remote == nil {
		r.remote = make(map[string]int64)
	}
	if len(r.remoteGroup) < len(r.groups) {
		r.remoteGroup = append(r.remoteGroup, make([]int64, len(r.groups)-len(r.remoteGroup))...)
	}
	v := r.remote[domain] + n
	if v <= 0 {
		n -= v // never below zero
		delete(r.remote, domain)
	} else {
		r.remote[domain] = v
	}
	r.remoteTotal += n
	for _, g := range r.byDomain[domain] {
		r.remoteGroup[g] += n
	}
}
