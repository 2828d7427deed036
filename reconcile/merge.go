package reconcile

import (
	"cmp"
	"math"
	"slices"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/local"
)

// merge.go is the merge of peers' packets, pure: no clock, no locks, no I/O.
// Per origin it keeps the highest cumulative count seen for each (key, slot,
// bucket), the latest tier entry per (key, slot) and the newest gauge per key,
// and it returns as ops only what grew, for the engine to apply. Merging the
// same packets in any order, any number of times, yields the same table and
// ops that sum to the same totals.

// opKind says what an op changes in the engine.
type opKind uint8

const (
	opCount opKind = iota // n more hits (or gcra spends/refunds) in slot, placed at at
	opEntry               // tier slot entered at at
	opHolds               // a peer's holds of the key changed by n
)

// op is one change for the engine.
type op struct {
	kind     opKind
	resource string
	domain   string
	slot     int
	at, n    int64
}

type keyName struct{ resource, domain string }

type remoteCount struct {
	slot   uint32
	bucket int64
	value  uint64
}

type remoteMark struct {
	slot uint32
	at   int64
}

// remoteKey is one origin's contribution to one key.
type remoteKey struct {
	counts   []remoteCount
	marks    []remoteMark
	gauge    int64
	gver     uint64
	resolved bool  // the key's name is known and its values were applied
	seen     int64 // when a packet last touched it, ms
}

// origin is what one peer has told us.
type origin struct {
	name     string
	inc      uint64
	keys     map[uint64]*remoteKey
	gone     bool
	lastSync int64 // ms: the last packet of the current incarnation
	// newerAt is when the current incarnation superseded an older one (ms);
	// staleAt when a packet of an older incarnation last arrived. Packets
	// of the old incarnation still arriving well after the new one appeared
	// mean two live agents share the name (conflict).
	newerAt, staleAt int64
	// expired: the origin went silent and its holds were dropped
	// (expireSilent); the next packet under the name is heard, of whatever
	// incarnation.
	expired bool
}

// conflictAfter is how long after a newer incarnation of a name appeared
// packets of an older one may still arrive (in flight at a restart) before
// they are taken for a second live agent with the same name, ms.
const conflictAfter = 5000

// conflicting reports whether origin name is, at now, two live agents: its
// older incarnation kept sending long after a newer one appeared.
func (t *table) conflicting(name string, now int64) bool {
	o := t.origins[name]
	return o != nil && o.newerAt > 0 && o.staleAt-o.newerAt > conflictAfter && now-o.staleAt < 2*conflictAfter
}

// expireSilent drops, as if memberlist had declared them dead, the holds of
// every origin that has sent nothing of its current incarnation for
// silence ms, and marks it expired: the next packet under the name is
// heard whatever its incarnation. It bounds how long a ghost's holds stay
// counted: an agent that died while another agent kept its name alive in
// memberlist, or whose death memberlist never saw. Counts are kept: the
// same incarnation coming back (a partition that healed) goes on from them
// and nothing is applied twice.
func (t *table) expireSilent(now, silence int64, out []op) ([]op, []string) {
	var expired []string
	for name, o := range t.origins {
		if o.gone || now-o.lastSync <= silence {
			continue
		}
		o.gone, o.expired = true, true
		o.newerAt, o.staleAt = 0, 0
		out = t.dropGauges(o, out)
		expired = append(expired, name)
	}
	return out, expired
}

