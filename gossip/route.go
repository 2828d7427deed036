package gossip

// Owner placement and targeted sends (reconcile.Router): whether every
// live member takes part in owner mode (Aggregates), the consistent-hash
// ring of the live members that places each key hash on an owner and a
// successor (Owners, Epoch), and sends to one member (SendTo).

import (
	"errors"
	"fmt"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/ring"
)

// ownerProtocol is memberlist's delegate protocol max of a node that reads
// sum messages (packet.Packet.Sum) and places keys on the ring of the live
// members (gossip/ring).
const ownerProtocol = 2

// targetedProtocol is memberlist's delegate protocol max of a node that
// also numbers its messages to one member (packet.Packet.Targeted) and
// answers reship requests (packet.Request.Reship).
const targetedProtocol = 3

// Reshipper is implemented by a Handler that can send again everything it
// routes to one member (reconcile.Cluster): the member asked for messages
// of this node's targeted stream to it that are no longer kept, or gave up
// on a gap. It sends with SendTo. Must not block for long.
type Reshipper interface {
	ReshipTo(to string)
}

// Welcomer is implemented by a Handler that sends a member new to this
// node what it shipped to its peers just before it knew of the member
// (reconcile.Cluster.Welcome): the joiner's push/pull with its seed
// carries the mesh's counts as the seed knew them, and what other nodes
// shipped while the join spread reaches the joiner this way. It is
// called once per member that joins (not one that is back: that one is
// resynced with a push/pull), on a goroutine of this package, and may
// call SendTo. Must not block for long.
type Welcomer interface {
	Welcome(name string)
}

// Reships reports whether the node numbers its messages to one member
// (SendTo) and keeps them, so that the member asks for one it finds
// missing (or, when it is no longer kept, for a reship):
// while it numbers its stream to every peer (Repairs) and every live
// member, self included, reads targeted messages (memberlist's delegate
// protocol max of 3 or more), unless Config.NoOwners. A change can then
// go to its owner once (reconcile.TargetedRepairer). Cheap: the answer is
// kept up to date by membership events.
func (n *Node) Reships() bool { return !n.noOwners && n.Repairs() && n.allTargeted.Load() }

// ErrRecipient is wrapped by the SendTo error for a recipient that is not
// a live member, or is this node.
var ErrRecipient = errors.New("gossip: invalid recipient")

// placement is a ring of the live members and the membership epoch it was
// built at. Immutable.
type placement struct {
	epoch uint64
	ring  *ring.Ring
}

// Aggregates reports whether every live member, self included, takes part
// in owner mode (memberlist's delegate protocol max of 2 or more: it reads
// sums and places keys on the same ring), unless Config.NoOwners. Cheap:
// the answer is kept up to date by membership events, like Repairs'.
func (n *Node) Aggregates() bool { return !n.noOwners && n.allOwners.Load() }

// Owners returns the owner of key hash h and its successor on the ring
// of the live (alive or suspect) members, self included: "" when there
// are fewer. Every node that sees the same members places every key
// alike. The ring is rebuilt in the background when the live set changes
// (8 ms at 1,000 members): until it is, Owners places keys on the previous
// one, so a caller holding a lock never waits for a rebuild (only the very
// first call builds the first ring).
func (n *Node) Owners(h uint64) (owner, successor string) {
	return n.placement().ring.Owners(h)
}

// Epoch returns the membership epoch of the ring Owners places keys on:
// it changes whenever a member joins or goes, once the ring has been
// rebuilt. What Owners returns after Epoch returned e is placed by a ring
// of epoch e or later, so placements remembered under e are current while
// Epoch still returns e.
func (n *Node) Epoch() uint64 { return n.placement().epoch }

// Members returns the live members of the ring Owners places keys on,
// self included, sorted (the ring's own slice: not to be modified).
func (n *Node) Members() []string { return n.placement().ring.Names() }

// placement returns the latest ring built: when the live set changed
// since, it wakes the placer and returns the previous one; only the first
// ring is built by the caller (nothing to use meanwhile).
func (n *Node) placement() *placement {
	p := n.place.Load()
	if p != nil && p.epoch == n.epoch.Load() {
		return p
	}
	if p == nil {
		return n.rebuild()
	}
	n.kickPlacer()
	return p
}

