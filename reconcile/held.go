package reconcile

import (
	"cmp"
	"slices"
	"time"

	"github.com/obol-dev/obol/gossip"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/ring"
	"github.com/obol-dev/obol/local"
)

// held.go is the rule that a count belongs to the mesh, not to the
// process that made it, pure: no clock, no locks, no I/O. A node keeps
// every origin's counts and tier entries until their windows end (the
// current incarnation of each name in origins, live or gone; earlier
// incarnations of a name, this node's own among them, in retired) and
// passes all of them on in its push/pull state (packet.Held), so that a
// node that joins, under a new name or a name that was in use before,
// learns every live count the mesh holds. A receiver keeps the max per
// (origin, incarnation, key, slot, bucket), so that an origin's counts
// that reach it both from the origin and from any number of relays are
// counted once. Holds are not passed on: they are gauges of live nodes.

// originID names one incarnation of an origin.
type originID struct {
	name string
	inc  uint64
}

// retire keeps o's counts and entries (not its holds, which the caller
// dropped) apart under o's incarnation, as a gone origin, and leaves o
// empty for the next incarnation.
func (t *table) retire(o *origin) {
	if len(o.keys) > 0 {
		id := originID{o.name, o.inc}
		old := t.retired[id]
		if old == nil {
			old = &origin{name: o.name, inc: o.inc, keys: o.keys, gone: true, lastSync: o.lastSync}
			t.retired[id] = old
		} else {
			for h, k := range o.keys { // the same incarnation twice (rare): keep the max of each
				ok := old.keys[h]
				if ok == nil {
					old.keys[h] = k
					continue
				}
				for _, c := range k.counts {
					ok.setCount(c.slot, c.bucket, c.value)
				}
				for _, m := range k.marks {
					ok.setMark(m.slot, m.at)
				}
			}
		}
		for h, k := range old.keys {
			k.gauge, k.gver = 0, 0
			if !k.resolved {
				t.waiting[h] = append(t.waiting[h], old)
			}
			if t.holders != nil && !slices.Contains(t.holders[h], old) {
				t.holders[h] = append(t.holders[h], old)
			}
		}
	}
	o.keys = make(map[uint64]*remoteKey)
}

// unretire takes back into o, just moved to incarnation o.inc, the counts
// kept of that incarnation apart (retired): they were applied already,
// and starting it from nothing would apply them again.
func (t *table) unretire(o *origin) {
	id := originID{o.name, o.inc}
	old := t.retired[id]
	if old == nil {
		return
	}
	delete(t.retired, id)
	for h, k := range old.keys {
		o.keys[h] = k
		if !k.resolved {
			t.waiting[h] = append(t.waiting[h], o)
		}
		if t.holders != nil && !slices.Contains(t.holders[h], o) {
			t.holders[h] = append(t.holders[h], o)
		}
	}
	old.keys = nil // readers of waiting and holders find nothing under it
}

// maxOrigins bounds the origins a table keeps, live, gone and earlier
// incarnations together: a state that would pass it has the origins it
// names anew dropped (lenient: their counts are not counted here).
const maxOrigins = 8192

// maxAhead is how far after now a passed-on count's bucket or entry may
// be, ms: beyond it, no clock of the mesh is that far off, and the claim
// is dropped.
const maxAhead = 60_000

// heldOrigin returns where the counts of origin name's incarnation inc,
// passed on by a peer, go at now: the origin's current record, a retired
// one, or a new one; nil for this node's own current or a later
// incarnation of its name (counted by its own engine, or not its to take).
func (t *table) heldOrigin(name string, inc uint64, now int64) (*origin, []op) {
	if name == "" {
		return nil, nil
	}
	if name == t.self {
		if inc >= t.selfInc {
			return nil, nil
		}
		return t.retiredOrigin(name, inc), nil
	}
	o := t.origins[name]
	switch {
	case o == nil:
		if len(t.origins)+len(t.retired) >= maxOrigins {
			return nil, nil
		}
		// Heard of, not from: its own first message is heard whatever
		// its incarnation (expired).
		o = &origin{name: name, inc: inc, keys: make(map[uint64]*remoteKey), gone: true, expired: true}
		t.origins[name] = o
		return o, nil
	case inc == o.inc:
		return o, nil
	case inc < o.inc || !o.gone:
		// An earlier incarnation; or a later one of an origin this node
		// hears from: only the origin's own messages move it to another
		// incarnation, never a peer's claim.
		return t.retiredOrigin(name, inc), nil
	}
	// A later incarnation of an origin gone: it restarted, as its own
	// first message would have said.
	out := t.dropGauges(o, nil)
	t.retire(o)
	o.inc, o.expired = inc, true
	t.unretire(o)
	return o, out
}

