package gossip

// The node's background work: the dispatcher (NodeGone in order, resyncs),
// and the beacon and rejoin loops, each a step(now) that a driver calls at
// the ticks of the node's clock and tests call directly.

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/internal/clock"
)

// pushPull exchanges snapshots with the named peers (memberlist's Join of
// a known member is one push/pull with it).
func (n *Node) pushPull(names []string) {
	for _, name := range names {
		n.mu.Lock()
		var addr string
		if ps := n.peers[name]; ps != nil {
			addr = ps.addr
		}
		n.mu.Unlock()
		if addr == "" || n.stopped() {
			continue
		}
		if _, err := n.ml.Join([]string{addr}); err != nil {
			n.log.Debug("gossip: resync failed", "node", name, "addr", addr, "err", err)
			continue
		}
		n.resyncs.Add(1)
		n.log.Debug("gossip: resynced", "node", name, "addr", addr)
	}
}

// dispatch delivers NodeGone events in order, runs resyncs and welcomes
// members new to this node (Welcomer), until Shutdown.
func (n *Node) dispatch() {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case <-n.wake:
		}
		n.mu.Lock()
		evs := n.gone
		n.gone = nil
		rs := n.resync
		n.resync = nil
		ws := n.welcome
		n.welcome = nil
		n.mu.Unlock()
		if len(rs) > 0 {
			n.pushPull(rs)
		}
		if w, ok := n.h.(Welcomer); ok {
			for _, name := range ws {
				if !n.enter() {
					return
				}
				w.Welcome(name)
				n.exit()
			}
		}
		for _, ev := range evs {
			if n.stopped() {
				return
			}
			n.mu.Lock()
			stale := false
			if ps := n.peers[ev.name]; ps != nil && ev.inc != 0 && ps.pktInc > ev.inc {
				stale = true
			}
			n.mu.Unlock()
			if stale {
				n.log.Debug("gossip: departure of an older incarnation ignored", "node", ev.name, "incarnation", ev.inc)
				continue
			}
			if !n.enter() {
				return
			}
			n.h.NodeGone(ev.name)
			n.exit()
		}
	}
}

// every calls step with the instant of each tick of clk, a tick being
// interval() after the previous step returned, until Shutdown; step's
// result (what it did, for tests) is dropped. It runs on its own
// goroutine, counted in n.wg.
func (n *Node) every(clk clock.Clock, interval func() time.Duration, step func(now time.Time) int) {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case now := <-clk.After(interval()):
			step(now)
		}
	}
}

// jitter returns every ±20%, drawn from rng.
func jitter(every time.Duration, rng *rand.Rand) time.Duration {
	return every - every/5 + time.Duration(rng.Int64N(int64(every)*2/5+1))
}

// beaconStep is the beacon loop's step: it sends the beacon (an empty
// packet from this node) to every peer declared dead, not left, within
// goneRetention before now, and returns how many it sent to.
func (n *Node) beaconStep(now time.Time) int {
	b := n.beacon
	if n.stopped() || b == nil {
		return 0
	}
	var to []*memberlist.Node
	n.mu.Lock()
	for name, ps := range n.peers {
		if ps.state != "dead" || ps.leaving || now.Sub(ps.changed) > goneRetention || name == n.name {
			continue
		}
		if m := memberNode(name, ps.addr); m != nil {
			to = append(to, m)
		}
	}
	n.mu.Unlock()
	for _, m := range to {
		if err := n.ml.SendBestEffort(m, b); err != nil {
			n.sendErrors.Add(1)
			continue
		}
		n.packetsOut.Add(1)
		n.bytesOut.Add(uint64(len(b)))
	}
	return len(to)
}

// unheardStep is the beacon loop's second step (with beacons off, it does
// not run): it queues a push/pull (at most
// one per ResyncAfter per member) with every live member this node has
// never heard from although memberlist reported it more than ResyncAfter
// × the heartbeat stretch before now, and returns how many it queued.
//
// Every member that knows of this node sends it a heartbeat at least once
// in that time, so one never heard from most likely does not know of this
// node: memberlist's news of this node's join did not reach it (seen with
// ten agents on a loaded machine, one member still unaware of two joiners
// after 5 s). It then ships its counts to the others only, and this node
// misses them until the news arrives. The push/pull tells it of this node
// (memberlist merges the two lists) and brings its counts here at once.
func (n *Node) unheardStep(now time.Time) int {
	if n.stopped() || n.resyncAfter <= 0 {
		return 0
	}
	after := n.resyncAfter * time.Duration(max(n.stretch.Load(), 1))
	queued := 0
	n.mu.Lock()
	for name, ps := range n.peers {
		if name == n.name || ps.state != "alive" || !ps.lastSync.IsZero() || now.Sub(ps.changed) <= after {
			continue
		}
		if n.queueResyncLocked(name, ps, now) {
			queued++
		}
	}
	n.mu.Unlock()
	n.unheardResyncs.Add(uint64(queued))
	return queued
}

// rejoinStep is the rejoin loop's step: it resolves the seeds and joins
// every resolved address that is not a live member (nor this node), and
// returns how many it joined. What it does depends on the membership and
// the seeds' addresses, not on the instant it runs at.
func (n *Node) rejoinStep(time.Time) int {
	if n.stopped() {
		return 0
	}
	live := map[string]bool{n.addr: true}
	for _, m := range n.liveNodes(nil) {
		live[m.Address()] = true
	}
	var missing []string
	for _, a := range n.resolveSeeds() {
		if !live[a] {
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return 0
	}
	k, err := n.ml.Join(missing)
	if k > 0 {
		n.log.Info("gossip: rejoined", "addresses", missing, "reached", k, "members", n.ml.NumMembers())
	} else {
		n.log.Debug("gossip: rejoin found no peer", "addresses", missing, "err", oneLine(err))
	}
	return k
}

// resolveSeeds returns the seeds as "ip:port", names resolved (each to every
// address), unresolvable ones logged and left out.
func (n *Node) resolveSeeds() []string {
	var out []string
	for _, s := range n.seeds {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			host, port = s, strconv.Itoa(n.port)
		}
		if ip := net.ParseIP(host); ip != nil {
			out = append(out, net.JoinHostPort(ip.String(), port))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		cancel()
		if err != nil {
			n.log.Debug("gossip: seed does not resolve", "seed", s, "err", err)
			continue
		}
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip.IP.String(), port))
		}
	}
	return out
}