// kickPlacer wakes the placer without waiting.
func (n *Node) kickPlacer() {
	select {
	case n.placeKick <- struct{}{}:
	default:
	}
}

// placer rebuilds the ring whenever kicked, until Shutdown.
func (n *Node) placer() {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case <-n.placeKick:
			n.rebuild()
		}
	}
}

// rebuild builds the ring of the live members unless the latest one is
// current, and returns the current one.
func (n *Node) rebuild() *placement {
	n.placeMu.Lock()
	defer n.placeMu.Unlock()
	n.mu.Lock()
	epoch := n.epoch.Load() // bumped under mu
	if p := n.place.Load(); p != nil && p.epoch == epoch {
		n.mu.Unlock()
		return p
	}
	live := make([]string, 0, len(n.peers))
	for name, ps := range n.peers {
		if ps.state == "alive" {
			live = append(live, name)
		}
	}
	n.mu.Unlock()
	p := &placement{epoch: epoch, ring: ring.New(live)}
	n.place.Store(p) // only under placeMu: epochs stored only grow
	return p
}

// SendTo sends p to the live member named to alone, best effort over UDP:
// split into messages of at most Budget bytes, with From and Incarnation
// set to this node's, numbered in its stream to that member while Reships
// (a targeted message), unnumbered otherwise (p is not modified). It returns
// ErrShutdown after Shutdown, an error wrapping ErrRecipient when to is
// this node or not a live member, packet.ErrTooLarge or packet.ErrInvalid
// from packet.Split, or every send failure joined (each also counted in
// Stats.SendErrors). The messages sent are counted in Stats.Targeted (and
// PacketsOut).
func (n *Node) SendTo(to string, p *packet.Packet) error {
	if p == nil {
		return fmt.Errorf("%w: nil packet", packet.ErrInvalid)
	}
	if n.stopped() {
		return ErrShutdown
	}
	if to == n.name {
		return fmt.Errorf("%w: %q is this node", ErrRecipient, to)
	}
	n.mu.Lock()
	state := "unknown"
	if ps := n.peers[to]; ps != nil && ps.state != "" {
		state = ps.state
	}
	n.mu.Unlock()
	if state != "alive" {
		return fmt.Errorf("%w: %q is not a live member (%s)", ErrRecipient, to, state)
	}
	cp := *p
	cp.From, cp.Incarnation, cp.Seq, cp.Targeted = n.name, n.inc, 0, false
	var msgs [][]byte
	var err error
	if n.Reships() {
		// Numbered and kept under laneMu, so that messages to one member
		// leave in the order of their seqs.
		n.laneMu.Lock()
		defer n.laneMu.Unlock()
		cp.Targeted, cp.Seq = true, n.tout.Next(to)
		if msgs, err = packet.Split(&cp, n.budget); err == nil {
			n.tout.Sent(to, msgs)
		}
	} else {
		msgs, err = packet.Split(&cp, n.budget)
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range msgs {
		if err := n.sendTo(to, b); err != nil {
			errs = append(errs, err)
			continue
		}
		n.targeted.Add(1)
	}
	return errors.Join(errs...)
}

// Resync asks for a push/pull with the live member name, on the
// dispatcher's goroutine, at most once per ResyncAfter per member
// (reconcile.Resyncer): the states carry the counts each side holds for
// gone origins to the other. It reports whether the push/pull was asked
// for: false when name is this node or not a live member, or when one was
// asked of it within ResyncAfter (ask again later). Safe for concurrent
// use; it does not block.
func (n *Node) Resync(name string) bool {
	if name == n.name {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if ps := n.peers[name]; ps != nil && ps.state == "alive" {
		return n.queueResyncLocked(name, ps, n.clk.Now())
	}
	return false
}

// ResyncNow exchanges states with each of the live members names (a
// push/pull each, in turn; not rate limited) and returns when done:
// what a node that stops uses to pass on the counts it holds for gone
// origins (reconcile.Cluster.Handover).
func (n *Node) ResyncNow(names []string) {
	live := make([]string, 0, len(names))
	n.mu.Lock()
	for _, name := range names {
		if ps := n.peers[name]; name != n.name && ps != nil && ps.state == "alive" {
			live = append(live, name)
		}
	}
	n.mu.Unlock()
	n.pushPull(live)
}