// retiredOrigin returns the record of origin name's earlier incarnation
// inc, created unless the table is full (nil).
func (t *table) retiredOrigin(name string, inc uint64) *origin {
	id := originID{name, inc}
	o := t.retired[id]
	if o == nil {
		if len(t.origins)+len(t.retired) >= maxOrigins {
			return nil
		}
		o = &origin{name: name, inc: inc, keys: make(map[uint64]*remoteKey), gone: true}
		t.retired[id] = o
	}
	return o
}

// mergeHeld folds the origins a peer's state passed on (with their names)
// into the table at now and appends to out what the engine must change:
// their tier entries when marks is set, their counts otherwise. A state's
// entries go to the engine before any of its counts (mergeHeld with marks,
// the origin's own packet, then mergeHeld without): a tier's hits count
// only in an instance the engine knows of, and the origin whose entry
// began it may be another than the origins of the hits. It reports how
// many counts grew.
func (t *table) mergeHeld(names []packet.Name, held []packet.Held, marks bool, now int64, out []op) ([]op, int) {
	out = t.learn(names, now, out)
	grew := 0
	for i := range held {
		h := &held[i]
		o, drop := t.heldOrigin(h.From, h.Incarnation, now)
		out = append(out, drop...)
		if o == nil {
			continue
		}
		if marks {
			out = t.mergeEntries(o, notAhead(h.Marks, now), nil, false, now, out)
			continue
		}
		n := len(out)
		out = t.mergeEntries(o, nil, countsNotAhead(h.Counts, now), false, now, out)
		for _, x := range out[n:] {
			if x.kind == opCount {
				grew++
			}
		}
	}
	return out, grew
}

// notAhead returns the marks of ms at most maxAhead after now.
func notAhead(ms []packet.Mark, now int64) []packet.Mark {
	for _, m := range ms {
		if m.At > now+maxAhead {
			return slices.DeleteFunc(slices.Clone(ms), func(m packet.Mark) bool { return m.At > now+maxAhead })
		}
	}
	return ms
}

// countsNotAhead returns the counts of cs whose bucket starts at most
// maxAhead after now.
func countsNotAhead(cs []packet.Count, now int64) []packet.Count {
	for _, c := range cs {
		if c.Bucket > now+maxAhead {
			return slices.DeleteFunc(slices.Clone(cs), func(c packet.Count) bool { return c.Bucket > now+maxAhead })
		}
	}
	return cs
}

// held appends to pkt every origin's counts and tier entries of named keys
// still inside their windows at now (life reports a slot's), with the
// keys' names, origins in order of name and incarnation. Holds stay out.
func (t *table) held(pkt *packet.Packet, now int64, life func(resource string, slot uint32, mark bool) (int64, bool)) {
	all := make([]*origin, 0, len(t.origins)+len(t.retired))
	for _, o := range t.origins {
		all = append(all, o)
	}
	for _, o := range t.retired {
		all = append(all, o)
	}
	slices.SortFunc(all, func(a, b *origin) int {
		if c := cmp.Compare(a.name, b.name); c != 0 {
			return c
		}
		return cmp.Compare(a.inc, b.inc)
	})
	named := make(map[uint64]bool, len(pkt.Names))
	for _, n := range pkt.Names {
		named[n.Hash] = true
	}
	for _, o := range all {
		h := packet.Held{From: o.name, Incarnation: o.inc}
		for hash, k := range o.keys {
			name, ok := t.names[hash]
			if !ok || !k.resolved {
				continue
			}
			live := false
			for _, c := range k.counts {
				if l, ok := life(name.resource, c.slot, false); ok && c.bucket+l > now && c.value > 0 {
					h.Counts = append(h.Counts, packet.Count{Hash: hash, Slot: c.slot, Bucket: c.bucket, Value: c.value})
					live = true
				}
			}
			for _, m := range k.marks {
				if l, ok := life(name.resource, m.slot, true); ok && m.at+l > now {
					h.Marks = append(h.Marks, packet.Mark{Hash: hash, Slot: m.slot, At: m.at})
					live = true
				}
			}
			if live && !named[hash] {
				named[hash] = true
				pkt.Names = append(pkt.Names, packet.Name{Hash: hash, Resource: name.resource, Domain: name.domain})
			}
		}
		if len(h.Counts) > 0 || len(h.Marks) > 0 {
			pkt.Held = append(pkt.Held, h)
		}
	}
}

