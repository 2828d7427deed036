package cluster

import (
	"fmt"

	"github.com/obol-dev/obol/gossip/packet"
)

// repair.go is the sequenced streams' repair on the simulated network, as
// gossip runs it on memberlist, with the same package (gossip/stream):
// every node numbers its messages and keeps the recent ones; a receiver
// that finds a gap asks the origin for the missing seqs (a Request
// datagram, lost and cut like any other), and the origin sends them again
// from its ring, or, for one no longer there, and when the receiver gives
// up or the gap is too wide, the two exchange snapshots (memberlist's
// push/pull over TCP: not lost, but cut by partitions and dead nodes).

// heard tells nd's receiver of p, and reports whether p is news to merge;
// it schedules nd's repair when a gap is open.
func (s *sim) heard(nd *node, p *packet.Packet) bool {
	in := nd.in
	if p.Targeted {
		in = nd.tin
	}
	if in == nil || p.Seq == 0 {
		return true
	}
	if p.Targeted {
		in.Begin(p.From, p.Incarnation, 1)
	}
	fresh := in.Heard(p.From, p.Incarnation, p.Seq, s.now)
	if !fresh && s.measured() {
		s.res.Duplicates++
	}
	s.scheduleRepair(nd)
	return fresh
}

// scheduleRepair queues nd's next repair at its receiver's NextDue, unless
// one is queued no later.
func (s *sim) scheduleRepair(nd *node) {
	at, ok := nd.in.NextDue()
	if nd.tin != nil {
		if tat, tok := nd.tin.NextDue(); tok && (!ok || tat < at) {
			at, ok = tat, true
		}
	}
	if !ok {
		return
	}
	at = max(at, s.now)
	if nd.repairAt >= 0 && nd.repairAt <= at {
		return
	}
	nd.repairAt = at
	s.q.push(event{at: at, kind: evRepair, node: int32(nd.idx), gen: nd.gen})
}

// repair sends nd's due asks and runs the resyncs its receiver gave up to.
func (s *sim) repair(nd *node) {
	s.events++
	resync := nd.in.Due(s.now, packet.MaxRequestItems, func(from string, inc uint64, seqs []uint64) {
		j := s.index(from)
		if j < 0 {
			return
		}
		s.sendRequest(nd, j, &packet.Request{From: nd.name, Incarnation: nd.rec.Incarnation(), Target: inc, Seqs: append([]uint64(nil), seqs...)})
		if s.measured() {
			s.res.Asked += int64(len(seqs))
		}
	})
	for _, from := range resync {
		if j := s.index(from); j >= 0 {
			s.resync(nd, s.nodes[j])
		}
	}
	if nd.tin != nil {
		reship := nd.tin.Due(s.now, packet.MaxRequestItems, func(from string, inc uint64, seqs []uint64) {
			if j := s.index(from); j >= 0 {
				s.sendRequest(nd, j, &packet.Request{From: nd.name, Incarnation: nd.rec.Incarnation(), Target: inc, Seqs: append([]uint64(nil), seqs...), Reship: true})
				if s.measured() {
					s.res.Asked += int64(len(seqs))
				}
			}
		})
		for _, from := range reship { // given up on, or too much missing: everything it routes here
			if j := s.index(from); j >= 0 {
				s.sendRequest(nd, j, &packet.Request{From: nd.name, Incarnation: nd.rec.Incarnation(), Target: s.nodes[j].rec.Incarnation(), Reship: true})
			}
		}
	}
	s.scheduleRepair(nd)
}

// sendRequest sends r from nd to node j.
func (s *sim) sendRequest(nd *node, j int, r *packet.Request) {
	b, err := packet.EncodeRequest(r)
	if err != nil {
		s.err = fmt.Errorf("sim/cluster: node %d: request: %w", nd.idx, err)
		return
	}
	if s.wire(nd, j, len(b)) {
		s.q.push(event{at: s.arrival(), kind: evAsk, node: int32(j), from: int32(nd.idx), req: r, gen: s.nodes[j].gen})
	}
}

// answer is origin's reply to a Request from node from: the messages its
// ring still holds, sent again to the asker alone (a resync when any is
// gone), and the names of the hashes it remembers, in unsequenced
// messages to the asker.
func (s *sim) answer(origin *node, from int32, r *packet.Request) {
	s.events++
	if r.Target != origin.rec.Incarnation() {
		return // another incarnation's stream: the asker learns of the new one
	}
	asker := s.nodes[from]
	if r.Reship {
		s.answerTargeted(origin, asker, r)
		return
	}
	gone := false
	for _, seq := range r.Seqs {
		if origin.out == nil {
			break
		}
		b, ok := origin.out.Get(seq)
		if !ok {
			gone = true
			continue
		}
		if s.measured() {
			s.res.Resent++
		}
		if !s.sendRaw(origin, int(from), b) {
			return
		}
	}
	if gone {
		s.resync(origin, asker)
	}
	if len(r.Hashes) == 0 {
		return
	}
	names := origin.rec.Names(r.Hashes)
	if len(names) == 0 {
		return
	}
	msgs, err := packet.Split(&packet.Packet{From: origin.name, Incarnation: origin.rec.Incarnation(), Names: names}, s.budget)
	if err != nil {
		s.err = fmt.Errorf("sim/cluster: node %d: names: %w", origin.idx, err)
		return
	}
	for _, b := range msgs {
		if !s.sendRaw(origin, int(from), b) {
			return
		}
	}
}

// resync exchanges snapshots between a and b, as memberlist's push/pull
// (pushPull), counted as a resync.
func (s *sim) resync(a, b *node) {
	if s.pushPull(a, b, false) && s.measured() {
		s.res.Resyncs++
	}
}

