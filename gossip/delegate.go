package gossip

// What memberlist calls: the node's meta, sync messages and push/pull
// states in and out, membership events and name conflicts, and the
// bookkeeping of what the node hears from each peer.

import (
	"net"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/gossip/packet"
)

// maxState caps the push/pull state a node sends: memberlist refuses a
// remote state over 20 MiB (user state plus membership), failing the whole
// exchange, so a larger snapshot is left out (and logged) rather than sent.
const maxState = 16 << 20

// delegate adapts Node to memberlist's delegate interfaces.
type delegate Node

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
)

func (d *delegate) node() *Node { return (*Node)(d) }

// NodeMeta returns the incarnation and the leaving flag.
func (d *delegate) NodeMeta(limit int) []byte {
	n := d.node()
	if n.leaving.Load() {
		return n.metaOff
	}
	return n.metaOn
}

// NotifyMsg hands a sync message to its sender's receive worker, which
// decodes it and calls the handler (receive.go). memberlist calls it on its
// one packet goroutine, and may reuse b once it returns: it copies b and
// never blocks.
func (d *delegate) NotifyMsg(b []byte) { d.node().handoff(b) }

// GetBroadcasts returns nothing: sync goes by direct fan-out.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState returns the handler's snapshot for a push/pull.
func (d *delegate) LocalState(join bool) []byte {
	n := d.node()
	if !n.enter() {
		return nil
	}
	// The snapshot holds every message sent before it is taken: a peer
	// that merges it need not ask for those (numbered only while every
	// peer reads sequenced messages, packet.MsgSeqSync).
	var seq uint64
	if n.Repairs() {
		n.sendMu.Lock()
		seq = n.out.Next()
		n.sendMu.Unlock()
	}
	p := n.h.Snapshot()
	n.exit()
	if p == nil {
		p = &packet.Packet{}
	}
	cp := *p
	cp.From, cp.Incarnation, cp.Full, cp.Seq = n.name, n.inc, true, seq
	switch {
	case !n.HoldsForMesh():
		cp.Held = nil // a peer of an earlier release would refuse the whole state
	case !join:
		cp.Held = n.heldForAntiEntropy(cp.Held)
	}
	if !join || !n.SumsInJoins() {
		// Sums go to a joiner alone: it has counted nothing yet, so no
		// sum can hold its own counts twice (a peer that has counted
		// skips the buckets it did, reconcile), and a peer of an earlier
		// release would refuse the whole state.
		cp.Sums = nil
	}
	b, err := packet.EncodeState(&cp)
	if err != nil {
		n.log.Warn("gossip: snapshot not encoded", "err", err)
		return nil
	}
	if len(b) > maxState && len(cp.Sums) > 0 {
		// The sums first: owners send them again as the joiner uses
		// their keys.
		cp.Sums = nil
		if b, err = packet.EncodeState(&cp); err != nil {
			n.log.Warn("gossip: snapshot not encoded", "err", err)
			return nil
		}
	}
	if len(b) > maxState && len(cp.Held) > 0 {
		// Too large with every origin it holds: the held origins that are
		// not live members first (no one else may still have them), as
		// many as fit, halving; at worst its own counts alone.
		all := len(cp.Held)
		cp.Held = n.goneFirst(cp.Held)
		for len(b) > maxState && len(cp.Held) > 0 {
			cp.Held = cp.Held[:len(cp.Held)/2]
			if b, err = packet.EncodeState(&cp); err != nil {
				n.log.Warn("gossip: snapshot not encoded", "err", err)
				return nil
			}
		}
		n.statesTrimmed.Add(1)
		n.log.Warn("gossip: push/pull state over its limit: some origins it holds left out", "held", all, "sent", len(cp.Held), "bytes", len(b), "limit", maxState)
	}
	if len(b) > maxState {
		n.statesSkipped.Add(1)
		n.log.Warn("gossip: snapshot too large for push/pull, not sent", "bytes", len(b), "limit", maxState)
		return nil
	}
	n.statesOut.Add(1)
	n.bytesOut.Add(uint64(len(b)))
	return b
}

// heldForAntiEntropy returns what a push/pull that is not a join passes
// on of held: the origins that are not live members under the same
// incarnation (gone ones, earlier incarnations of a name). A live origin's
// counts reach every peer from the origin itself, by its messages and its
// own push/pulls; a node that joins gets them all (LocalState with join
// set), so a mesh that does not churn sends no more in its periodic
// push/pulls than before.
func (n *Node) heldForAntiEntropy(held []packet.Held) []packet.Held {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := held[:0:0]
	for _, h := range held {
		if ps := n.peers[h.From]; ps != nil && ps.state == "alive" && ps.inc == h.Incarnation {
			continue
		}
		out = append(out, h)
	}
	return out
}

