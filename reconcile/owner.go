package reconcile

import (
	"slices"
	"strings"
	"time"

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

// DefaultOwnerFrom is Options.OwnerFrom's default: owner mode from 100
// live members. Below, direct fan-out costs fewer bytes with many sparse
// keys at their limits and admits a little less over them (one hop
// instead of two); from about 100 members on owner mode costs no more in
// that worst case and far less with hot keys, while direct fan-out's cost
// per node keeps growing with the members (docs/cluster.md, "Owner mode").
const DefaultOwnerFrom = 100

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

// reship marks every live bucket of every key of r changed before tick
// next: the placement or the mode changed, and each target must get them.
func (r *Res) reship(next uint32) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, k := range sh.keys {
			if len(k.counts) == 0 {
				continue
			}
			for j := range k.counts {
				k.counts[j].changed, k.counts[j].unsent = next, true
			}
			k.names = resends
			if !k.dirty {
				k.dirty = true
				sh.dirty = append(sh.dirty, k)
			}
		}
		sh.mu.Unlock()
	}
}

// targets are the packets of one shipment to single members: counts and
// sums apart (a sum is another message).
type targets map[target]*packet.Packet

type target struct {
	to  string
	sum bool
}

func (ts targets) get(c *Cluster, to string, sum bool) *packet.Packet {
	p, ok := ts[target{to, sum}]
	if !ok {
		p = c.packet()
		p.Sum = sum
		ts[target{to, sum}] = p
	}
	return p
}