// pastHolders returns the origins that hold counts of key h and are gone
// or an earlier incarnation of a name (owner mode: an owner's sums count
// them, for no one sends them any more; holders indexes them).
func (t *table) pastHolders(h uint64) []*origin {
	var out []*origin
	for _, o := range t.holders[h] {
		if (o.gone || t.origins[o.name] != o) && o.keys[h] != nil && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// heldOrigins counts the origins kept that are gone or retired
// incarnations, and their keys: what passing counts on costs in memory.
func (t *table) heldOrigins() (origins, keys int) {
	for _, o := range t.origins {
		if o.gone {
			origins++
			keys += len(o.keys)
		}
	}
	for _, o := range t.retired {
		origins++
		keys += len(o.keys)
	}
	return origins, keys
}

// maxWelcomeKeys bounds the keys one welcome carries: a node that changed
// more in the welcome span sends the first it finds (the joiner's
// push/pull with its seed carries the rest, up to a tick before the join).
const maxWelcomeKeys = 4096

// welcomeTicks is how far back, in sync ticks, a node's own changes go
// to a member that joined (Welcome): at least 10 s, far longer than a
// join takes to reach every member.
func (c *Cluster) welcomeTicks() uint32 {
	return uint32(max(40, int64(10*time.Second/c.interval)))
}

// Welcome sends the member name, which just joined the mesh, this node's
// own counts of the keys it changed in the last welcomeTicks ticks (and
// their tier entries to every peer, since a message to one member holds
// counts only), so
// that what it shipped to its peers before it knew of the joiner, and
// after the state the joiner got from its seed was taken, reaches the
// joiner too (the seed's state holds the rest). It needs a Router sender
// (SendTo); without one it does nothing. Safe for concurrent use; it
// does not block on the network (gossip.Welcomer).
func (c *Cluster) Welcome(name string) {
	b := c.sender.Load()
	if b == nil || name == c.name {
		return
	}
	rt, ok := b.s.(Router)
	if !ok {
		return
	}
	now := c.clock.Now().UnixMilli()
	s := c.tick.Load()
	since := c.welcomeTicks()
	pkt := c.packet()
	marks := c.packet() // entries go to every peer: a message to one member holds counts only
	keys := 0
	for _, r := range c.resources() {
		p := r.p.Load()
		for i := range r.shards {
			sh := &r.shards[i]
			sh.mu.Lock()
			for _, k := range sh.keys {
				recent := false
				for _, cn := range k.counts {
					if int32(s-cn.changed) <= int32(since) { // changed may be the next tick: signed
						recent = true
						break
					}
				}
				if !recent {
					continue
				}
				if keys >= maxWelcomeKeys {
					continue
				}
				n := len(pkt.Counts)
				for _, cn := range k.counts {
					if int(cn.slot) < len(p.life) && cn.bucket+p.life[cn.slot] > now && cn.value > 0 {
						pkt.Counts = append(pkt.Counts, packet.Count{Hash: k.hash, Slot: cn.slot, Bucket: cn.bucket, Value: cn.value})
					}
				}
				if len(pkt.Counts) > n {
					keys++
					pkt.Names = append(pkt.Names, packet.Name{Hash: k.hash, Resource: r.name, Domain: k.domain})
					for _, m := range k.marks { // the tier entries the counts belong to
						if l, ok := p.markLife(m.slot); ok && m.at+l > now {
							marks.Marks = append(marks.Marks, packet.Mark{Hash: k.hash, Slot: m.slot, At: m.at})
							marks.Names = append(marks.Names, packet.Name{Hash: k.hash, Resource: r.name, Domain: k.domain})
						}
					}
				}
			}
			sh.mu.Unlock()
		}
	}
	if len(pkt.Counts) == 0 {
		return
	}
	if len(marks.Marks) > 0 {
		c.send(marks, false)
	}
	if err := rt.SendTo(name, pkt); err != nil {
		c.log.Debug("welcome not sent", "peer", name, "err", err)
		return
	}
	c.stats.welcomes.Add(1)
}

// TATSource is implemented by an Applier whose gcra buckets can say their
// theoretical arrival times (local.Engine.EachTAT), so that a state passes
// them on as floors for a node that joins.
type TATSource interface {
	EachTAT(now int64, fn func(resource, domain string, tat int64))
}

var _ TATSource = (*local.Engine)(nil)

// joinFloors is how long after its start a node takes peers' gcra TATs as
// floors, from the first state of its join alone (packet.Packet.Join, the
// seed's): any other state's TAT may include spends still on their way
// here as counts, and taking it would count them twice (seen as a joiner
// 200 to 300 tokens stricter than its seed, when every member resynced
// with a node back under its name: gossip resyncs by joining, so their
// states are marked Join too).
const joinFloors = 10 * time.Second

// addTATs appends to pkt, a snapshot, the TAT of every gcra key the engine
// holds whose bucket is not full at now (ms), as a mark of slot
// local.SlotTAT, with the keys' names.
func (c *Cluster) addTATs(pkt *packet.Packet, now int64) {
	var named map[uint64]bool
	c.eachApplier(func(a Applier) {
		ts, ok := a.(TATSource)
		if !ok {
			return
		}
		if named == nil {
			named = make(map[uint64]bool, len(pkt.Names))
			for _, n := range pkt.Names {
				named[n.Hash] = true
			}
		}
		ts.EachTAT(now, func(resource, domain string, tat int64) {
			h := KeyHash(resource, domain)
			pkt.Marks = append(pkt.Marks, packet.Mark{Hash: h, Slot: local.SlotTAT, At: tat})
			if !named[h] {
				named[h] = true
				pkt.Names = append(pkt.Names, packet.Name{Hash: h, Resource: resource, Domain: domain})
			}
		})
	})
}

// takeTATs removes the TAT marks from p's marks and returns them: they are
// floors to apply after every count of the state (floors), never entries
// to keep.
func takeTATs(p *packet.Packet) []packet.Mark {
	var tats []packet.Mark
	ms := p.Marks[:0:0]
	for _, m := range p.Marks {
		if m.Slot == local.SlotTAT {
			tats = append(tats, m)
		} else {
			ms = append(ms, m)
		}
	}
	if len(tats) > 0 {
		p.Marks = ms
	}
	return tats
}

// floors appends to out, for each TAT mark whose key's name is known, the
// floor for the engine (after the state's counts: the floor is the debt
// they leave out, not more to add to them).
func (t *table) floors(tats []packet.Mark, out []op) []op {
	for _, m := range tats {
		if _, ok := t.names[m.Hash]; ok {
			out = t.emit(out, opEntry, m.Hash, local.SlotTAT, m.At, 0)
		}
	}
	return out
}

var _ Resyncer = (*gossip.Node)(nil)

// Resyncer is implemented by a Router that can exchange full states with
// a member (gossip.Node: a push/pull). Resync asks for one in the
// background, at most once per ResyncAfter per member, must not block,
// and reports whether it asked (false: not a live member, or asked within
// ResyncAfter); ResyncNow exchanges with each of names in turn and
// returns when done (a node that stops, Cluster.Handover).
type Resyncer interface {
	Resync(name string) bool
	ResyncNow(names []string)
}

// newHomes returns, in owner mode, the members other than self that have
// become the owner or successor of a key this node holds counts of gone
// origins or earlier incarnations for, since the last call, sorted: no one
// sends those counts any more, and a new owner that lacks them would leave
// them out of its sums. A key seen for the first time (its first gone
// origin went in this placement change) was placed by the previous
// placement's ring, when there was one; before it, it counts as placed
// (its homes got the counts from their origins).
//
// Only a key's previous owner or successor passes its counts on, or,
// when neither of them is a live member any more, every node that holds
// them: the previous homes hold every origin's counts of the key, so one
// of them reaching the new homes is enough, and a mesh where every node
// that ever learned a gone origin's counts (every joiner does, from its
// seed's state) asked each new home for a push/pull spent its time in
// push/pulls as it grew (the 1,000-node owner-mode roll of bench/churn
// ran for most of an hour with half its processor time in them).
func (t *table) newHomes(rt Router, self string) []string {
	set := map[string]bool{}
	homes := make(map[uint64][2]string, len(t.homes))
	members := rt.Members()
	live := func(m string) bool {
		_, ok := slices.BinarySearch(members, m)
		return m != "" && ok
	}
	var before *ring.Ring // the previous placement, built when a key needs it
	add := func(o *origin) {
		for h := range o.keys {
			if _, done := homes[h]; done {
				continue
			}
			owner, succ := rt.Owners(h)
			cur := [2]string{owner, succ}
			homes[h] = cur
			prev, ok := t.homes[h]
			if !ok && len(t.placedOn) > 0 {
				if before == nil {
					before = ring.New(t.placedOn)
				}
				prev[0], prev[1] = before.Owners(h)
				ok = true
			}
			if !ok || prev == cur {
				continue
			}
			if self != prev[0] && self != prev[1] && (live(prev[0]) || live(prev[1])) {
				continue // a previous home that lives passes them on
			}
			for _, m := range cur {
				if m != "" && m != self && m != prev[0] && m != prev[1] {
					set[m] = true
				}
			}
		}
	}
	for _, o := range t.origins {
		if o.gone {
			add(o)
		}
	}
	for _, o := range t.retired {
		add(o)
	}
	t.homes = homes
	t.placedOn = members
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// passHeld asks for a push/pull with each of names (newHomes), when the
// sender can (Resyncer): the state carries the gone origins' counts to the
// keys' new owners and successors. A member the sender will not resync
// with yet (one it resynced with within its ResyncAfter, for another
// reason or an earlier placement) stays pending, and is asked again on
// every later tick until it is asked or is no longer a live member: the
// counts gone origins left since that last exchange must reach it too.
// Called on Step's goroutine alone (c.passing is its own).
func (c *Cluster) passHeld(rt Router, names []string) {
	if len(names) == 0 && len(c.passing) == 0 {
		return
	}
	b := c.sender.Load()
	if b == nil {
		return
	}
	rs, ok := b.s.(Resyncer)
	if !ok {
		return
	}
	for _, m := range names {
		if !slices.Contains(c.passing, m) {
			c.passing = append(c.passing, m)
		}
	}
	var members []string
	if rt != nil {
		members = rt.Members()
	}
	left := c.passing[:0]
	for _, m := range c.passing {
		if _, live := slices.BinarySearch(members, m); !live {
			continue // gone: its successor's placement passes the counts on
		}
		if rs.Resync(m) {
			c.stats.heldPassed.Add(1)
			continue
		}
		left = append(left, m)
	}
	clear(c.passing[len(left):])
	c.passing = left
}

// Restore merges a state this node or another wrote before (a state file:
// Snapshot, packet.EncodeState) at now, as a peer's state is merged, and
// reports how many counts it added: its origin's own counts and entries
// are taken as that origin's (an earlier incarnation of this node's name
// when it is this node's), what it held for others as theirs, each kept
// at the max per origin, incarnation, key, slot and bucket, so that a
// peer passing on the same counts adds nothing; the keys it knew by
// owners' sums as sums (of the buckets this node has not counted in
// since). Counts whose windows ended are not applied. Holds are not
// restored: their sessions ended with the process that held them.
func (c *Cluster) Restore(p *packet.Packet) int {
	if p == nil {
		return 0
	}
	tats := takeTATs(p)
	held := append([]packet.Held{{From: p.From, Incarnation: p.Incarnation, Counts: p.Counts, Marks: p.Marks}}, p.Held...)
	sums := c.uncounted(p)
	now := c.clock.Now().UnixMilli()
	c.mu.Lock()
	ops, _ := c.tab.mergeHeld(p.Names, held, true, now, nil)
	ops, grew := c.tab.mergeHeld(nil, held, false, now, ops)
	ops = c.tab.mergeStateSums(sums, p.From, p.Incarnation, now, ops)
	ops = c.tab.floors(tats, ops)
	c.unlockApply(ops, now)
	return grew
}
