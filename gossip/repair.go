package gossip

// Sequenced streams and their repair: Send numbers a node's messages while
// every live peer reads them (Repairs), keeps the recent ones, and sends
// them again to a peer that asks; the receive path notes every seq heard
// (gossip/stream), and the repair loop asks origins for the gaps, or
// resyncs with a push/pull when a gap cannot be filled.

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/stream"
	"github.com/obol-dev/obol/internal/clock"
)

// RepairMessages and RepairBytes bound the ring of recent sync messages a
// node keeps to send again when a peer asks for one it missed: the last
// RepairMessages messages, fewer when they hold more than RepairBytes. A
// peer that asks for one no longer kept is resynced with a push/pull.
const (
	RepairMessages = 4096
	RepairBytes    = 4 << 20
)

// repairProtocol is memberlist's delegate protocol max of a node that
// reads sequenced messages and answers Requests.
const repairProtocol = 1

// heartbeatProtocol is memberlist's delegate protocol max of a node that
// reads a silence of its peers as loss only past ResyncAfter ×
// HeartbeatStretch, and stretches its own idle heartbeats as much.
const heartbeatProtocol = 4

// stateProtocol is memberlist's delegate protocol max of a node that reads
// a mesh state (packet.MsgState) in a push/pull: what its peer holds
// for other origins beside its own counts.
const stateProtocol = 5

// HoldsForMesh reports whether the node's push/pull state passes on the
// counts it holds for other origins (packet.Held): while every live peer
// reads a mesh state (memberlist's delegate protocol max of 5 or more).
// Otherwise the state is the node's own snapshot alone, which every
// release reads. Cheap: the answer is kept up to date by membership
// events.
func (n *Node) HoldsForMesh() bool { return n.allState.Load() }

// sumsProtocol is memberlist's delegate protocol max of a node that reads
// the sums a mesh state may carry (packet.Packet.Sums, a sixth element).
const sumsProtocol = 6

// SumsInJoins reports whether a join's push/pull state carries the sums
// this node holds (owner mode: the keys it knows as their owners' sums):
// while every live peer reads them (memberlist's delegate protocol max of
// 6 or more). Cheap: the answer is kept up to date by membership events.
func (n *Node) SumsInJoins() bool { return n.allSums.Load() }

// HeartbeatStretch returns by how much the node's idle heartbeats are
// spread in this mesh (reconcile.HeartbeatStretcher): 1 (every heartbeat
// period, every peer) unless every live member stretches too (memberlist's
// delegate protocol max of 4 or more) and there are more than
// stream.HeartbeatPeers of them besides self; then stream.Stretch of the
// live members, so that an idle node sends about stream.HeartbeatPeers
// heartbeats per period whatever the mesh's size. A peer silent for
// ResyncAfter times as much is resynced when heard from again. Cheap: the
// answer is kept up to date by membership events.
func (n *Node) HeartbeatStretch() int { return int(n.stretch.Load()) }

// NameSource is implemented by a Handler that can tell the names of key
// hashes it shipped (reconcile.Cluster): a peer that received counts of a
// hash whose name it does not know asks for it with a Request, and the
// node answers with the names Names returns. Must not block.
type NameSource interface {
	Names(hashes []uint64) []packet.Name
}

// Repairs reports whether the node numbers its messages: unless
// Config.Unsequenced, while every live peer reads sequenced messages and
// asks for what it misses (memberlist's delegate protocol max of 1 or
// more). A change can then ship once (reconcile.Repairer). Cheap: the
// answer is kept up to date by membership events.
func (n *Node) Repairs() bool { return !n.unsequenced && n.allRepair.Load() }

// recount recomputes, in one pass over the live members, whether every
// live peer repairs (Repairs) and whether every live member, self
// included, aggregates (Aggregates). n.mu must be held.
func (n *Node) recount() {
	repair, owners, targeted, stretches, states, sums := true, true, true, true, true, true
	live := 0
	for name, ps := range n.peers {
		if ps.state != "alive" {
			continue
		}
		live++
		if ps.protoMax < heartbeatProtocol {
			stretches = false
		}
		if name != n.name && ps.protoMax < repairProtocol {
			repair = false
		}
		if name != n.name && ps.protoMax < stateProtocol {
			states = false
		}
		if name != n.name && ps.protoMax < sumsProtocol {
			sums = false
		}
		if ps.protoMax < ownerProtocol {
			owners = false
		}
		if ps.protoMax < targetedProtocol {
			targeted = false
		}
	}
	n.allRepair.Store(repair)
	n.allOwners.Store(owners)
	n.allTargeted.Store(targeted)
	n.allState.Store(states)
	n.allSums.Store(sums)
	stretch := 1
	if stretches {
		stretch = stream.Stretch(max(live, 1), n.hbPeers)
	}
	n.stretch.Store(int64(stretch))
}