// table is every peer's contribution and the names of the keys.
type table struct {
	origins map[string]*origin
	names   map[uint64]keyName
	// waiting lists, per hash whose name is not known yet, the origins
	// that told values of it (an origin may be listed twice, or be one
	// since replaced: resolving checks each origin's key), so that a name
	// arriving resolves its key without a look at every origin.
	waiting map[uint64][]*origin
	// asked is when each waiting hash's name was last asked for (ms);
	// asks, the asks merge found to make, for the caller to send.
	asked map[uint64]int64
	asks  []nameAsk
	// idle is, per name no origin's key uses, when a key last used it
	// (ms): it is kept NameTTL from then (see NameTTL).
	idle map[uint64]int64
	self string

	// Owner mode (owner.go): track makes merge note every count's growth
	// in grew, for the relay; relays are the keys this node owns, urgent
	// those to relay at once; own is this node's own counts of the keys
	// it owns (selfNames their names); sums, the keys owners sent sums of.
	track     bool
	grew      []growth
	relays    map[uint64]*relayKey
	urgent    []uint64
	own       map[uint64]*remoteKey
	selfNames map[uint64]keyName
	sums      map[uint64]*sumKey
	// holders lists, per key hash, the origins that hold a count of it
	// (owner mode only, else nil; rebuilt by sweep and replace, so an
	// origin may be listed that has since dropped the key or been
	// replaced: readers check), so that a key's first sum need not look
	// at every origin (newSum).
	holders map[uint64][]*origin

	// retired keeps the counts and tier entries of earlier incarnations
	// of names (this node's own included: selfInc is its current one)
	// until their windows end (held.go).
	retired map[originID]*origin
	selfInc uint64
	// homes is, per key of those, its owner and successor at the last
	// placement change (owner mode; newHomes).
	homes map[uint64][2]string
	// resets is the latest reset of each key (reset.go); replays, whether
	// a resource's reset forgets its peers' later counts too (nil: none).
	resets    *resetBook
	replays   func(resource string) bool
	resetLife func(resource string) (int64, bool)
	// placedOn is the live members of the placement newHomes last saw
	// (the ring's own slice, never modified): a key first seen at a
	// placement change was placed by their ring.
	placedOn []string
}

// growth is the growth of an origin's count of a key in one bucket.
type growth struct {
	o      *origin
	h      uint64
	slot   uint32
	bucket int64
	d      uint64
}

func newTable(self string) *table {
	return &table{resets: &resetBook{}, origins: make(map[string]*origin), names: make(map[uint64]keyName), waiting: make(map[uint64][]*origin),
		asked: make(map[uint64]int64), idle: make(map[uint64]int64), self: self,
		relays: make(map[uint64]*relayKey), retired: make(map[originID]*origin), own: make(map[uint64]*remoteKey), selfNames: make(map[uint64]keyName), sums: make(map[uint64]*sumKey)}
}

func (o *origin) key(h uint64, t *table, now int64) *remoteKey {
	k, ok := o.keys[h]
	if !ok {
		_, named := t.names[h]
		k = &remoteKey{resolved: named}
		o.keys[h] = k
		if t.holders != nil && !slices.Contains(t.holders[h], o) {
			t.holders[h] = append(t.holders[h], o)
		}
		if !named {
			t.waiting[h] = append(t.waiting[h], o)
			if _, asked := t.asked[h]; !asked {
				t.ask(o, h, now)
			}
		}
	}
	return k
}

// ask records that origin o is to be asked for the name of h at now.
func (t *table) ask(o *origin, h uint64, now int64) { t.askOf(o.name, o.inc, h, now) }

// reask records asks (into the asks) for the names asked for more than
// askAgain before now that have not come, each of an origin still live
// that sent counts of it.
func (t *table) reask(now int64) {
	for h, at := range t.asked {
		if now-at < askAgain {
			continue
		}
		if sk := t.sums[h]; sk != nil && len(t.waiting[h]) == 0 {
			t.askOf(sk.from, sk.inc, h, now) // only an owner's sums told of it
			continue
		}
		for _, o := range t.waiting[h] {
			if k, ok := o.keys[h]; ok && !k.resolved && !o.gone && t.origins[o.name] == o {
				t.ask(o, h, now)
				break
			}
		}
	}
}

// takeAsks returns the asks recorded since the last call, one per origin
// incarnation, in order of origin and hash (so that a run on a virtual
// clock does not depend on map order).
func (t *table) takeAsks() []nameAsk {
	a := t.asks
	t.asks = nil
	if len(a) < 2 && (len(a) == 0 || len(a[0].hashes) < 2) {
		return a
	}
	slices.SortStableFunc(a, func(x, y nameAsk) int {
		if c := cmp.Compare(x.origin, y.origin); c != 0 {
			return c
		}
		return cmp.Compare(x.inc, y.inc)
	})
	out := a[:0]
	for _, q := range a {
		if n := len(out); n > 0 && out[n-1].origin == q.origin && out[n-1].inc == q.inc {
			out[n-1].hashes = append(out[n-1].hashes, q.hashes...)
			continue
		}
		out = append(out, q)
	}
	for i := range out {
		slices.Sort(out[i].hashes)
	}
	return out
}