// pushPull exchanges states between a and b, as memberlist's push/pull:
// each one's state (its Snapshot, with the counts it holds for other
// origins, and the last seq of its stream), encoded as gossip sends it
// (packet.EncodeState), reaches the other after Delay, unless a partition
// cuts them or either is dead (it reports false then), marked Join when
// join is set (a's join through b, as memberlist marks it). The bytes
// count as each node's.
func (s *sim) pushPull(a, b *node, join bool) bool {
	if a.dead || b.dead || s.cut(a.idx, b.idx) {
		return false
	}
	for _, x := range [2][2]*node{{a, b}, {b, a}} {
		src, dst := x[0], x[1]
		st := src.rec.Snapshot()
		st.From, st.Incarnation, st.Full = src.name, src.rec.Incarnation(), true
		if !join || dst != a {
			st.Sums = nil // as gossip sends them: to a joiner alone
		}
		if src.out != nil {
			st.Seq = src.out.Next()
		}
		enc, err := packet.EncodeState(st)
		if err != nil {
			s.err = fmt.Errorf("sim/cluster: node %d: snapshot: %w", src.idx, err)
			return false
		}
		if s.measured() {
			src.cnt.bytes += int64(len(enc))
			src.cnt.payload += int64(len(enc))
			s.res.Bytes += int64(len(enc))
			s.res.PayloadBytes += int64(len(enc))
			s.res.StateBytes += int64(len(enc))
		}
		dec, err := packet.DecodeState(enc)
		if err != nil {
			s.err = fmt.Errorf("sim/cluster: node %d: its snapshot does not decode: %w", src.idx, err)
			return false
		}
		dec.Join = join
		s.q.push(event{at: s.now + s.delay, kind: evState, node: int32(dst.idx), from: int32(src.idx), st: dec, gen: dst.gen})
	}
	return true
}

// state merges a snapshot that reached nd: it covers its origin's stream
// up to the snapshot's seq.
func (s *sim) state(nd *node, _ int32, st *packet.Packet) {
	s.events++
	if nd.in != nil {
		nd.in.Covered(st.From, st.Incarnation, st.Seq)
	}
	nd.rec.HandlePacket(st)
	s.reflects(nd, st)
}

// reflects tells convergence that nd, having merged state st, counts
// every bucket st holds of the main slot: the sender's own and those it
// holds for other origins (of the agent now at their node), each under
// its origin. (A state's merge is not seen by the engine tap, which
// cannot tell its origins apart.)
func (s *sim) reflects(nd *node, st *packet.Packet) {
	if len(s.conv.pending) == 0 {
		return
	}
	keys := make(map[uint64]int32, len(st.Names))
	for _, n := range st.Names {
		if k, ok := s.keyIdx[n.Domain]; ok && n.Resource == s.resName {
			keys[n.Hash] = k
		}
	}
	mark := func(from string, inc uint64, counts []packet.Count) {
		o := s.index(from)
		if o < 0 || o == nd.idx || s.nodes[o].name != from || s.nodes[o].rec.Incarnation() != inc {
			return
		}
		for _, c := range counts {
			if k, ok := keys[c.Hash]; ok && int(c.Slot) == s.mainSlot {
				s.conv.applied(nd.idx, bucketKey{origin: int32(o), key: k, bucket: c.Bucket}, s.now)
			}
		}
	}
	mark(st.From, st.Incarnation, st.Counts)
	for i := range st.Held {
		mark(st.Held[i].From, st.Held[i].Incarnation, st.Held[i].Counts)
	}
}

// index returns the index of the node named name, −1 for none.
func (s *sim) index(name string) int {
	if i, ok := s.byName[name]; ok {
		return i
	}
	return -1
}

// answerTargeted answers a Request about origin's targeted stream to the
// asker as gossip.Node does: the messages still kept, sent again; for
// those no longer kept, an empty message under their seq and a reship of
// everything origin routes to the asker (reconcile.Cluster.ReshipTo); a
// reship alone when it lists no seqs.
func (s *sim) answerTargeted(origin, asker *node, r *packet.Request) {
	gone := len(r.Seqs) == 0
	for _, seq := range r.Seqs {
		b, ok := origin.tout.Get(asker.name, seq)
		if !ok {
			gone = true
			var err error
			if b, err = packet.Encode(&packet.Packet{From: origin.name, Incarnation: origin.rec.Incarnation(), Seq: seq, Targeted: true}); err != nil {
				s.err = fmt.Errorf("sim/cluster: node %d: %w", origin.idx, err)
				return
			}
		}
		if s.measured() {
			s.res.Resent++
		}
		if !s.sendRaw(origin, asker.idx, b) {
			return
		}
	}
	if gone {
		if s.measured() {
			s.res.Reships++
		}
		origin.rec.ReshipTo(asker.name)
	}
}

// sendRaw sends datagram b from node from to node j alone (a message sent
// again, or an answer), lost and cut like any; false when b does not
// decode (the run's error is set).
func (s *sim) sendRaw(from *node, j int, b []byte) bool {
	pkt, err := packet.Decode(b)
	if err != nil {
		s.err = fmt.Errorf("sim/cluster: node %d: a datagram it sends again does not decode: %w", from.idx, err)
		return false
	}
	if s.wire(from, j, len(b)) {
		dg := &datagram{from: int32(from.idx), size: len(b), pkt: pkt}
		s.q.push(event{at: s.arrival(), kind: evDeliver, dg: dg, to: []int32{int32(j)}})
	}
	return true
}
