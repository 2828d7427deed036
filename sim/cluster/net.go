package cluster

import (
	"fmt"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/stream"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// net.go is the simulated network: each node's reconcile.Sender, which
// encodes and splits a packet as gossip.Node does and schedules its
// datagrams, their delivery, and the engine tap that sees what a merge
// applied.

// sender is node from's reconcile.Sender.
type sender struct {
	s    *sim
	from int
}

var _ reconcile.Sender = (*sender)(nil)

// Live is what memberlist counts live: every node whose death the others
// have not yet detected.
func (sd *sender) Live() int { return sd.s.live }

// Repairs reports whether messages are numbered and repaired, so that a
// change ships once (reconcile.Repairer): unless Scenario.Unsequenced.
func (sd *sender) Repairs() bool { return !sd.s.sc.Unsequenced }

// Reships reports whether messages to one node are numbered per receiver
// and lost ones reshipped (reconcile.TargetedRepairer): unless
// Scenario.Unsequenced or TargetedResends.
func (sd *sender) Reships() bool { return !sd.s.sc.Unsequenced && !sd.s.sc.TargetedResends }

// HeartbeatStretch spreads an idle node's heartbeats as gossip.Node does
// in a mesh whose members all stretch (reconcile.HeartbeatStretcher):
// unless Scenario.FlatHeartbeat.
func (sd *sender) HeartbeatStretch() int {
	if sd.s.sc.FlatHeartbeat {
		return 1
	}
	return stream.Stretch(sd.s.live, stream.HeartbeatPeers)
}

// AskNames sends origin a Request for the names of hashes
// (reconcile.NameAsker), as gossip.Node does.
func (sd *sender) AskNames(origin string, inc uint64, hashes []uint64) {
	s := sd.s
	j := s.index(origin)
	if j < 0 {
		return
	}
	nd := s.nodes[sd.from]
	s.sendRequest(nd, j, &packet.Request{From: nd.name, Incarnation: nd.rec.Incarnation(), Target: inc, Hashes: append([]uint64(nil), hashes...)})
	if s.measured() {
		s.res.NamesAsked += int64(len(hashes))
	}
}

// Send splits p into datagrams at the budget (numbered, unless
// Scenario.Unsequenced), decodes each once, and schedules it for every
// peer it is not lost or cut to. Bytes are counted for every peer
// memberlist would send to, the dead but undetected too.
func (sd *sender) Send(p *packet.Packet) error {
	s := sd.s
	nd := s.nodes[sd.from]
	cp := *p
	if nd.out != nil {
		cp.Seq = nd.out.Next()
	}
	msgs, err := packet.Split(&cp, s.budget)
	if err != nil {
		s.err = fmt.Errorf("sim/cluster: node %d: split: %w", sd.from, err)
		return err
	}
	if nd.out != nil {
		nd.out.Sent(msgs)
	}
	for _, b := range msgs {
		pkt, err := packet.Decode(b)
		if err != nil {
			s.err = fmt.Errorf("sim/cluster: node %d: its own datagram does not decode: %w", sd.from, err)
			return err
		}
		dg := &datagram{from: int32(sd.from), size: len(b), pkt: pkt}
		var to []int32
		for j, peer := range s.nodes {
			if j == sd.from {
				continue
			}
			if !peer.listed {
				continue // memberlist does not list it (yet, or any more)
			}
			if !s.wire(nd, j, len(b)) {
				continue
			}
			if s.jitter > 0 {
				s.q.push(event{at: s.arrival(), kind: evDeliver, dg: dg, to: []int32{int32(j)}})
				continue
			}
			to = append(to, int32(j))
		}
		if len(to) > 0 {
			s.q.push(event{at: s.now + s.delay, kind: evDeliver, dg: dg, to: to})
		}
	}
	return nil
}

// wire counts a datagram of size payload bytes sent by nd to node j, and
// reports whether it arrives: not to a dead node, across a partition, or
// when Loss takes it.
func (s *sim) wire(nd *node, j int, size int) bool {
	measured := s.measured()
	if measured {
		nd.cnt.bytes += int64(size + s.overhead)
		nd.cnt.payload += int64(size)
		nd.cnt.datagrams++
		s.res.Bytes += int64(size + s.overhead)
		s.res.PayloadBytes += int64(size)
		s.res.Datagrams++
	}
	if s.nodes[j].dead || s.cut(nd.idx, j) {
		if measured {
			s.res.Cut++
		}
		return false
	}
	if s.sc.Loss > 0 && s.netRand.Float64() < s.sc.Loss {
		if measured {
			s.res.Lost++
		}
		return false
	}
	return true
}

// arrival is when a datagram sent now arrives: after Delay and a draw of
// Jitter.
func (s *sim) arrival() int64 {
	if s.jitter > 0 {
		return s.now + s.delay + s.netRand.Int64N(s.jitter)
	}
	return s.now + s.delay
}

// measured reports whether now is in the measured span: after the
// warm-up, before the end of the load.
func (s *sim) measured() bool { return s.now >= s.warm && s.now < s.end }

// cut reports whether a partition separates a and b now.
func (s *sim) cut(a, b int) bool {
	for _, p := range s.sc.Partitions {
		if s.now < int64(p.Start) || s.now >= int64(p.End) {
			continue
		}
		var ina, inb bool
		for _, n := range p.Nodes {
			ina = ina || n == a
			inb = inb || n == b
		}
		if ina != inb {
			return true
		}
	}
	return false
}

// deliver merges a datagram at each of its receivers still alive.
func (s *sim) deliver(e event) {
	measured := s.measured()
	s.curFrom, s.curSum = e.dg.from, e.dg.pkt.Sum
	for _, r := range e.to {
		nd := s.nodes[r]
		if nd.dead {
			continue
		}
		s.events++
		if measured {
			nd.cnt.merges++
			nd.cnt.decodeBytes += int64(e.dg.size)
			s.res.Delivered++
		}
		if !s.heard(nd, e.dg.pkt) {
			continue
		}
		nd.rec.HandlePacket(e.dg.pkt)
		s.kicked(nd, s.at(s.now)) // an owner's relay may have become urgent
	}
	s.curFrom, s.curSum = -1, false
}

// tap is a node's engine as its cluster's Applier: it forwards every
// change, and tells convergence when a count of the main slot lands.
type tap struct {
	*local.Engine
	s *sim
	r int
}

var _ reconcile.Applier = (*tap)(nil)

func (tp *tap) ApplyCount(resource, domain string, slot int, at, width, n, now int64) {
	tp.Engine.ApplyCount(resource, domain, slot, at, width, n, now)
	s := tp.s
	if slot != s.mainSlot || s.curFrom < 0 || len(s.conv.pending) == 0 {
		return
	}
	k, ok := s.keyIdx[domain]
	if !ok {
		return
	}
	if s.curSum {
		// A sum holds every origin's count its owner had merged: the
		// samples of this bucket the owner counted (its own included),
		// but the receiver's.
		s.conv.summed(tp.r, int(s.curFrom), k, at, s.now)
		return
	}
	s.conv.applied(tp.r, bucketKey{origin: s.curFrom, key: k, bucket: at}, s.now)
}