// goneFirst returns held with the origins that are not live members under
// the same incarnation first.
func (n *Node) goneFirst(held []packet.Held) []packet.Held {
	n.mu.Lock()
	defer n.mu.Unlock()
	live := func(h packet.Held) bool {
		ps := n.peers[h.From]
		return ps != nil && ps.state == "alive" && ps.inc == h.Incarnation
	}
	out := make([]packet.Held, 0, len(held))
	for _, h := range held {
		if !live(h) {
			out = append(out, h)
		}
	}
	for _, h := range held {
		if live(h) {
			out = append(out, h)
		}
	}
	return out
}

// MergeRemoteState decodes a peer's push/pull state and hands it to the
// handler with Full set; a sum (which no node sends as its state) is
// dropped.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	n := d.node()
	if len(buf) == 0 {
		return
	}
	n.statesIn.Add(1)
	n.bytesIn.Add(uint64(len(buf)))
	p := n.decodeState(buf)
	if p == nil || !n.fromMember(p, "state") {
		return
	}
	if p.Sum { // meant for one receiver, never a state: Full would make it one
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped state holding a sum", "from", p.From)
		return
	}
	if !n.enter() {
		return
	}
	defer n.exit()
	p.Full, p.Join = true, join
	n.received(p, len(buf))
	n.covered(p)
	n.h.HandlePacket(p)
}

// NotifyJoin records a member that became alive (self included) and logs
// it: "peer joined" for a member new to this node, "peer back" for one
// alive again after it was dead or had left (a healed partition, a false
// death, a restart), "peer rejoined at a new address" when it came back
// elsewhere (a rescheduled pod). A member back is resynced with a
// push/pull: what it and this node did meanwhile was shipped to no one.
func (d *delegate) NotifyJoin(node *memberlist.Node) {
	n := d.node()
	n.mu.Lock()
	var was, oldAddr string
	var oldInc uint64
	if ps := n.peers[node.Name]; ps != nil {
		was, oldAddr, oldInc = ps.state, ps.addr, ps.inc
	}
	n.mu.Unlock()
	back := (was == "dead" || was == "left") && node.Name != n.name
	n.member(node, "alive")
	if node.Name == n.name {
		return
	}
	inc, _, _ := decodeMeta(node.Meta)
	switch {
	case !back:
		n.log.Info("gossip: peer joined", "node", node.Name, "addr", node.Address(), "incarnation", inc)
	case oldAddr != node.Address():
		n.log.Info("gossip: peer rejoined at a new address", "node", node.Name, "addr", node.Address(),
			"old_addr", oldAddr, "was", was, "restarted", inc != oldInc, "incarnation", inc)
	default:
		n.log.Info("gossip: peer back", "node", node.Name, "addr", node.Address(), "was", was,
			"restarted", inc != oldInc, "incarnation", inc)
	}
	n.mu.Lock()
	if back {
		// Whatever push/pull was asked of it lately went to a member
		// still listed dead, whose state was refused (fromMember): ask
		// again now that it is alive, past the rate limit.
		ps := n.peer(node.Name)
		ps.resynced = time.Time{}
		n.queueResyncLocked(node.Name, ps, n.clk.Now())
	} else if was == "" && !slices.Contains(n.welcome, node.Name) {
		n.welcome = append(n.welcome, node.Name)
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
	n.mu.Unlock()
}

// NotifyUpdate records a member's new meta (its incarnation, its leaving
// flag) and logs it.
func (d *delegate) NotifyUpdate(node *memberlist.Node) {
	n := d.node()
	n.member(node, "")
	if node.Name == n.name {
		return
	}
	inc, leaving, _ := decodeMeta(node.Meta)
	n.log.Info("gossip: peer updated", "node", node.Name, "addr", node.Address(), "incarnation", inc, "leaving", leaving)
}

// NotifyLeave records a departure, logs it ("peer left" for a graceful
// leave, "peer declared dead" when it failed: stopped answering probes)
// and queues NodeGone. memberlist calls it with its member lock held, so
// it only queues.
func (d *delegate) NotifyLeave(node *memberlist.Node) {
	n := d.node()
	state := "dead"
	inc, leaving, _ := decodeMeta(node.Meta)
	if leaving {
		state = "left"
	}
	n.mu.Lock()
	ps := n.peers[node.Name]
	if ps != nil && ps.leaving {
		state = "left"
	}
	n.mu.Unlock()
	n.member(node, state)
	if node.Name == n.name {
		return
	}
	if state == "left" {
		n.log.Info("gossip: peer left", "node", node.Name, "addr", node.Address(), "incarnation", inc)
	} else {
		n.log.Warn("gossip: peer declared dead", "node", node.Name, "addr", node.Address(), "incarnation", inc)
	}
	n.forget(node.Name)
	n.mu.Lock()
	n.gone = append(n.gone, goneEvent{name: node.Name, inc: inc})
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// NotifyConflict logs a node at another address claiming a member's name;
// memberlist keeps the member it knows and ignores the other. Names must be
// unique in a mesh; a restarted node is let back at a new address once its
// old self has been dead for DeadNodeReclaimTime (1 s), so a conflict that
// does not pass is two nodes sharing a name.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	n := d.node()
	n.log.Warn("gossip: node name conflict: a node at another address claims a member's name; names must be unique in a mesh",
		"node", existing.Name, "addr", existing.Address(), "other_addr", other.Address())
	if existing.Name != n.name || n.onConflict == nil {
		return
	}
	// Both nodes of a conflict hear of it; the newer one (higher
	// incarnation, a later start) is the one that took a name in use. A
	// node restarted at a new address (a rescheduled pod) hears of its own
	// old self until memberlist declares it dead: that is no conflict, and
	// the old self no longer answers. So the other is reported only if its
	// address answers (memberlist's TCP port), checked off memberlist's
	// goroutine.
	inc, _, ok := decodeMeta(other.Meta)
	if !ok || inc >= n.inc {
		return
	}
	addr := other.Address()
	go func() {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			n.log.Info("gossip: the other node under this name does not answer: taken for this node's former self", "node", n.name, "other_addr", addr)
			return
		}
		c.Close()
		n.onConflict(inc)
	}()
}

