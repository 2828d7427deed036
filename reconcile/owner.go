package reconcile

import (
	"slices"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip/packet"
)

// owner.go is owner mode, past direct fan-out: each key has an owner and a
// successor on the Router's ring. A node sends a key's counts to those two
// only (tier entries, holds and heartbeats still go to every peer: they
// change a few times per window, not per hit). The owner keeps every
// origin's counts as any receiver does, and relays to each origin that has
// the key active (it sent counts the owner still keeps) the sum of
// everyone's counts but that origin's, per bucket: a sum message
// (packet.Packet.Sum). A node counts, per bucket, the greater of what sums
// told it and of what origins told it directly: each is a sum of counts
// that only grow, so each is a lower bound of the truth, and the greater
// one is too; nothing is counted twice when nodes disagree on the mode or
// an owner changes. The successor receives every count the owner does, so
// when the owner goes it relays on its first tick as the new owner.
//
// Near its limit (relayWide) a key's sums go to every live member, not only
// to its origins: a node about to decide a key it has not hit knows its
// count. Its successor stands by (ownerSilent): when another origin's
// growth of such a key is not followed by the owner's sum within a tick
// and a quarter, it relays the key as the owner would until a sum comes
// again, so an owner that fell silent before the mesh declared it gone
// leaves its keys near their limits relayed a little more than a tick late
// instead of not at all. While the owner relays, the successor sends
// nothing.
//
// This file holds the mode's decision and the relay; the routing of counts
// to owners is in ship.go, the sums' table in sum.go, and the follow-ups,
// reships and re-placement below in repair.go.
//
// Messages to one member (counts and sums) ship once when the Router
// numbers them per member and repairs them (TargetedRepairer, and the
// stream to every peer is repaired too): a member that misses one asks for
// it, and a sender that no longer keeps it reships everything it routes to
// that member (ReshipTo); 1, 4 and 16 ticks after its last message to a
// member a node sends it an empty one (followUps), so that a lost last
// message shows as a gap. Otherwise (a member of an earlier release)
// they follow the resend schedule (1, 2, 4, 8 and 16 ticks after a
// change). Either way a node re-ships every live bucket of a key whose
// owner or successor changed.

// DefaultOwnerFrom is Options.OwnerFrom's default, config's
// (config.DefaultOwnerFrom, which says why 100).
const DefaultOwnerFrom = config.DefaultOwnerFrom

// ownerLeave is how far under OwnerFrom the live count must fall before a
// node in owner mode returns to direct fan-out: a margin, so that a member
// flapping at the threshold does not switch the mesh back and forth.
func ownerLeave(from int) int { return from - max(1, from/8) }

// router returns the sender as a Router, or nil.
func (c *Cluster) router() Router {
	b := c.sender.Load()
	if b == nil {
		return nil
	}
	r, _ := b.s.(Router)
	return r
}

// Owners reports whether this node is in owner mode (as of its last tick).
func (c *Cluster) Owners() bool { return c.agg.Load() }

// decideMode sets, at a tick, whether the node is in owner mode, and
// reports whether the mode or the placement changed since the last tick
// (so that every live bucket must ship again to its new targets).
func (c *Cluster) decideMode(rt Router, live int) (agg, changed bool) {
	was := c.agg.Load()
	agg = false
	if rt != nil && c.ownerFrom > 0 && rt.Aggregates() {
		agg = live >= c.ownerFrom || (was && live >= ownerLeave(c.ownerFrom))
	}
	var epoch uint64
	if agg {
		epoch = rt.Epoch()
	}
	changed = agg != was || (agg && epoch != c.epoch)
	c.agg.Store(agg)
	c.epoch = epoch
	return agg, changed
}

// thrN is the n drift thresholds divide a limit by: the live count, twice
// it in owner mode, where the other half of the drift goes to the owner's
// relay (relayThreshold).
func (c *Cluster) thrN() int {
	if c.agg.Load() {
		return 2 * c.n()
	}
	return c.n()
}