// merge folds p into the table at now (ms) and appends to out what the
// engine must change. A packet from this node itself, or from an older
// incarnation of its origin than one already seen, changes nothing.
func (t *table) merge(p *packet.Packet, now int64, out []op) ([]op, bool) {
	if p.From == t.self || p.From == "" {
		return out, false
	}
	o := t.origins[p.From]
	switch {
	case o == nil:
		o = &origin{name: p.From, inc: p.Incarnation, keys: make(map[uint64]*remoteKey)}
		t.origins[p.From] = o
	case p.Incarnation < o.inc && !o.expired:
		o.staleAt = now
		return out, false // a message from before the node restarted (or a second agent under the name)
	case p.Incarnation != o.inc:
		// A restart: the old incarnation's holds are gone; its counts were
		// real hits: they stay applied and are kept apart (retire), to be
		// passed on to nodes that join; the new one counts from zero.
		out = t.dropGauges(o, out)
		t.retire(o)
		if o.inc != 0 && !o.gone {
			o.newerAt = now
		}
		o.inc = p.Incarnation
		t.unretire(o)
	}
	o.gone, o.expired = false, false
	o.lastSync = now
	out = t.learn(p.Names, now, out)
	out = t.mergeEntries(o, p.Marks, p.Counts, t.track, now, out)
	var watermark uint64
	for _, g := range p.Gauges {
		if g.Hash == 0 {
			watermark = max(watermark, g.Version)
			continue
		}
		k := o.key(g.Hash, t, now)
		k.seen = now
		if g.Version <= k.gver {
			continue
		}
		d := g.Value - k.gauge
		k.gauge, k.gver = g.Value, g.Version
		if d != 0 && k.resolved {
			out = t.emit(out, opHolds, g.Hash, 0, 0, d)
		}
	}
	if p.Full && watermark > 0 {
		// A snapshot lists every gauge its origin holds: one it leaves out,
		// and that no newer message set, is zero.
		listed := make(map[uint64]bool, len(p.Gauges))
		for _, g := range p.Gauges {
			listed[g.Hash] = true
		}
		for h, k := range o.keys {
			if k.gauge != 0 && !listed[h] && k.gver <= watermark {
				if k.resolved {
					out = t.emit(out, opHolds, h, 0, 0, -k.gauge)
				}
				k.gauge, k.gver = 0, watermark
			}
		}
	}
	return out, true
}

// mergeEntries folds an origin's tier entries and counts into o at now
// and appends to out what the engine must change; track notes each
// count's growth for owner mode's relay.
func (t *table) mergeEntries(o *origin, marks []packet.Mark, counts []packet.Count, track bool, now int64, out []op) []op {
	for _, m := range marks {
		k := o.key(m.Hash, t, now)
		k.seen = now
		if !k.setMark(m.Slot, m.At) {
			continue
		}
		if isReset(m) {
			out = t.resetNews(out, m.Hash, m.At, now, k.resolved)
			continue
		}
		if k.resolved {
			out = t.emit(out, opEntry, m.Hash, int(m.Slot), m.At, 0)
		}
	}
	for _, c := range counts {
		k := o.key(c.Hash, t, now)
		k.seen = now
		v := c.Value
		if c.Slot >= local.SlotTierRefund {
			// Hits a settle gave back: never more than this origin
			// counted in that slot and bucket (a peer may take back only
			// its own hits), kept as the value seen so that a resend after
			// the hits arrive still counts.
			v = min(v, k.value(c.Slot-local.SlotTierRefund, c.Bucket))
		}
		d := k.setCount(c.Slot, c.Bucket, v)
		if d == 0 {
			continue
		}
		if track {
			t.grew = append(t.grew, growth{o, c.Hash, c.Slot, c.Bucket, d})
		}
		if k.resolved {
			out = t.count(out, c.Hash, c.Slot, c.Bucket, d)
		}
	}
	return out
}

