package reconcile

import (
	"sync"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/local"
)

// receive.go is the receive step: a peer's packet (a sync message, a sum
// or a push/pull state) merged into the table (merge.go, sum.go, held.go)
// in one switch over what it is, and the growth applied to the engine;
// a peer memberlist declared gone dropped.

// HandlePacket merges a peer's packet (gossip.Handler): a sum, a full
// state and any other sync message each merge their own way, chosen in one
// switch. It never blocks on the network: the engine applies the growth in
// memory.
func (c *Cluster) HandlePacket(p *packet.Packet) {
	now := c.clock.Now().UnixMilli()
	if p.From == c.name && p.Incarnation != c.inc {
		c.stats.nameConflicts.Add(1)
		if last := c.selfConflictAt.Load(); (last == 0 || now-last > 60_000) && c.selfConflictAt.CompareAndSwap(last, now) {
			c.log.Error("another live agent uses this node's name: counts and holds of the two cannot be told apart; give each agent a unique --node-name",
				"node_name", c.name, "incarnation", c.inc, "other_incarnation", p.Incarnation)
			if c.onConflict != nil {
				c.onConflict(p.Incarnation)
			}
		}
		return
	}
	if p.Full && len(p.Sums) > 0 {
		p.Sums = c.uncounted(p)
	}
	buf := opBufs.Get().(*[]op)
	defer func() {
		if cap(*buf) > maxPooledOps {
			return // a snapshot's: let it go
		}
		clear(*buf) // drop the names they point to
		*buf = (*buf)[:0]
		opBufs.Put(buf)
	}()
	c.mu.Lock()
	ops, ok := (*buf)[:0], true
	switch { // the one switch over what p is; gossip dispatched on its wire type
	case p.Sum: // a MsgSum, or a MsgTargeted sum: a key's owner's (sum.go)
		ops = c.tab.mergeSum(p, now, ops)
	case p.Full: // a push/pull state or a state file, maybe a mesh state
		ops, ok = c.mergeState(p, now, ops)
	default: // a MsgSync, a MsgSeqSync, or a MsgTargeted of counts (merge.go)
		ops, ok = c.tab.merge(p, now, ops)
	}
	if len(c.tab.grew) > 0 {
		next := c.tick.Load() + 1
		for _, g := range c.tab.grew {
			c.noteGrowth(g.h, g.o, g.slot, g.bucket, int64(g.d), next, now)
		}
		clear(c.tab.grew)
		c.tab.grew = c.tab.grew[:0]
	}
	kick := c.relayKick
	c.relayKick = false
	asks := c.tab.takeAsks()
	ops, asks = c.ownNames(ops, asks, now)
	*buf = ops
	if c.merged != nil {
		c.merged(p.From)
	}
	if !ok {
		ops = ops[:0] // a stale packet changes nothing
	}
	c.unlockApply(ops, now)
	if kick {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	c.askNames(asks)
	if ok && len(p.Names) > 0 {
		c.named.heard(p.Names, now)
	}
	if !ok {
		c.stats.stale.Add(1)
		return
	}
	c.stats.packetsMerged.Add(1)
	if p.Sum {
		c.stats.sumsMerged.Add(1)
	}
	if !p.Full && len(p.Counts) > 0 {
		newest := p.Counts[0].Bucket
		for _, cn := range p.Counts[1:] {
			newest = max(newest, cn.Bucket)
		}
		c.stats.lag.observe(now - newest)
	}
}

// unlockApply releases c.mu, held since ops were made, and applies ops:
// after every op made before them and before any made after them (amu).
func (c *Cluster) unlockApply(ops []op, now int64) {
	c.amu.Lock()
	c.mu.Unlock()
	defer c.amu.Unlock()
	c.apply(ops, now)
}

// mergeState merges, c.mu held, a full state p: every held origin's
// entries before any count (mergeHeld), p's own origin's (merge), then the
// held origins' counts, and the floors of the tier entries a joiner takes
// from its first state (joinFloors). It reports merge's ok.
func (c *Cluster) mergeState(p *packet.Packet, now int64, ops []op) ([]op, bool) {
	tats := takeTATs(p)
	if !p.Join || now-c.started > joinFloors.Milliseconds() || !c.floored.CompareAndSwap(false, true) {
		tats = nil // not this node's join: see joinFloors
	}
	held := len(p.Held) > 0
	if held { // every entry of the state before any count (mergeHeld)
		ops, _ = c.tab.mergeHeld(p.Names, p.Held, true, now, ops)
	}
	ops, ok := c.tab.merge(p, now, ops)
	if held {
		var grew int
		ops, grew = c.tab.mergeHeld(nil, p.Held, false, now, ops)
		c.stats.heldStates.Add(1)
		c.stats.heldGrew.Add(uint64(grew))
	}
	if p.Join && len(p.Sums) > 0 { // a seed's sums: see uncounted
		ops = c.tab.mergeStateSums(p.Sums, p.From, p.Incarnation, now, ops)
	}
	return c.tab.floors(tats, ops), ok
}

// uncounted returns the sums of state p (packet.Packet.Sums) of buckets
// this node has no count of its own in. A seed's sum of a bucket is its
// engine's count, which may hold what this node shipped before the state
// was taken; of a bucket this node never counted in, it holds nothing of
// this node's, so this node counts it as an owner's sum, and a key near
// its limit is known from the join on. Called without c.mu: it takes the
// resources' shard locks.
func (c *Cluster) uncounted(p *packet.Packet) []packet.Count {
	names := make(map[uint64]packet.Name, len(p.Names))
	for _, n := range p.Names {
		names[n.Hash] = n
	}
	out := p.Sums[:0:0]
	for _, s := range p.Sums {
		n, ok := names[s.Hash]
		if !ok {
			continue
		}
		c.resMu.RLock()
		r := c.res[n.Resource]
		c.resMu.RUnlock()
		if r != nil && r.counted(n.Domain, s.Slot, s.Bucket) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// opBufs holds the op buffers HandlePacket merges into, so that a stream
// of packets allocates none once the buffers have grown; one grown past
// maxPooledOps (by a push/pull snapshot) is not kept.
var opBufs = sync.Pool{New: func() any { return new([]op) }}

const maxPooledOps = 4096

// apply applies ops to the applier of each op's resource (applierOf): the
// one its registrant gave, or the tap. An op of a resource nobody
// registered is applied nowhere (but counted, as every count merged is);
// with no applier at all (nothing registered one, no tap) nothing is
// applied or counted.
func (c *Cluster) apply(ops []op, now int64) {
	tap := c.tap.Load()
	if tap == nil {
		c.resMu.RLock()
		none := len(c.appliers) == 0
		c.resMu.RUnlock()
		if none {
			return
		}
	}
	var (
		r      *Res   // the resource of the last op (nil: nobody registered it)
		name   string // its name
		looked bool
	)
	for i := range ops {
		o := &ops[i]
		if !looked || o.resource != name { // a packet's ops come key by key
			c.resMu.RLock()
			r, name, looked = c.res[o.resource], o.resource, true
			c.resMu.RUnlock()
			if r == nil {
				r = c.resolve(o.resource, now) // a peer's limit set by a request: made here too
			}
		}
		a := c.applierOf(tap, r)
		switch o.kind {
		case opEntry:
			if o.slot == local.SlotReset {
				c.stats.resetsApplied.Add(1)
			}
			if a != nil {
				a.ApplyEntry(o.resource, o.domain, o.slot, o.at, now)
			}
		case opCount:
			p := (*params)(nil)
			if r != nil {
				p = r.p.Load()
			}
			if p != nil && o.slot >= 0 && o.slot < len(p.life) && o.at+p.life[o.slot]+c.grace() <= now {
				c.stats.tooOld.Add(uint64(o.n))
				continue
			}
			if a != nil {
				a.ApplyCount(o.resource, o.domain, o.slot, o.at, widthOf(p, o.slot), o.n, now)
			}
			c.stats.countsApplied.Add(o.n)
		case opHolds:
			if a != nil {
				a.AddRemoteHolds(o.resource, o.domain, o.n)
			}
		}
	}
}

// NodeGone drops the holds of a node memberlist declared left or dead
// (gossip.Handler).
func (c *Cluster) NodeGone(name string) {
	c.mu.Lock()
	ops := c.tab.gone(name, nil)
	c.stats.nodesGone.Add(1)
	c.unlockApply(ops, c.clock.Now().UnixMilli())
}