// heard tells the receiver of p's seq and reports whether p is news: a
// message heard before (a repair that crossed a late original) is not
// merged again.
func (n *Node) heard(p *packet.Packet) bool {
	if p.Seq == 0 {
		return true
	}
	now := n.clk.Now().UnixNano()
	n.inMu.Lock()
	in := n.in
	if p.Targeted {
		in = n.tin
		in.Begin(p.From, p.Incarnation, 1)
	}
	fresh := in.Heard(p.From, p.Incarnation, p.Seq, now)
	pending := in.Pending()
	n.inMu.Unlock()
	if pending {
		n.kickRepair()
	}
	if !fresh {
		n.duplicates.Add(1)
	}
	return fresh
}

// covered tells the receiver that a snapshot p holds its origin's stream
// up to p.Seq.
func (n *Node) covered(p *packet.Packet) {
	if p.Seq == 0 {
		return
	}
	n.inMu.Lock()
	n.in.Covered(p.From, p.Incarnation, p.Seq)
	n.inMu.Unlock()
}

// forget drops what the receiver knows of name's stream.
func (n *Node) forget(name string) {
	n.inMu.Lock()
	n.in.Forget(name)
	n.tin.Forget(name)
	n.inMu.Unlock()
}

// kickRepair wakes the repair loop: a gap is open.
func (n *Node) kickRepair() {
	select {
	case n.repairKick <- struct{}{}:
	default:
	}
}

// repairLoop runs repairStep, on clk, whenever the receiver has a gap open
// or a resync to ask: at each instant its NextDue says, until nothing is
// pending; then it waits for the next kick. It runs until Shutdown.
func (n *Node) repairLoop(clk clock.Clock) {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case <-n.repairKick:
		}
		for {
			// repairStep does nothing once Shutdown began, so what is due
			// stays due: without this check the loop would spin and
			// Shutdown would wait for it forever.
			select {
			case <-n.done:
				return
			default:
			}
			n.inMu.Lock()
			at, ok := n.in.NextDue()
			if tat, tok := n.tin.NextDue(); tok && (!ok || tat < at) {
				at, ok = tat, true
			}
			n.inMu.Unlock()
			if !ok {
				break
			}
			if wait := time.Duration(at - clk.Now().UnixNano()); wait > 0 {
				select {
				case <-n.done:
					return
				case <-clk.After(wait):
				}
			}
			n.repairStep(clk.Now())
		}
	}
}

// ask is one Request for the repair loop to send.
type ask struct {
	to  string
	req packet.Request
}

// repairStep is the repair loop's step: it sends the asks due at now to
// their origins and queues a push/pull with each origin the receiver gave
// up on; it returns how many asks it sent.
func (n *Node) repairStep(now time.Time) int {
	if n.stopped() {
		return 0
	}
	var asks []ask
	var resync []string
	n.inMu.Lock()
	if !n.in.Pending() && !n.tin.Pending() {
		n.inMu.Unlock()
		return 0
	}
	resync = n.in.Due(now.UnixNano(), packet.MaxRequestItems, func(from string, inc uint64, seqs []uint64) {
		asks = append(asks, ask{to: from, req: packet.Request{From: n.name, Incarnation: n.inc, Target: inc, Seqs: append([]uint64(nil), seqs...)}})
	})
	reship := n.tin.Due(now.UnixNano(), packet.MaxRequestItems, func(from string, inc uint64, seqs []uint64) {
		asks = append(asks, ask{to: from, req: packet.Request{From: n.name, Incarnation: n.inc, Target: inc, Seqs: append([]uint64(nil), seqs...), Reship: true}})
	})
	n.inMu.Unlock()
	for _, from := range reship { // given up on, or too much missing: everything it routes here
		asks = append(asks, ask{to: from, req: packet.Request{From: n.name, Incarnation: n.inc, Target: n.tinc(from), Reship: true}})
	}
	sent := 0
	for i := range asks {
		a := &asks[i]
		if !n.sendRequest(a.to, &a.req) {
			continue
		}
		sent++
		n.asked.Add(uint64(len(a.req.Seqs)))
		if a.req.Reship && len(a.req.Seqs) == 0 {
			n.reshipsAsked.Add(1)
		}
	}
	if len(resync) > 0 {
		n.mu.Lock()
		for _, name := range resync {
			n.repairResyncs.Add(1)
			n.queueResyncLocked(name, n.peer(name), now)
		}
		n.mu.Unlock()
	}
	return sent
}

// AskNames asks the node named origin, of incarnation inc, for the names
// of hashes (at most packet.MaxRequestItems), best effort: the answer, if
// any, arrives as a sync message holding the names. A peer of an earlier
// release, which would not answer, is not asked. Safe for concurrent use;
// reconcile calls it for counts whose key it cannot name
// (reconcile.NameAsker).
func (n *Node) AskNames(origin string, inc uint64, hashes []uint64) {
	if n.stopped() || len(hashes) == 0 {
		return
	}
	n.mu.Lock()
	ps := n.peers[origin]
	answers := ps != nil && ps.protoMax >= repairProtocol // an earlier release would drop the Request
	n.mu.Unlock()
	if !answers {
		return
	}
	hashes = hashes[:min(len(hashes), packet.MaxRequestItems)]
	if n.sendRequest(origin, &packet.Request{From: n.name, Incarnation: n.inc, Target: inc, Hashes: hashes}) {
		n.namesAsked.Add(uint64(len(hashes)))
	}
}

