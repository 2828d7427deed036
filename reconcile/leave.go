package reconcile

import (
	"slices"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/ring"
)

// leave.go is what a node does for its counts as it stops cleanly in owner
// mode. There a key's counts live on its owner and successor only, and a
// rolling deploy stops members in waves: when the wave takes a key's
// owner and successor with the origin that counted (or a node that holds
// a gone origin's counts as the key's owner or successor), no live member
// keeps the counts. So the leaver hands them to the two members that come
// next on the key's ring walk (ring.Ring.Walk), which keep them as any
// receiver keeps a departed origin's counts (held.go) and pass them on to
// the key's new owner and successor when the placement changes
// (passHeld). A count is then lost only when its origin, the key's owner,
// its successor and both of those stop within one step of each other.

// handoverTo is how many members beyond a key's owner and successor a
// leaving node hands its counts of the key to.
const handoverTo = 2

// Handover, in owner mode, sends this node's own live counts of every key
// to the next handoverTo members of the key's ring walk that are neither
// this node nor the key's owner or successor (their tier entries went to
// every peer already), and when this node holds gone origins' (or earlier
// incarnations') counts of a key it owns or succeeds, exchanges states
// with that key's next members (Resyncer), which carries those counts as
// their origins'. It returns how many keys of its own it handed over.
//
// Call it after Run has returned, after the last Step and before leaving
// the mesh; it waits for the state exchanges (a round trip each). Without
// a Router sender, or in direct fan-out (every peer has every count), it
// does nothing.
func (c *Cluster) Handover(now time.Time) int {
	rt := c.router()
	if rt == nil || !c.agg.Load() {
		return 0
	}
	full := ring.New(rt.Members())
	var walk []string
	// next returns the members after h's owner and successor, this node
	// left out, and whether this node is h's owner or successor.
	next := func(h uint64) ([]string, bool) {
		walk = full.Walk(walk[:0], h, 3+handoverTo)
		home := len(walk) > 0 && walk[0] == c.name || len(walk) > 1 && walk[1] == c.name
		out := walk[:0]
		for i, m := range walk {
			if i >= 2 && m != c.name && len(out) < handoverTo {
				out = append(out, m)
			}
		}
		return out, home
	}
	ms := now.UnixMilli()
	out := make(map[string]*packet.Packet)
	keys := 0
	for _, r := range c.resources() {
		p := r.p.Load()
		for i := range r.shards {
			sh := &r.shards[i]
			sh.mu.Lock()
			for _, k := range sh.keys {
				n := 0
				for _, cn := range k.counts {
					if int(cn.slot) < len(p.life) && cn.bucket+p.life[cn.slot] > ms && cn.value > 0 {
						n++
					}
				}
				if n == 0 {
					continue
				}
				to, _ := next(k.hash)
				if len(to) == 0 {
					continue
				}
				keys++
				for _, m := range to {
					pkt := out[m]
					if pkt == nil {
						pkt = c.packet()
						out[m] = pkt
					}
					for _, cn := range k.counts {
						if int(cn.slot) < len(p.life) && cn.bucket+p.life[cn.slot] > ms && cn.value > 0 {
							pkt.Counts = append(pkt.Counts, packet.Count{Hash: k.hash, Slot: cn.slot, Bucket: cn.bucket, Value: cn.value})
						}
					}
					pkt.Names = append(pkt.Names, packet.Name{Hash: k.hash, Resource: r.name, Domain: k.domain})
				}
			}
			sh.mu.Unlock()
		}
	}
	for m, pkt := range out {
		if err := rt.SendTo(m, pkt); err != nil {
			c.log.Debug("handover not sent", "peer", m, "err", err)
		}
	}
	rs, ok := rt.(Resyncer)
	if !ok {
		return keys
	}
	set := map[string]bool{}
	held := func(o *origin) {
		for h, k := range o.keys {
			if len(k.counts) == 0 {
				continue
			}
			if to, home := next(h); home {
				for _, m := range to {
					set[m] = true
				}
			}
		}
	}
	for _, o := range c.tab.origins {
		if o.gone {
			held(o)
		}
	}
	for _, o := range c.tab.retired {
		held(o)
	}
	names := make([]string, 0, len(set))
	for m := range set {
		names = append(names, m)
	}
	slices.Sort(names)
	rs.ResyncNow(names)
	return keys
}
