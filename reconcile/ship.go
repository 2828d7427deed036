package reconcile

import (
	"slices"
	"strings"

	"github.com/obol-dev/obol/gossip/packet"
)

// ship.go is the ship step: sending what a tick or a flush collected, to
// every live peer (send, with this node's holds as gauges, stepGauges) and,
// in owner mode, to each key's owner and successor (route, shipTargets,
// sendTargets: packets to single members, counts and sums apart).

// shipsOnce reports whether the sender's peers all repair loss
// (Repairer).
func (c *Cluster) shipsOnce() bool {
	b := c.sender.Load()
	if b == nil {
		return false
	}
	r, ok := b.s.(Repairer)
	return ok && r.Repairs()
}

// shipTargets routes the counts of up to their keys' owners and
// successors and adds the relays due (at tick s, or of urgent keys in a
// flush), and sends them (owner mode).
func (c *Cluster) shipTargets(up *packet.Packet, next, s uint32, now int64, flush bool) {
	rt := c.router()
	if rt == nil {
		return
	}
	ts := targets{}
	c.route(rt, up, ts, next, now)
	c.mu.Lock()
	c.relay(rt, ts, s, now, flush)
	c.relayKick = false
	c.followUps(ts, s, flush)
	c.mu.Unlock()
	c.sendTargets(rt, ts)
}

// stepGauges reads this node's holds at tick s and appends to pkt the ones
// due (every nonzero one every eighth tick, and all of them with a
// watermark when all is set, for a snapshot; a change once when once is
// set, else on the resend schedule). A gauge that fell to zero is
// forgotten once its shipments are over.
func (c *Cluster) stepGauges(pkt *packet.Packet, s uint32, all, once bool) {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	if c.scratch == nil {
		c.scratch = make(map[uint64]int64)
	}
	cur := c.scratch
	clear(cur)
	c.eachApplier(func(a Applier) {
		a.EachHold(func(resource, domain string, holds int64) {
			h := KeyHash(resource, domain)
			if g, ok := c.gauges[h]; !ok {
				c.gauges[h] = &ownGauge{resource: resource, domain: domain, names: resends}
			} else if g.resource != resource || g.domain != domain {
				return // a hash collision: keep the first
			}
			cur[h] += holds
		})
	})
	refresh := s%8 == 0
	for h, g := range c.gauges {
		if v := cur[h]; v != g.value || g.version == 0 {
			c.gver++
			g.value, g.version, g.changed = v, c.gver, s
		}
		changed := g.changed == s
		if all || (once && changed) || (!once && due(s, g.changed)) || (refresh && g.value != 0) {
			pkt.Gauges = append(pkt.Gauges, packet.Gauge{Hash: h, Value: g.value, Version: g.version})
			if g.names > 0 || all || (!once && int32(s-g.changed) > 2) || refresh {
				pkt.Names = append(pkt.Names, packet.Name{Hash: h, Resource: g.resource, Domain: g.domain})
				switch {
				case all:
				case once:
					g.names = 0
				case g.names > 0:
					g.names--
				}
			}
		}
		if g.value == 0 && (once || !pending(s, g.changed)) {
			delete(c.gauges, h)
		}
	}
	if all {
		c.gver++
		pkt.Gauges = append(pkt.Gauges, packet.Gauge{Hash: 0, Version: c.gver})
	}
}

// send ships pkt to every live peer, when it holds anything or heartbeat
// is set.
func (c *Cluster) send(pkt *packet.Packet, heartbeat bool) bool {
	if len(pkt.Counts) == 0 && len(pkt.Marks) == 0 && len(pkt.Gauges) == 0 && !heartbeat {
		return false
	}
	b := c.sender.Load()
	if b == nil {
		return false
	}
	c.sentLast.Store(len(pkt.Counts) > 0 || len(pkt.Marks) > 0 || len(pkt.Gauges) > 0)
	if err := b.s.Send(pkt); err != nil {
		if c.stats.sendErrors.Add(1) == 1 {
			c.log.Warn("gossip send failed", "err", err)
		}
		return false
	}
	c.stats.packetsSent.Add(1)
	return true
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
