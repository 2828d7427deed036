package reconcile

import (
	"github.com/obol-dev/obol/gossip/packet"
)

// repair.go is the repair step: what this node gives a peer that missed
// something. A push/pull snapshot (Snapshot); in owner mode, the follow-ups
// that show a lost last message as a gap (followUps), the reship a member
// asks for when this node no longer keeps a message it missed (ReshipTo),
// and the re-placement after the ring or the mode changed (Res.reship,
// replace): every live bucket ships again to its new targets.

// Snapshot returns this node's whole live state, for push/pull
// (gossip.Handler): its own counts, what it holds for other origins, and
// the keys it knows by owners' sums (packet.Packet.Sums, which gossip
// sends only in a join's state).
func (c *Cluster) Snapshot() *packet.Packet {
	ms := c.clock.Now().UnixMilli()
	pkt := c.packet()
	pkt.Full = true
	for _, r := range c.resources() {
		r.snapshot(r.p.Load(), c.tick.Load(), ms, pkt)
	}
	c.stepGauges(pkt, c.tick.Load(), true, false)
	c.mu.Lock()
	c.tab.held(pkt, ms, c.life)
	c.tab.stateSums(pkt, ms, c.life)
	c.mu.Unlock()
	c.addTATs(pkt, ms)
	return pkt
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