// noteGrowth records, c.mu held, that origin o's count (nil: this node's
// own) of key h in (slot, bucket) grew by d at now (ms), for the relay:
// when this node owns h or is its successor, the bucket is to be relayed
// (changed before tick next), and at once when the key's unrelayed growth
// reached its relay threshold, if this node owns h or the owner seems
// silent (ownerSilent).
func (c *Cluster) noteGrowth(h uint64, o *origin, slot uint32, bucket int64, d int64, next uint32, now int64) {
	rt := c.router()
	if rt == nil {
		return
	}
	owner, succ := rt.Owners(h)
	if owner != c.name && succ != c.name {
		return
	}
	rk := c.tab.relayKey(h)
	rk.standby = owner != c.name
	if o != nil && !slices.Contains(rk.from, o) {
		rk.from = append(rk.from, o)
	}
	rk.mark(slot, bucket, next)
	rk.unrelayed += d
	if rk.standby && o != nil {
		if rk.pending == 0 {
			rk.pending = now
		}
		rk.owed += d
		if rk.owedAt == 0 && !c.tickOnly && rk.owed >= c.relayThreshold(h, slot) {
			rk.owedAt = now
		}
	}
	if rk.urgent || c.tickOnly || (rk.standby && !c.ownerSilent(h, rk, now)) {
		return
	}
	if rk.unrelayed >= c.relayThreshold(h, slot) {
		rk.urgent = true
		c.tab.urgent = append(c.tab.urgent, h)
		c.relayKick = true
	}
}

// ownerSilent reports, c.mu held, whether the owner of a key whose
// successor this node is (rk) seems silent at now (ms): the key is near
// its limit (wide), so its owner relays it to every member on the first
// tick after it grows, and at once (within a flush gap) once its unrelayed
// growth reaches the relay threshold; yet another origin's growth this
// node saw more than a tick and a quarter ago, or growth past the relay
// threshold seen more than three flush gaps and 10 ms ago, is still not
// followed by a sum of the key. The
// successor then relays the key as its owner would, at its threshold and
// on its ticks, until a sum comes again or the mesh declares the owner
// gone; otherwise it relays nothing, so standing by costs no bytes. A sum
// that was only late costs a relay the others count once (the greater of).
func (c *Cluster) ownerSilent(h uint64, rk *relayKey, now int64) bool {
	late := rk.pending > 0 && now-rk.pending > 5*int64(c.interval/time.Millisecond)/4
	if !late && rk.owedAt > 0 {
		late = now-rk.owedAt > int64((3*c.gap()+10*time.Millisecond)/time.Millisecond)
	}
	if !late {
		return false
	}
	if !rk.wide { // looked at only now: near the limit since?
		cells, _, limits := c.windowCounts(h, c.subscribers(h, rk), c.tab.pastHolders(h), now)
		rk.wide = wideNow(cells, limits, false)
	}
	return rk.wide
}

// subscribers returns, c.mu held, the origins rk holds that still keep
// key h in this incarnation (what the owner relays to), and keeps only
// those in rk.
func (c *Cluster) subscribers(h uint64, rk *relayKey) []*origin {
	t := c.tab
	subs := rk.from[:0]
	for _, o := range rk.from {
		if !o.gone && t.origins[o.name] == o && o.keys[h] != nil {
			subs = append(subs, o)
		}
	}
	clear(rk.from[len(subs):])
	rk.from = subs
	return subs
}

// relayThreshold is the unrelayed growth of key h's slot at which its
// owner relays at once: half the drift tolerance of the limit (the other
// half is the origins' own thresholds, thrN), at least 1. c.mu held.
func (c *Cluster) relayThreshold(h uint64, slot uint32) int64 {
	name, ok := c.tab.names[h]
	if !ok {
		name, ok = c.tab.selfNames[h]
	}
	if !ok {
		return 1
	}
	c.resMu.RLock()
	r := c.res[name.resource]
	c.resMu.RUnlock()
	if r == nil {
		return 1
	}
	p := r.p.Load()
	if int(slot) >= len(p.limit) {
		return 1 << 62
	}
	return threshold(p.drift, p.limit[slot], 2)
}

