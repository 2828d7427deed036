package local

import (
	"time"

	"github.com/obol-dev/obol/config"
)

// tiers_res.go is a tiers resource's storage, locks and recording: its
// params per domain, its key store, its last second of hits and its
// recorder for the cluster, around the pure rules of tiers.go.

// unconfiguredLimit is the tier limit of the most permissive config, the one
// an unconfigured resource (or one whose namespace ignores its config) gets:
// one tier of MaxCopies hits per second, no hard or global limit.
const unconfiguredLimit = MaxCopies

// tiersRes is one tiers resource.
type tiersRes struct {
	def  *tiersParams
	over map[string]*tiersParams
	keys *store[*tiersState]
	// spill holds the states keys past max_keys share (overflowKey): they
	// are still limited, maybe over-counted, never under-counted.
	spill *store[*tiersState]
	ring  *secondRing
	rec   recorder // records committed hits for the cluster; off alone
	stats *Stats
}

var _ kindRes = (*tiersRes)(nil)

// tiersFromConfig returns the state of a configured tiers resource, its key
// stores of shards shards.
func tiersFromConfig(rc *config.Resource, maxKeys, shards int, st *Stats) *tiersRes {
	tr := &tiersRes{def: tiersParamsOf(rc.Tiers, limitOf(rc.HardLimit), limitOf(rc.GlobalLimit)),
		keys: newStoreOf[*tiersState](maxKeys, shards), spill: newStoreOf[*tiersState](overflowKeys, shards), ring: &secondRing{}, stats: st}
	for d, o := range rc.Domains {
		if tr.over == nil {
			tr.over = make(map[string]*tiersParams)
		}
		tr.over[d] = tiersParamsOf(o.Tiers, limitOf(o.HardLimit), limitOf(rc.GlobalLimit))
	}
	return tr
}

// unlimitedTiers returns the state of an unlimited resource: one tier of
// unconfiguredLimit hits per second.
func unlimitedTiers(maxKeys int, st *Stats) *tiersRes {
	p := newTiersParams([]tierParamsInput{{limit: unconfiguredLimit, window: time.Second, active: time.Second}}, NoLimit, NoLimit)
	return &tiersRes{def: p, keys: newStore[*tiersState](maxKeys), spill: newStore[*tiersState](overflowKeys), ring: &secondRing{}, stats: st}
}

// tiersParamsOf returns the params of a configured tier list.
func tiersParamsOf(ts []config.Tier, hard, global int) *tiersParams {
	in := make([]tierParamsInput, len(ts))
	for i, t := range ts {
		in[i] = tierParamsInput{limit: t.Limit, window: t.Window, active: t.Active, cooldown: t.Cooldown, skippable: t.Skippable}
	}
	return newTiersParams(in, hard, global)
}

func (tr *tiersRes) params(domain string) *tiersParams {
	if tr.over != nil {
		if p, ok := tr.over[domain]; ok {
			return p
		}
	}
	return tr.def
}

// decide decides request(q, m) of domain at t (Unix ms) into d.
func (tr *tiersRes) decide(d *Decision, domain string, t, q, m int64) {
	tr.decideRec(d, domain, t, q, m, nil)
}