// learn records names at now and appends to out the values that waited
// for them.
func (t *table) learn(names []packet.Name, now int64, out []op) []op {
	for _, n := range names {
		if _, ok := t.names[n.Hash]; ok {
			continue
		}
		t.names[n.Hash] = keyName{n.Resource, n.Domain}
		t.idle[n.Hash] = now                   // kept a while even if nothing uses it yet
		for _, ob := range t.waiting[n.Hash] { // apply what was waiting for the name
			if k, ok := ob.keys[n.Hash]; ok && !k.resolved {
				k.resolved = true
				out = t.applyAll(n.Hash, k, out)
			}
		}
		if sk := t.sums[n.Hash]; sk != nil { // and what sums told
			for i := range sk.rows {
				out = t.settle(out, n.Hash, &sk.rows[i])
			}
		}
		if at, ok := t.resets.unapplied(n.Hash, n.Resource); ok && !t.resetExpired(n.Resource, at, now) { // a reset that waited for the name
			out = t.resetOps(out, n.Hash, at)
		}
		delete(t.waiting, n.Hash)
		delete(t.asked, n.Hash)
	}
	return out
}

// setCount keeps the max of a cumulative count and returns what it grew by.
func (k *remoteKey) setCount(slot uint32, bucket int64, v uint64) uint64 {
	for i := len(k.counts) - 1; i >= 0; i-- {
		c := &k.counts[i]
		if c.slot == slot && c.bucket == bucket {
			if v <= c.value {
				return 0
			}
			d := v - c.value
			c.value = v
			return d
		}
	}
	k.counts = append(k.counts, remoteCount{slot, bucket, v})
	return v
}

// setMark records a tier entry and reports whether it is news. An origin
// enters a tier again only after its last instance ended, so its latest
// entry is its greatest: an older one arriving late is not news.
func (k *remoteKey) setMark(slot uint32, at int64) bool {
	for i := range k.marks {
		if m := &k.marks[i]; m.slot == slot {
			if at <= m.at {
				return false
			}
			m.at = at
			return true
		}
	}
	k.marks = append(k.marks, remoteMark{slot, at})
	return true
}

// emit appends an op of key h. A count's n is a growth of a cumulative
// count, which only grows: made an int64 from a growth of 2^63 or more it
// reads negative, and stands for math.MaxInt64 (saturated, never wrapped
// to a decrease). The applier, which knows the resource's limits, clamps
// it further (What a peer may claim, docs/cluster.md).
func (t *table) emit(out []op, kind opKind, h uint64, slot int, at, n int64) []op {
	if kind == opCount && n < 0 {
		n = math.MaxInt64
	}
	if kind != opHolds && t.beforeReset(h, at) {
		return out // made before the key's latest reset (reset.go)
	}
	name := t.names[h]
	return append(out, op{kind: kind, resource: name.resource, domain: name.domain, slot: slot, at: at, n: n})
}

// applyAll emits every value of a key that waited for its name.
func (t *table) applyAll(h uint64, k *remoteKey, out []op) []op {
	for _, m := range k.marks {
		if m.slot == local.SlotReset {
			continue // learn applies the key's latest reset once, after every origin's values
		}
		out = t.emit(out, opEntry, h, int(m.slot), m.at, 0)
	}
	for _, c := range k.counts {
		out = t.count(out, h, c.slot, c.bucket, c.value)
	}
	if k.gauge != 0 {
		out = t.emit(out, opHolds, h, 0, 0, k.gauge)
	}
	return out
}

// dropGauges takes o's holds out of the engine.
func (t *table) dropGauges(o *origin, out []op) []op {
	for h, k := range o.keys {
		if k.gauge != 0 && k.resolved {
			out = t.emit(out, opHolds, h, 0, 0, -k.gauge)
		}
		k.gauge, k.gver = 0, 0
	}
	return out
}

// gone marks an origin left or dead and drops its holds.
func (t *table) gone(name string, out []op) []op {
	o := t.origins[name]
	if o == nil || o.gone {
		return out
	}
	o.gone = true
	return t.dropGauges(o, out)
}