// relay appends to ts, c.mu held, the sums of the keys this node owns
// that are due at now (ms): at a tick (flush unset) the buckets due on the
// resend schedule at tick s, in a flush those changed since they were
// relayed and only of urgent keys. Each origin that has a key active gets
// the sum of every other origin's count and this node's; while the key is
// near its limit (wide), every other live member gets the sum of all
// counts too, every live bucket with the key's name when it became so.
func (c *Cluster) relay(rt Router, ts targets, s uint32, now int64, flush bool) {
	t := c.tab
	once := c.tonce.Load() // relayed once: a member that misses one asks for a reship
	var keys []uint64
	if flush {
		keys = t.urgent
		t.urgent = nil
	} else {
		keys = make([]uint64, 0, len(t.relays))
		for h := range t.relays {
			keys = append(keys, h)
		}
		slices.Sort(keys) // a run on a virtual clock does not depend on map order
		t.urgent = t.urgent[:0]
	}
	var rows []int
	var totals []uint64
	for _, h := range keys {
		rk := t.relays[h]
		if rk == nil {
			continue
		}
		rk.urgent = false
		if rk.standby && !c.ownerSilent(h, rk, now) {
			// a successor relays only for a silent owner, and then every
			// bucket it has not relayed yet (unsent) as well as those due
			if !flush {
				rk.rows = slices.DeleteFunc(rk.rows, func(r relayRow) bool { return !pending(s, r.changed) && !r.unsent })
			}
			continue
		}
		rows = rows[:0]
		for i := range rk.rows {
			r := &rk.rows[i]
			if r.unsent || (!flush && !once && due(s, r.changed)) {
				rows = append(rows, i)
				r.unsent = false
			}
		}
		rk.unrelayed = 0
		if len(rows) == 0 {
			if !flush {
				rk.rows = slices.DeleteFunc(rk.rows, func(r relayRow) bool { return !r.unsent && (once || !pending(s, r.changed)) })
			}
			continue
		}
		subs := c.subscribers(h, rk)
		past := c.tab.pastHolders(h) // counted in every sum, relayed to no one
		cells, name, limits := c.windowCounts(h, subs, past, now)
		was := rk.wide
		rk.wide = wideNow(cells, limits, was)
		totals = totals[:0]
		mine := t.own[h]
		for _, i := range rows {
			r := rk.rows[i]
			v := mine.value(r.slot, r.bucket)
			for _, o := range subs {
				v += o.keys[h].value(r.slot, r.bucket)
			}
			for _, o := range past {
				v += o.keys[h].value(r.slot, r.bucket)
			}
			totals = append(totals, v)
		}
		for _, o := range subs {
			var p *packet.Packet
			k := o.keys[h]
			for j, i := range rows {
				r := rk.rows[i]
				v := totals[j] - k.value(r.slot, r.bucket)
				if v == 0 {
					continue
				}
				if p == nil {
					p = ts.get(c, o.name, true)
				}
				p.Counts = append(p.Counts, packet.Count{Hash: h, Slot: r.slot, Bucket: r.bucket, Value: v})
			}
		}
		if rk.wide {
			c.relayWide(rt, ts, h, rk, subs, rows, totals, cells, name, was)
		}
		if !flush { // rows past their resends go until they change again
			rk.rows = slices.DeleteFunc(rk.rows, func(r relayRow) bool { return !r.unsent && (once || !pending(s, r.changed)) })
		}
	}
}

// Wide relays. A node that decides a key it has not hit within the
// window is not among the origins its owner relays to, and knows nothing
// of its count: far from the limit that costs nothing (every hit it
// admits ships to the owner, which counts it), near the limit it admits
// what the others already spent. So while a key's count in some slot is
// at least wideOn of that slot's limit, its owner relays the sum of all
// counts to every other live member too (the key is wide), and only
// under wideOff does it go back to its origins alone: near its limit a
// key costs what direct fan-out costs (a message per member per relay),
// far from it what owner mode does.
const (
	wideOn  = 0.5
	wideOff = 0.25
)

// relayWide appends, c.mu held, wide key h's sums for the live members
// that are not among its origins (subs): the totals of rows (indices into
// rk.rows) when it already was wide, every live bucket (cells) with the
// key's name when it just became so.
func (c *Cluster) relayWide(rt Router, ts targets, h uint64, rk *relayKey, subs []*origin, rows []int, totals []uint64, cells []packet.Count, name keyName, was bool) {
	var out []packet.Count
	if was {
		for j, i := range rows {
			if totals[j] > 0 {
				r := rk.rows[i]
				out = append(out, packet.Count{Hash: h, Slot: r.slot, Bucket: r.bucket, Value: totals[j]})
			}
		}
	} else {
		out = cells
	}
	if len(out) == 0 {
		return
	}
	skip := make(map[string]bool, len(subs)+1)
	skip[c.name] = true
	for _, o := range subs {
		skip[o.name] = true
	}
	var less []packet.Count
	for _, m := range rt.Members() {
		if skip[m] {
			continue
		}
		send := out
		if o := c.tab.origins[m]; o != nil && o.gone && o.keys[h] != nil {
			// A live member this node holds as gone (heard of in a
			// state, not yet from): its counts are among the past
			// holders', and it counts its own hits itself.
			less = less[:0]
			for _, cn := range out {
				if v := cn.Value - min(cn.Value, o.keys[h].value(cn.Slot, cn.Bucket)); v > 0 {
					cn.Value = v
					less = append(less, cn)
				}
			}
			if len(less) == 0 {
				continue
			}
			send = less
		}
		p := ts.get(c, m, true)
		p.Counts = append(p.Counts, send...)
		if !was {
			p.Names = append(p.Names, packet.Name{Hash: h, Resource: name.resource, Domain: name.domain})
		}
	}
	c.stats.wide.Add(1)
}