// decideRec is decide, and, when keep is not nil, writes into it what the
// decision committed tier by tier (a settle ticket's record).
func (tr *tiersRes) decideRec(d *Decision, domain string, t, q, m int64, keep *tierRecord) {
	p := tr.params(domain)
	var ring *secondRing
	if p.global >= 0 {
		ring = tr.ring
		ring.mu.Lock()
		defer ring.mu.Unlock()
	}
	sh, h := tr.keys.lock(domain)
	st, ok := sh.get(domain, h)
	keys, key := tr.keys, domain // where the state lives
	if !ok {
		st = tr.fresh(h, p)
		if q > 0 {
			if sh, h, key, st = tr.place(sh, domain, h, st, p, t); key != domain {
				keys, ok = tr.spill, true
			}
		}
	}
	rec := keep
	var recBuf tierRecord
	if rec == nil && tr.rec.on() {
		rec = &recBuf
	}
	o := tiersDecide(p, st, t, q, m, ring, rec)
	if tr.rec.on() && o.granted > 0 {
		tr.rec.tierHits(domain, t, o.granted, rec.taken[:min(len(p.tiers), maxTake)], rec.entered)
	}
	if !ok && q > 0 && o.granted == 0 {
		keys.remove(sh, key, h) // a rejected first request leaves nothing behind
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

// state reports domain's tiers at t and the decision of a peek.
func (tr *tiersRes) state(domain string, t time.Time) (ks KeyState) {
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
	tr.decide(&d, domain, tm, 0, 0)
	ks.Peek = &d
	return ks
}

// sweep drops the keys that have fully reset by t.
func (tr *tiersRes) sweep(t time.Time) {
	tm := t.UnixMilli()
	tr.keys.sweep(func(s *tiersState) bool { return s.resetAt <= tm })
	tr.spill.sweep(func(s *tiersState) bool { return s.resetAt <= tm })
}

func (tr *tiersRes) load() (keys, holds, peerHolds int) { return tr.keys.len(), 0, 0 }

// adopt keeps old's keys (with their tier instances and hits) and last
// second under the new limits; a key whose tier list changed length is
// fitted lazily on its next decision.
func (tr *tiersRes) adopt(old kindRes, rc *config.Resource) kindRes {
	o := old.(*tiersRes)
	tr.keys, tr.spill, tr.ring = o.keys, o.spill, o.ring
	tr.keys.max.Store(int64(rc.MaxKeys))
	return tr
}

func (tr *tiersRes) attach(c Cluster, name string, rc *config.Resource, a Applier) {
	tr.rec = recorder{c.Register(name, specOf(name, rc), a)}
}

// keyOrNew returns domain's state in a locked shard, fitted to p, adding
// it when absent (past max_keys: its overflow state, place) at now (ms).
func (tr *tiersRes) keyOrNew(domain string, p *tiersParams, now int64) (*shard[*tiersState], *tiersState) {
	sh, h := tr.keys.lock(domain)
	st, ok := sh.get(domain, h)
	if !ok {
		sh, _, _, st = tr.place(sh, domain, h, tr.fresh(h, p), p, now)
	}
	st.fit(p)
	return sh, st
}

// fresh returns the state a new key of hash h starts from: a copy of its
// overflow state when it has one (its hits past the cap may be there),
// else an empty one. sh of the key store is locked (the overflow store's
// shard is locked after it, never before).
func (tr *tiersRes) fresh(h uint64, p *tiersParams) *tiersState {
	if tr.spill.len() > 0 {
		k := overflowKey(h)
		osh, oh := tr.spill.lock(k)
		o, ok := osh.get(k, oh)
		var c *tiersState
		if ok {
			c = o.clone()
		}
		osh.mu.Unlock()
		if c != nil {
			c.fit(p)
			return c
		}
	}
	return newTiersState(len(p.tiers))
}

// place stores new state st of domain (hash h) in locked key shard sh at t
// (ms): in the store, in place of an idle key when it is full, else (sh
// unlocked) in domain's overflow state, whose shard is returned locked
// with its hash, its key and its state (fitted).
func (tr *tiersRes) place(sh *shard[*tiersState], domain string, h uint64, st *tiersState, p *tiersParams, t int64) (*shard[*tiersState], uint64, string, *tiersState) {
	ok, evicted := tr.keys.insertEvict(sh, domain, h, st, func(s *tiersState) bool { return s.resetAt <= t })
	if evicted {
		tr.stats.Evicted.Add(1)
	}
	if ok {
		return sh, h, domain, st
	}
	sh.mu.Unlock()
	tr.stats.Overflowed.Add(1)
	k := overflowKey(h)
	osh, oh := tr.spill.lock(k)
	o, found := osh.get(k, oh)
	if !found {
		o = newTiersState(len(st.inst))
		tr.spill.insert(osh, k, oh, o) // never full: overflowKeys keys at most
	}
	o.fit(p)
	return osh, oh, k, o
}

// applyCount merges a peer's hits (tiers.go, mergeCount); slot 0's count
// in the resource's last second too. A new key is added when the store
// has room, else counted in its overflow state. n is clamped to the
// largest limit of the resource + 1 (claimBound): hits past it already
// put every window holding them over every limit, so the clamp changes no
// decision a real count makes.
func (tr *tiersRes) applyCount(domain string, slot int, at, width, n, now int64) {
	if slot >= SlotTierRefund {
		tr.applyRefund(domain, slot-SlotTierRefund, at, width, n, now)
		return
	}
	p := tr.params(domain)
	if !p.countMatters(slot, at, now) {
		return
	}
	n = min(n, p.claimBound())
	if slot == 0 {
		tr.ring.mu.Lock()
		tr.ring.add(at, n)
		tr.ring.mu.Unlock()
	}
	sh, st := tr.keyOrNew(domain, p, now)
	defer sh.mu.Unlock()
	st.mergeCount(p, slot, at, width, n, now)
}

// applyEntry merges a peer's entry into tier slot (tiers.go, mergeEntry).
func (tr *tiersRes) applyEntry(domain string, slot int, at, now int64) {
	p := tr.params(domain)
	if slot < 1 || !p.entryMatters(slot-1, at, now) {
		return
	}
	sh, st := tr.keyOrNew(domain, p, now)
	defer sh.mu.Unlock()
	st.mergeEntry(p, slot-1, at, now)
}

// A tiers resource holds no copies.

func (tr *tiersRes) release() int64               { return 0 }
func (tr *tiersRes) addRemote(string, int64)      {}
func (tr *tiersRes) eachHold(func(string, int64)) {}