// liveNodes appends to buf the members memberlist lists alive (or
// suspect), but this node, as this node's own copies (peerState.node), and
// returns it.
func (n *Node) liveNodes(buf []*memberlist.Node) []*memberlist.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, ps := range n.peers {
		if name != n.name && ps.state == "alive" && ps.node != nil {
			buf = append(buf, ps.node)
		}
	}
	return buf
}

// member records what memberlist reports about node; state "" keeps the
// current state. A member that became live or went bumps the membership
// epoch. It also forgets members gone for longer than goneRetention.
func (n *Node) member(node *memberlist.Node, state string) {
	now := n.clk.Now()
	inc, leaving, ok := decodeMeta(node.Meta)
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := n.peer(node.Name)
	ps.addr = node.Address()
	if ps.node == nil || ps.node.Port != node.Port || !ps.node.Addr.Equal(node.Addr) {
		ps.node = &memberlist.Node{Name: node.Name, Addr: slices.Clone(node.Addr), Port: node.Port}
	}
	ps.protoMax = node.DMax
	if ok {
		ps.inc = inc
		ps.leaving = leaving
	}
	if state != "" && state != ps.state {
		if (state == "alive") != (ps.state == "alive") {
			n.epoch.Add(1) // the live set changed: the ring is stale (route.go)
			n.kickPlacer()
		}
		ps.state = state
		ps.changed = now
	}
	if state == "alive" && !leaving {
		ps.leaving = false
	}
	for name, q := range n.peers {
		gone := (q.state == "dead" || q.state == "left") && now.Sub(q.changed) > goneRetention
		stray := q.state == "" && now.Sub(q.lastSync) > goneRetention // sent packets, never a member
		if gone || stray {
			delete(n.peers, name)
		}
	}
	n.recount()
}

// received records a packet or state of size bytes from p.From.
func (n *Node) received(p *packet.Packet, size int) {
	now := n.clk.Now()
	n.mu.Lock()
	ps := n.peer(p.From)
	silent := !ps.lastSync.IsZero() && now.Sub(ps.lastSync) > n.resyncAfter*time.Duration(n.stretch.Load())
	if n.resyncAfter > 0 && silent { // (a dead peer speaking: fromMember)
		n.queueResyncLocked(p.From, ps, now)
	}
	ps.lastSync = now
	ps.in += uint64(size)
	ps.pktInc = max(ps.pktInc, p.Incarnation)
	n.mu.Unlock()
}

// queueResyncLocked asks the dispatcher for a push/pull with peer name, at
// most once per ResyncAfter (the caller holds mu), and reports whether it
// did.
func (n *Node) queueResyncLocked(name string, ps *peerState, now time.Time) bool {
	if n.resyncAfter <= 0 || now.Sub(ps.resynced) < n.resyncAfter {
		return false
	}
	ps.resynced = now
	n.resync = append(n.resync, name)
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return true
}