// windowCounts returns, c.mu held, key h's live buckets at now (ms) with
// the sum of this node's count and its origins' (subs) in each, the key's
// name, and the limit per slot (nil when the name or resource is not
// known: never wide).
func (c *Cluster) windowCounts(h uint64, subs, past []*origin, now int64) ([]packet.Count, keyName, []int64) {
	name, ok := c.tab.names[h]
	if !ok {
		name, ok = c.tab.selfNames[h]
	}
	if !ok {
		return nil, name, nil
	}
	c.resMu.RLock()
	r := c.res[name.resource]
	c.resMu.RUnlock()
	if r == nil {
		return nil, name, nil
	}
	p := r.p.Load()
	var cells []packet.Count
	add := func(k *remoteKey) {
		if k == nil {
			return
		}
		for _, cn := range k.counts {
			if int(cn.slot) >= len(p.life) || cn.bucket+p.life[cn.slot] <= now {
				continue
			}
			i := slices.IndexFunc(cells, func(x packet.Count) bool { return x.Slot == cn.slot && x.Bucket == cn.bucket })
			if i < 0 {
				cells = append(cells, packet.Count{Hash: h, Slot: cn.slot, Bucket: cn.bucket})
				i = len(cells) - 1
			}
			cells[i].Value += cn.value
		}
	}
	add(c.tab.own[h])
	for _, o := range subs {
		add(o.keys[h])
	}
	for _, o := range past {
		add(o.keys[h])
	}
	return cells, name, p.limit
}

// wideNow reports whether a key whose live buckets are cells is wide,
// given the limit per slot and whether it was: some slot's count at least
// wideOn of its limit, or, when it was, wideOff.
func wideNow(cells []packet.Count, limits []int64, was bool) bool {
	frac := wideOn
	if was {
		frac = wideOff
	}
	sum := make([]uint64, len(limits))
	for _, cn := range cells {
		if int(cn.Slot) < len(sum) {
			sum[cn.Slot] += cn.Value
		}
	}
	for slot, l := range limits {
		if l > 0 && float64(sum[slot]) >= frac*float64(l) {
			return true
		}
	}
	return false
}

// relayRow is one bucket of a key this node owns, for the relay's resend
// schedule.
type relayRow struct {
	slot    uint32
	bucket  int64
	changed uint32 // the tick it changed before
	unsent  bool   // changed since it was last relayed
}

// relayKey is a key this node owns: its buckets to relay and the origins
// that sent counts of it.
type relayKey struct {
	rows      []relayRow
	from      []*origin
	unrelayed int64
	urgent    bool
	wide      bool  // near its limit: relayed to every live member (relayWide)
	standby   bool  // this node is the key's successor: it relays only for a silent owner (ownerSilent)
	pending   int64 // standby: when another origin's growth not yet followed by a sum was first seen (ms), or 0
	owed      int64 // standby: that growth so far
	owedAt    int64 // standby: when it reached the relay threshold (ms), or 0
}

func (t *table) relayKey(h uint64) *relayKey {
	rk := t.relays[h]
	if rk == nil {
		rk = &relayKey{}
		t.relays[h] = rk
	}
	return rk
}

// mark notes that (slot, bucket) changed before tick next.
func (rk *relayKey) mark(slot uint32, bucket int64, next uint32) {
	for i := range rk.rows {
		if r := &rk.rows[i]; r.slot == slot && r.bucket == bucket {
			r.changed, r.unsent = next, true
			return
		}
	}
	rk.rows = append(rk.rows, relayRow{slot: slot, bucket: bucket, changed: next, unsent: true})
}
