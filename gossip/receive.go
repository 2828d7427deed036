package gossip

// The receive path of sync messages: NotifyMsg (memberlist's one packet
// goroutine) hands each datagram to a receive worker chosen by its
// sender's name; the worker decodes it and calls the Handler. memberlist's
// goroutine never waits: a datagram whose worker's queue is full is
// dropped and counted.

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
)

// dropLogEvery is the least time between two warnings about datagrams
// dropped on a full receive queue, on the node's clock.
const dropLogEvery = time.Minute

// datagrams holds the copies NotifyMsg queues, MaxDatagram bytes of
// capacity each; a worker returns one once Decode is done with it (Decode
// copies what it keeps).
var datagrams = sync.Pool{New: func() any { b := make([]byte, 0, MaxDatagram); return &b }}

// receiver is the node's receive workers: one queue each, and the seed of
// the hash that picks a queue by sender name.
type receiver struct {
	queues []chan *[]byte
	seed   maphash.Seed
}

func newReceiver(workers, queue int) receiver {
	r := receiver{queues: make([]chan *[]byte, workers), seed: maphash.MakeSeed()}
	for i := range r.queues {
		r.queues[i] = make(chan *[]byte, queue)
	}
	return r
}

// queueFor returns the queue of the worker that handles messages from the
// node named from.
func (r *receiver) queueFor(from []byte) chan *[]byte {
	if len(r.queues) == 1 {
		return r.queues[0]
	}
	return r.queues[maphash.Bytes(r.seed, from)%uint64(len(r.queues))]
}

// handoff is NotifyMsg's work: it counts the datagram b, drops it if it
// is oversized or has no readable sender (packet.Peek), and otherwise
// queues a copy for its sender's worker, or drops it (Stats.QueueDrops)
// when that queue is full. It never blocks; b is not kept. After Shutdown
// it discards b.
func (n *Node) handoff(b []byte) {
	if n.stopped() {
		return
	}
	n.bytesIn.Add(uint64(len(b)))
	n.packetsIn.Add(1)
	if len(b) > MaxDatagram {
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped oversized message", "bytes", len(b))
		return
	}
	_, from, err := packet.Peek(b)
	if err != nil { // Decode would fail the same way
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped undecodable message", "bytes", len(b), "err", err)
		return
	}
	q := n.recv.queueFor(from)
	buf := datagrams.Get().(*[]byte)
	*buf = append((*buf)[:0], b...)
	select {
	case q <- buf:
	default:
		datagrams.Put(buf)
		n.queueFull(from)
	}
}

// queueFull counts a datagram from the node named from dropped on a full
// receive queue, and warns at most once per dropLogEvery.
func (n *Node) queueFull(from []byte) {
	total := n.queueDrops.Add(1)
	now := n.clk.Now().UnixNano()
	last := n.dropLoggedAt.Load()
	if last != 0 && now-last < int64(dropLogEvery) {
		return
	}
	if !n.dropLoggedAt.CompareAndSwap(last, now) {
		return // another goroutine logs
	}
	since := total - n.dropsLogged.Swap(total)
	n.log.Warn("gossip: receive queue full, dropping sync messages; asks, resends and resyncs repair the loss",
		"dropped", since, "total", total, "from", string(from),
		"workers", len(n.recv.queues), "queue", cap(n.recv.queues[0]))
}

// decode decodes b, a sync message or a push/pull state (what, for the
// log), and returns nil, counted in Stats.Dropped, when it is undecodable
// or claims this node's name.
func (n *Node) decode(b []byte, what string) *packet.Packet {
	p, err := packet.Decode(b)
	return n.accept(p, err, len(b), what)
}

// decodeState is decode for a push/pull state: a mesh state or a full
// message (packet.DecodeState).
func (n *Node) decodeState(b []byte) *packet.Packet {
	p, err := packet.DecodeState(b)
	return n.accept(p, err, len(b), "state")
}

// accept returns p, or nil (counted and logged) when it failed to decode
// (err) or claims this node's name.
func (n *Node) accept(p *packet.Packet, err error, size int, what string) *packet.Packet {
	if err != nil {
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped undecodable "+what, "bytes", size, "err", err)
		return nil
	}
	if p.From == n.name {
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped " + what + " claiming this node's name")
		return nil
	}
	return p
}

// receiveLoop is a receive worker: it handles the datagrams of queue q, in
// order, until Shutdown, and discards what is still queued then.
func (n *Node) receiveLoop(q chan *[]byte) {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case buf := <-q:
			if n.stopped() {
				return
			}
			n.receive(*buf)
			datagrams.Put(buf)
		}
	}
}