// route hands the counts of up (grouped by key, as collect appends them)
// to each key's owner and successor in ts, with the key's name when up
// carries it; the counts of keys this node owns go to its own record
// (table.self), from which it relays. c.mu is not held.
func (c *Cluster) route(rt Router, up *packet.Packet, ts targets, next uint32, now int64) {
	if len(up.Counts) == 0 {
		return
	}
	names := make(map[uint64]*packet.Name, len(up.Names))
	for i := range up.Names {
		names[up.Names[i].Hash] = &up.Names[i]
	}
	var mine []packet.Count
	for i := 0; i < len(up.Counts); {
		h := up.Counts[i].Hash
		j := i + 1
		for j < len(up.Counts) && up.Counts[j].Hash == h {
			j++
		}
		owner, succ := rt.Owners(h)
		for _, to := range [2]string{owner, succ} {
			switch to {
			case "":
			case c.name:
				mine = append(mine, up.Counts[i:j]...)
			default:
				p := ts.get(c, to, false)
				p.Counts = append(p.Counts, up.Counts[i:j]...)
				if n := names[h]; n != nil {
					p.Names = append(p.Names, *n)
				}
			}
		}
		i = j
	}
	if len(mine) > 0 {
		c.mu.Lock()
		for _, n := range up.Names {
			c.tab.selfNames[n.Hash] = keyName{n.Resource, n.Domain}
		}
		for _, cn := range mine {
			if d := c.tab.selfKey(cn.Hash).setCount(cn.Slot, cn.Bucket, cn.Value); d > 0 {
				c.noteGrowth(cn.Hash, nil, cn.Slot, cn.Bucket, int64(d), next, now)
			}
		}
		c.mu.Unlock()
	}
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

// sendTargets sends each packet of ts to its member.
func (c *Cluster) sendTargets(rt Router, ts targets) {
	if len(ts) == 0 {
		return
	}
	to := make([]target, 0, len(ts))
	for t := range ts {
		to = append(to, t)
	}
	slices.SortFunc(to, func(a, b target) int { // a run on a virtual clock does not depend on map order
		if a.to != b.to {
			return strings.Compare(a.to, b.to)
		}
		if a.sum == b.sum {
			return 0
		}
		if !a.sum {
			return -1
		}
		return 1
	})
	for _, t := range to {
		p := ts[t]
		if err := rt.SendTo(t.to, p); err != nil {
			if c.stats.sendErrors.Add(1) == 1 {
				c.log.Warn("gossip send to one member failed", "to", t.to, "err", err)
			}
			continue
		}
		c.stats.targeted.Add(1)
		if p.Sum {
			c.stats.sumsSent.Add(1)
		}
	}
}

// replace rebuilds, c.mu held, what this node relays after the placement
// or the mode changed: every key it now owns, every bucket due again.
func (c *Cluster) replace(rt Router, agg bool, next uint32) {
	t := c.tab
	t.relays = make(map[uint64]*relayKey)
	t.urgent = nil
	if !agg {
		clear(t.own)
		t.holders = nil
		return
	}
	t.indexHolders()
	// role: 1 owner, 2 successor (standby), 0 neither
	role := func(h uint64) int {
		switch o, s := rt.Owners(h); c.name {
		case o:
			return 1
		case s:
			return 2
		}
		return 0
	}
	for _, o := range t.origins {
		for h, k := range o.keys {
			if len(k.counts) == 0 {
				continue
			}
			r := role(h)
			if r == 0 {
				continue
			}
			rk := t.relayKey(h)
			rk.standby = r == 2
			rk.from = append(rk.from, o)
			for _, cn := range k.counts {
				rk.mark(cn.slot, cn.bucket, next)
			}
		}
	}
	for h, k := range t.own {
		r := role(h)
		if r == 0 {
			delete(t.own, h)
			continue
		}
		rk := t.relayKey(h)
		rk.standby = r == 2
		for _, cn := range k.counts {
			rk.mark(cn.slot, cn.bucket, next)
		}
	}
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

// selfKey returns this node's own record of key h (owner mode).
func (t *table) selfKey(h uint64) *remoteKey {
	k := t.own[h]
	if k == nil {
		k = &remoteKey{resolved: true}
		t.own[h] = k
	}
	return k
}

// value returns k's count in (slot, bucket), 0 for a nil k.
func (k *remoteKey) value(slot uint32, bucket int64) uint64 {
	if k == nil {
		return 0
	}
	for i := len(k.counts) - 1; i >= 0; i-- {
		if c := &k.counts[i]; c.slot == slot && c.bucket == bucket {
			return c.value
		}
	}
	return 0
}

// sumRow is one bucket of a key as this node counts it: the greatest sum
// an owner told (agg), what origins told directly and was applied (direct),
// and what the engine got (applied: the greater of the two once the name
// is known).
type sumRow struct {
	slot                 uint32
	bucket               int64
	agg, direct, applied uint64
}

// sumKey is a key some owner sent sums of.
type sumKey struct {
	rows []sumRow
	seen int64  // ms: the last sum of it
	from string // the owner that last sent one, and its incarnation: asked for the name
	inc  uint64
}

func (sk *sumKey) row(slot uint32, bucket int64) *sumRow {
	for i := range sk.rows {
		if r := &sk.rows[i]; r.slot == slot && r.bucket == bucket {
			return r
		}
	}
	sk.rows = append(sk.rows, sumRow{slot: slot, bucket: bucket})
	return &sk.rows[len(sk.rows)-1]
}

// count appends to out the growth d of an origin's count of key h in
// (slot, bucket), its name known: as is, or, when an owner sent sums of
// h, what it adds to the greater of the two.
func (t *table) count(out []op, h uint64, slot uint32, bucket int64, d uint64) []op {
	sk := t.sums[h]
	if sk == nil {
		return t.emit(out, opCount, h, int(slot), bucket, int64(d))
	}
	r := sk.row(slot, bucket)
	r.direct += d
	return t.settle(out, h, r)
}

// settle applies what row r of key h (named) gained: the greater of its
// sum and its direct count, over what was applied.
func (t *table) settle(out []op, h uint64, r *sumRow) []op {
	if v := max(r.agg, r.direct); v > r.applied {
		out = t.emit(out, opCount, h, int(r.slot), r.bucket, int64(v-r.applied))
		r.applied = v
	}
	return out
}

// mergeSum folds a sum message p from a key owner into the table at now
// (ms) and appends to out what the engine must change.
func (t *table) mergeSum(p *packet.Packet, now int64, out []op) []op {
	out = t.learn(p.Names, now, out)
	for _, c := range p.Counts {
		sk := t.sums[c.Hash]
		if sk == nil {
			sk = t.newSum(c.Hash)
		}
		sk.seen, sk.from, sk.inc = now, p.From, p.Incarnation
		if rk := t.relays[c.Hash]; rk != nil {
			rk.pending, rk.owed, rk.owedAt = 0, 0, 0 // the owner speaks (ownerSilent)
		}
		r := sk.row(c.Slot, c.Bucket)
		if c.Value <= r.agg {
			continue
		}
		r.agg = c.Value
		if _, named := t.names[c.Hash]; named {
			out = t.settle(out, c.Hash, r)
		} else if _, asked := t.asked[c.Hash]; !asked {
			t.askOf(p.From, p.Incarnation, c.Hash, now)
		}
	}
	return out
}

// newSum starts the sums of key h: what origins told directly and was
// applied counts as applied, gone origins' and earlier incarnations'
// included (held.go).
func (t *table) newSum(h uint64) *sumKey {
	sk := &sumKey{}
	seen := map[*origin]bool{}
	add := func(o *origin) {
		k := o.keys[h]
		if k == nil || !k.resolved || seen[o] {
			return
		}
		seen[o] = true
		for _, c := range k.counts {
			r := sk.row(c.slot, c.bucket)
			r.direct += c.value
			r.applied = r.direct
		}
	}
	if t.holders != nil {
		for _, o := range t.holders[h] {
			add(o)
		}
	} else { // not in owner mode (a sum from a node that is): no index
		for _, o := range t.origins {
			add(o)
		}
		for _, o := range t.retired {
			add(o)
		}
	}
	t.sums[h] = sk
	return sk
}

// askOf records an ask of origin (incarnation inc) for the name of h.
func (t *table) askOf(origin string, inc uint64, h uint64, now int64) {
	t.asked[h] = now
	if n := len(t.asks); n > 0 && t.asks[n-1].origin == origin && t.asks[n-1].inc == inc {
		t.asks[n-1].hashes = append(t.asks[n-1].hashes, h)
		return
	}
	t.asks = append(t.asks, nameAsk{origin: origin, inc: inc, hashes: []uint64{h}})
}

// sweepOwner forgets, at now, the sums and relayed buckets past their
// slot's lifetime plus grace (life reports it), sums of a key whose name
// never came after unresolvedTTL, relayed keys left empty, and this
// node's own record of buckets aged out. It marks the names sums use.
func (t *table) sweepOwner(now, grace int64, life func(resource string, slot uint32, mark bool) (int64, bool), used map[uint64]bool) {
	alive := func(h uint64, slot uint32, bucket int64, seen int64) bool {
		name, ok := t.names[h]
		if !ok {
			name, ok = t.selfNames[h]
		}
		if !ok {
			return now-seen <= unresolvedTTL
		}
		l, ok := life(name.resource, slot, false)
		return ok && bucket+l+grace > now
	}
	for h, sk := range t.sums {
		sk.rows = slices.DeleteFunc(sk.rows, func(r sumRow) bool { return !alive(h, r.slot, r.bucket, sk.seen) })
		if len(sk.rows) == 0 {
			delete(t.sums, h)
			continue
		}
		used[h] = true
	}
	for h, k := range t.own {
		k.counts = slices.DeleteFunc(k.counts, func(c remoteCount) bool { return !alive(h, c.slot, c.bucket, now) })
		if len(k.counts) == 0 {
			delete(t.own, h)
			delete(t.selfNames, h)
		}
	}
	for h, rk := range t.relays {
		rk.rows = slices.DeleteFunc(rk.rows, func(r relayRow) bool { return !alive(h, r.slot, r.bucket, now) })
		rk.from = slices.DeleteFunc(rk.from, func(o *origin) bool { return o.gone || t.origins[o.name] != o || o.keys[h] == nil })
		if len(rk.rows) == 0 && len(rk.from) == 0 && !rk.urgent {
			delete(t.relays, h)
		}
	}
}

// targetsOnce reports whether owner mode's messages to one member ship
// once: the Router numbers them per member and the member asks for a
// reship of what it missed (TargetedRepairer), and the stream to every
// peer is repaired too (tier entries ship once with the counts).
func (c *Cluster) targetsOnce(rt Router) bool {
	tr, ok := rt.(TargetedRepairer)
	return ok && tr.Reships() && c.shipsOnce()
}

// followUps adds to ts, c.mu held, at tick s (flush unset) while targeted
// messages ship once, an empty message for each member last sent counts
// or sums 1, 4 or 16 ticks ago and sent nothing now: its seq shows a
// member that lost the last message of a burst its gap (the stream to
// every peer does the same on its first idle tick, and its heartbeat every
// fourth). A last message lost with its three follow-ups stays unrepaired
// until its bucket changes again or leaves its window (at 1% loss, one
// burst in 10⁸). It then notes the members ts sends something to.
func (c *Cluster) followUps(ts targets, s uint32, flush bool) {
	if !c.tonce.Load() {
		c.sentTo = nil
		return
	}
	if c.sentTo == nil {
		c.sentTo = make(map[string]uint32)
	}
	if !flush {
		for to, last := range c.sentTo {
			d := int32(s - last)
			if d >= followUpLast {
				delete(c.sentTo, to)
			}
			if d != 1 && d != 4 && d != followUpLast {
				continue
			}
			if _, counts := ts[target{to, false}]; counts {
				continue
			}
			if _, sums := ts[target{to, true}]; sums {
				continue
			}
			ts.get(c, to, false)
		}
	}
	for t, p := range ts {
		if len(p.Counts) > 0 || len(p.Names) > 0 {
			c.sentTo[t.to] = s
		}
	}
}

// followUpLast is the tick of the last follow-up after a member's last
// message (followUps).
const followUpLast = 16

// ReshipTo sends member to again, at once, everything this node routes to
// it in owner mode: the live counts of the keys it owns or succeeds, with
// their names, and the sums of the keys this node owns that it relays to
// it (gossip.Reshipper: the member found a message of this node's stream
// to it missing). Outside owner mode it does nothing.
func (c *Cluster) ReshipTo(to string) {
	rt := c.router()
	if rt == nil || !c.agg.Load() || to == c.name {
		return
	}
	ms := c.clock.Now().UnixMilli()
	s := c.tick.Load()
	snap := c.packet()
	for _, r := range c.resources() {
		r.snapshot(r.p.Load(), s, ms, snap)
	}
	counts := c.packet()
	named := make(map[uint64]bool)
	for _, cn := range snap.Counts {
		if o, sc := rt.Owners(cn.Hash); o == to || sc == to {
			counts.Counts = append(counts.Counts, cn)
			named[cn.Hash] = true
		}
	}
	for _, n := range snap.Names {
		if named[n.Hash] {
			counts.Names = append(counts.Names, n)
		}
	}
	sums := c.packet()
	sums.Sum = true
	c.mu.Lock()
	for h, rk := range c.tab.relays {
		if rk.standby {
			continue
		}
		subs := c.subscribers(h, rk)
		var mine *remoteKey
		for _, o := range subs {
			if o.name == to {
				mine = o.keys[h]
			}
		}
		if mine == nil && !rk.wide {
			continue // not one it relays to
		}
		cells, name, _ := c.windowCounts(h, subs, c.tab.pastHolders(h), ms)
		first := true
		for _, cell := range cells {
			v := cell.Value - mine.value(cell.Slot, cell.Bucket)
			if v == 0 {
				continue
			}
			if first && mine == nil { // a wide relay to a non-origin carries the name
				sums.Names = append(sums.Names, packet.Name{Hash: h, Resource: name.resource, Domain: name.domain})
			}
			first = false
			sums.Counts = append(sums.Counts, packet.Count{Hash: h, Slot: cell.Slot, Bucket: cell.Bucket, Value: v})
		}
	}
	ts := targets{}
	if len(counts.Counts) > 0 {
		ts[target{to, false}] = counts
	}
	if len(sums.Counts) > 0 {
		ts[target{to, true}] = sums
	}
	if len(ts) > 0 && c.sentTo != nil {
		c.sentTo[to] = c.tick.Load() // its last message may be lost too: the follow-ups show it
	}
	c.mu.Unlock()
	c.sendTargets(rt, ts)
}