// unresolvedTTL is how long counts for a key whose name never arrived are
// kept, in ms.
const unresolvedTTL = 10 * 60 * 1000

// sweep forgets what can no longer matter at now: buckets past their
// slot's lifetime (life reports it, and false for a resource no longer
// configured), entries past their tier's active and cooldown, keys left
// empty, and names no origin has used for NameTTL (sooner past MaxNames).
// A bucket is kept for its lifetime plus grace, so a late duplicate finds
// it and is not applied twice; a count of an older bucket is not applied
// at all (Cluster.apply).
func (t *table) sweep(now, grace int64, life func(resource string, slot uint32, mark bool) (int64, bool)) {
	used := make(map[uint64]bool)
	for id, o := range t.retired {
		t.sweepKeys(o, now, grace, life, used)
		if len(o.keys) == 0 {
			delete(t.retired, id)
		}
	}
	for _, o := range t.origins {
		t.sweepKeys(o, now, grace, life, used)
		if o.gone && len(o.keys) == 0 {
			delete(t.origins, o.name)
		}
	}
	t.sweepOwner(now, grace, life, used)
	if t.holders != nil {
		t.indexHolders()
	}
	t.sweepNames(now, used)
}

// sweepKeys forgets, at now, o's buckets and entries past their lifetime
// plus grace and its keys left empty, and marks in used the names its
// keys use.
func (t *table) sweepKeys(o *origin, now, grace int64, life func(resource string, slot uint32, mark bool) (int64, bool), used map[uint64]bool) {
	for h, k := range o.keys {
		name, named := t.names[h]
		if !named {
			if now-k.seen > unresolvedTTL {
				delete(o.keys, h)
			} else {
				used[h] = true
			}
			continue
		}
		cs := k.counts[:0]
		for _, c := range k.counts {
			if l, ok := life(name.resource, c.slot, false); ok && c.bucket+l+grace > now {
				cs = append(cs, c)
			}
		}
		k.counts = cs
		ms := k.marks[:0]
		for _, m := range k.marks {
			if l, ok := life(name.resource, m.slot, true); ok && m.at+l+grace > now {
				ms = append(ms, m)
			}
		}
		k.marks = ms
		if len(k.counts) == 0 && len(k.marks) == 0 && k.gauge == 0 {
			delete(o.keys, h)
			t.idle[h] = max(t.idle[h], k.seen)
			continue
		}
		used[h] = true
	}
}

// sweepNames forgets the names no key uses (used) once idle for NameTTL
// (sooner past MaxNames), and the asks and waits of unused hashes.
func (t *table) sweepNames(now int64, used map[uint64]bool) {
	for h := range t.names {
		if used[h] {
			delete(t.idle, h)
			continue
		}
		if at, ok := t.idle[h]; !ok || now-at > NameTTL {
			delete(t.names, h)
			delete(t.idle, h)
		}
	}
	if over := len(t.idle) - MaxNames; over > 0 {
		t.dropIdle(over)
	}
	for h := range t.waiting {
		if !used[h] {
			delete(t.waiting, h)
			delete(t.asked, h)
		}
	}
	for h := range t.asked {
		if !used[h] {
			delete(t.asked, h)
		}
	}
}

// dropIdle forgets the n names unused longest.
func (t *table) dropIdle(n int) {
	type idle struct {
		h  uint64
		at int64
	}
	all := make([]idle, 0, len(t.idle))
	for h, at := range t.idle {
		all = append(all, idle{h, at})
	}
	slices.SortFunc(all, func(a, b idle) int { return cmp.Compare(a.at, b.at) })
	for _, x := range all[:n] {
		delete(t.names, x.h)
		delete(t.idle, x.h)
	}
}

// indexHolders builds holders from scratch.
func (t *table) indexHolders() {
	t.holders = make(map[uint64][]*origin, len(t.holders))
	for _, o := range t.origins {
		for h := range o.keys {
			t.holders[h] = append(t.holders[h], o)
		}
	}
	for _, o := range t.retired {
		for h := range o.keys {
			t.holders[h] = append(t.holders[h], o)
		}
	}
}