// receive handles one datagram in the one switch over the message types
// (packet.Type): a sync message of any type goes to receiveSync, a request
// is answered (answerAsk), a reship request too (answerReship). A datagram
// whose header does not decode is counted in Stats.Dropped.
func (n *Node) receive(b []byte) {
	t, _, err := packet.Peek(b)
	if err != nil {
		n.accept(nil, err, len(b), "message")
		return
	}
	switch t { // Peek refuses every other type: a MsgState is never a datagram
	case packet.MsgSync, packet.MsgSeqSync, packet.MsgSum, packet.MsgTargeted:
		n.receiveSync(b)
	case packet.MsgRequest:
		n.receiveRequest(b, n.answerAsk)
	case packet.MsgReship:
		n.receiveRequest(b, n.answerReship)
	}
}

// receiveSync decodes a sync message and hands it to the handler, unless
// it is undecodable or claims this node's name (both counted in
// Stats.Dropped), comes from a node declared dead or left or from an
// earlier incarnation (Stats.NotMember), or was heard before
// (Stats.Duplicates); only a message handed on counts as the sender's last
// sync.
func (n *Node) receiveSync(b []byte) {
	p := n.decode(b, "message")
	if p == nil || !n.fromMember(p, "message") {
		return
	}
	if !n.enter() {
		return
	}
	defer n.exit()
	if n.heard(p) { // a duplicate, a replay, refreshes nothing
		n.received(p, len(b))
		n.h.HandlePacket(p)
	}
}

// receiveRequest decodes a request (a MsgRequest or a MsgReship) and
// answers it with answer, unless it is undecodable or claims this node's
// name (both counted in Stats.Dropped), or is about another incarnation's
// stream (the asker will hear of this one).
func (n *Node) receiveRequest(b []byte, answer func(*packet.Request)) {
	r, err := packet.DecodeRequest(b)
	if err != nil || r.From == n.name {
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped request", "bytes", len(b), "err", err)
		return
	}
	if !n.enter() {
		return
	}
	defer n.exit()
	if r.Target != n.inc {
		return
	}
	answer(r)
}

// leftGrace is how long after a member left its messages are still heard:
// a leaving node's last messages, sent before its leave, may be handled
// after it (memberlist hands membership news out before the messages
// queued with them, and the receive workers run behind memberlist), and
// they carry counts no one else has. A replay of one already heard is a
// duplicate all the same (the receiver's streams remember it).
const leftGrace = 5 * time.Second

// fromMember reports whether p (what, for the log) may be heard as far as
// its sender goes. It is false, counted in Stats.NotMember, for a sender
// memberlist has declared dead or left (leftGrace ago or more), and for an
// incarnation older than the member's: such a packet is most likely a replay of captured
// datagrams (no key is needed to replay them), and applying it would
// bring back what the sender held when it was sent, and make it look as
// if it had just spoken. A member truly back is reported alive by
// memberlist first (its push/pull merges the membership before the
// state), and resynced then. A sender memberlist has not reported yet is
// heard (a joiner's packets may outrun the news of it); once a gone
// member is forgotten (goneRetention after it went), the receiver's
// streams still know its old seqs (stream.In.Forget), so a replay of them
// is a duplicate. A message from a peer declared dead still asks for a
// push/pull with it (queueResyncLocked, at most one per ResyncAfter),
// which changes nothing unless the peer answers.
func (n *Node) fromMember(p *packet.Packet, what string) bool {
	n.mu.Lock()
	ps := n.peers[p.From]
	// A sender memberlist has not reported yet (a joiner whose packets
	// outran the news of it) is heard: its stream numbers and the merge
	// judge it, as before. One reported dead, or left more than leftGrace
	// ago, or speaking under an earlier incarnation, is not.
	gone := ps != nil && (ps.state == "dead" || ps.state == "left" && n.clk.Now().Sub(ps.changed) > leftGrace)
	live := ps == nil || (!gone && p.Incarnation >= ps.inc)
	var state string
	if ps != nil {
		state = ps.state
		if state == "dead" && p.Incarnation >= ps.inc {
			// A peer declared dead may only have been cut off: a push/pull
			// with it (at most one per ResyncAfter) lets memberlist find
			// out, and revive it if it answers (the beacons rely on this).
			n.queueResyncLocked(p.From, ps, n.clk.Now())
		}
	}
	n.mu.Unlock()
	if !live {
		n.notMember.Add(1)
		n.log.Debug("gossip: dropped "+what+" from a node that is not a live member", "from", p.From,
			"incarnation", p.Incarnation, "state", state)
	}
	return live
}
