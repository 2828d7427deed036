package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/ring"
	"github.com/obol-dev/obol/reconcile"
)

// route.go is owner mode on the simulated network: each node's sender is a
// reconcile.Router over one ring of the nodes not known dead (rebuilt
// when a death is detected, as memberlist's members change), and sends to
// one node as gossip.Node's SendTo does: split at the budget, numbered
// per receiver (a receiver that finds one missing asks for a reship,
// repair.go) unless Scenario.TargetedResends or Unsequenced.

var _ reconcile.Router = (*sender)(nil)

// Aggregates reports that every node takes part in owner mode (the
// threshold, Scenario.OwnerFrom, is reconcile's to apply).
func (sd *sender) Aggregates() bool { return true }

// Owners places key hash h on the ring of the live nodes.
func (sd *sender) Owners(h uint64) (owner, successor string) { return sd.s.ring.Owners(h) }

// Epoch changes when a death is detected.
func (sd *sender) Epoch() uint64 { return sd.s.epoch }

// Members lists the nodes of the ring.
func (sd *sender) Members() []string { return sd.s.ring.Names() }

// SendTo splits p into datagrams at the budget, numbered in the sender's
// stream to node to when Reships, decodes each once, and schedules it for
// node to alone.
func (sd *sender) SendTo(to string, p *packet.Packet) error {
	s := sd.s
	nd := s.nodes[sd.from]
	j := s.index(to)
	if j < 0 || j == sd.from {
		return fmt.Errorf("sim/cluster: node %d: send to %q: not a peer", sd.from, to)
	}
	cp := *p
	cp.Seq, cp.Targeted = 0, false
	if nd.tout != nil {
		cp.Targeted, cp.Seq = true, nd.tout.Next(to)
	}
	msgs, err := packet.Split(&cp, s.budget)
	if err != nil {
		s.err = fmt.Errorf("sim/cluster: node %d: split: %w", sd.from, err)
		return err
	}
	if nd.tout != nil {
		nd.tout.Sent(to, msgs)
	}
	for _, b := range msgs {
		pkt, err := packet.Decode(b)
		if err != nil {
			s.err = fmt.Errorf("sim/cluster: node %d: its own datagram does not decode: %w", sd.from, err)
			return err
		}
		if p.Sum && s.measured() {
			s.res.Sums++
		}
		if s.measured() {
			s.res.Targeted++
			if !p.Sum && len(p.Counts) == 0 && len(p.Names) == 0 {
				s.res.FollowUps++
			}
		}
		if !s.nodes[j].listed {
			continue // memberlist does not list it
		}
		if !s.wire(nd, j, len(b)) {
			continue
		}
		dg := &datagram{from: int32(sd.from), size: len(b), pkt: pkt}
		s.q.push(event{at: s.arrival(), kind: evDeliver, dg: dg, to: []int32{int32(j)}})
	}
	return nil
}

// Owners returns which nodes own key number key of s (0 ≤ key < Keys) and
// succeed it on the ring of all s's nodes, as the run places it until a
// death is detected: for a Death of a key's owner.
func (s Scenario) Owners(key int) (owner, successor int) {
	names := make([]string, s.Nodes)
	idx := make(map[string]int, s.Nodes)
	for i := range names {
		names[i] = or(s.NamePrefix, defaultNode) + strconv.Itoa(i)
		idx[names[i]] = i
	}
	o, sc := ring.New(names).Owners(reconcile.KeyHash(or(s.ResourceName, defaultResource), or(s.KeyPrefix, defaultKey)+strconv.Itoa(key)))
	owner, successor = -1, -1
	if i, ok := idx[o]; ok {
		owner = i
	}
	if i, ok := idx[sc]; ok {
		successor = i
	}
	return owner, successor
}

// placeRing builds the ring of the names memberlist lists (a node whose
// departure is not yet known included) and moves the epoch.
func (s *sim) placeRing() {
	names := make([]string, 0, len(s.listed))
	for name := range s.listed {
		names = append(names, name)
	}
	slices.Sort(names)
	s.ring = ring.New(names)
	s.epoch++
}

// Resync exchanges states with the node named name at once, as
// gossip.Node's Resync does (a push/pull; reconcile.Resyncer), at most
// once per resyncEvery for the pair, as gossip's default ResyncAfter, and
// reports whether it did.
func (sd *sender) Resync(name string) bool {
	s := sd.s
	j := s.index(name)
	if j < 0 || j == sd.from || s.nodes[j].dead {
		return false
	}
	if s.resynced == nil {
		s.resynced = map[[2]int]int64{}
	}
	pair := [2]int{sd.from, j}
	if last, ok := s.resynced[pair]; ok && s.now-last < int64(resyncEvery) {
		return false
	}
	s.resynced[pair] = s.now
	s.resync(s.nodes[sd.from], s.nodes[j])
	return true
}

// ResyncNow exchanges states with each of names at once, as gossip.Node's
// ResyncNow does (not rate limited).
func (sd *sender) ResyncNow(names []string) {
	s := sd.s
	for _, name := range names {
		if j := s.index(name); j >= 0 && j != sd.from && !s.nodes[j].dead {
			s.resync(s.nodes[sd.from], s.nodes[j])
		}
	}
}

// resyncEvery is gossip's default ResyncAfter: the least time between two
// push/pulls a node asks of one member.
const resyncEvery = 2500 * time.Millisecond