// sendRequest sends r to the member named to, and reports whether it went.
func (n *Node) sendRequest(to string, r *packet.Request) bool {
	b, err := packet.EncodeRequest(r)
	if err != nil {
		n.log.Debug("gossip: request not encoded", "err", err)
		return false
	}
	return n.sendTo(to, b) == nil
}

// sendTo sends datagram b to the member named to, best effort, counting
// it; an error naming the member when its address is unknown or the send
// failed (counted in Stats.SendErrors).
func (n *Node) sendTo(to string, b []byte) error {
	n.mu.Lock()
	var addr string
	if ps := n.peers[to]; ps != nil {
		addr = ps.addr
	}
	n.mu.Unlock()
	m := memberNode(to, addr)
	if m == nil {
		return fmt.Errorf("gossip: send to %s: address %q unknown", to, addr)
	}
	if err := n.ml.SendBestEffort(m, b); err != nil {
		n.sendErrors.Add(1)
		return fmt.Errorf("gossip: send to %s (%s): %w", to, addr, err)
	}
	n.packetsOut.Add(1)
	n.bytesOut.Add(uint64(len(b)))
	n.mu.Lock()
	n.peer(to).out += uint64(len(b))
	n.mu.Unlock()
	return nil
}

// memberNode is the memberlist node to send to name at addr ("ip:port"),
// nil when addr is not one.
func memberNode(name, addr string) *memberlist.Node {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	p, err := strconv.Atoi(port)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || p <= 0 || p > 65535 {
		return nil
	}
	return &memberlist.Node{Name: name, Addr: ip, Port: uint16(p)}
}

// answerAsk answers a peer's MsgRequest about this incarnation's stream
// (receiveRequest checked the incarnation): the messages it asks for, sent
// again to it alone from the ring (a push/pull with it when any is no
// longer kept), and the names of the hashes it asks for, when the handler
// can tell them (NameSource).
func (n *Node) answerAsk(r *packet.Request) {
	if len(r.Seqs) > 0 {
		msgs := make([][]byte, 0, len(r.Seqs))
		gone := false
		n.sendMu.Lock()
		for _, s := range r.Seqs {
			if b, ok := n.out.Get(s); ok {
				msgs = append(msgs, b)
			} else {
				gone = true
			}
		}
		n.sendMu.Unlock()
		for _, b := range msgs {
			if n.sendTo(r.From, b) == nil {
				n.resent.Add(1)
			}
		}
		if gone {
			now := n.clk.Now()
			n.mu.Lock()
			n.repairResyncs.Add(1)
			n.queueResyncLocked(r.From, n.peer(r.From), now)
			n.mu.Unlock()
		}
	}
	if len(r.Hashes) > 0 {
		ns, ok := n.h.(NameSource)
		if !ok {
			return
		}
		names := ns.Names(r.Hashes)
		if len(names) == 0 {
			return
		}
		msgs, err := packet.Split(&packet.Packet{From: n.name, Incarnation: n.inc, Names: names}, n.budget)
		if err != nil {
			n.log.Debug("gossip: names not encoded", "err", err)
			return
		}
		sent := false
		for _, b := range msgs {
			sent = n.sendTo(r.From, b) == nil || sent
		}
		if sent {
			n.namesSent.Add(uint64(len(names)))
		}
	}
}

// newIn is the receiver a node starts with, of its peers' streams to
// every peer and of their targeted streams to it alike.
func newIn() *stream.In { return stream.NewIn(stream.Options{}) }

// answerReship answers a MsgReship, a Request about this node's targeted
// stream to the asker (receiveRequest checked the incarnation): the messages Seqs still kept, sent again; for those no longer
// kept, an empty message under their seq (so that the asker stops waiting
// for them) and a reship of everything the handler routes to the asker
// (Reshipper), which holds whatever they held; a reship alone when the
// Request lists no seqs (the asker gave up on a gap).
func (n *Node) answerReship(r *packet.Request) {
	var msgs [][]byte
	gone := len(r.Seqs) == 0
	n.laneMu.Lock()
	for _, s := range r.Seqs {
		if b, ok := n.tout.Get(r.From, s); ok {
			msgs = append(msgs, b)
			continue
		}
		gone = true
		if b, err := packet.Encode(&packet.Packet{From: n.name, Incarnation: n.inc, Seq: s, Targeted: true}); err == nil {
			msgs = append(msgs, b)
		}
	}
	n.laneMu.Unlock()
	for _, b := range msgs {
		if n.sendTo(r.From, b) == nil {
			n.resent.Add(1)
		}
	}
	if !gone {
		return
	}
	if rs, ok := n.h.(Reshipper); ok {
		rs.ReshipTo(r.From)
		n.reshipsMade.Add(1)
	}
}

// tinc returns the incarnation of member name.
func (n *Node) tinc(name string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ps := n.peers[name]; ps != nil {
		return ps.inc
	}
	return 0
}
