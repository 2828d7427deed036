package reconcile

import (
	"context"
	"time"
)

// tick.go is the loop's step of the cluster model: Run, which calls Step
// on every jittered sync tick and Flush when a key reaches its drift
// threshold (after the flush gap), and the two steps themselves: what a
// tick ships, repeats, sweeps and expires, and what a flush ships at once.
// How the packets are built and sent is in ship.go.

// heartbeatDue reports whether tick s sends the idle heartbeat of the
// node named name: every fourth tick, or, when the sender stretches by
// S > 1, every 4·S-th, on a phase of its own (from its name), so that the
// members of a mesh started together spread their heartbeats over the
// period instead of sending them all in the same tick.
func heartbeatDue(sd Sender, name string, s uint32) bool {
	if s%4 != 0 {
		return false
	}
	stretch := uint32(1)
	if hs, ok := sd.(HeartbeatStretcher); ok {
		stretch = uint32(max(1, hs.HeartbeatStretch()))
	}
	return (s/4+uint32(KeyHash("", name)%uint64(stretch)))%stretch == 0
}

// wake asks the flusher to ship r's urgent keys (all its changed keys when
// global is set) without waiting for the tick.
func (c *Cluster) wake(r *Res, global bool) {
	if global {
		r.globalUrgent.Store(true)
	}
	r.urgentFlag.Store(true)
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Kicked reports whether a key reached its drift threshold since the last
// call (or since Run's flusher last looked), and clears it. A caller that
// drives Step and Flush itself on a virtual clock, in place of Run, calls
// Flush at FlushAt(now) when it reports true, as Run's flusher would.
func (c *Cluster) Kicked() bool {
	select {
	case <-c.kick:
		return true
	default:
		return false
	}
}

// Run ships on every jittered tick and whenever a key reaches its drift
// threshold, until ctx is done. It is the loop around Step and Flush.
func (c *Cluster) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.kick:
				now := c.clock.Now()
				if at := c.FlushAt(now); at.After(now) {
					select { // the gap: thresholds reached meanwhile join this flush
					case <-ctx.Done():
						return
					case <-c.clock.After(at.Sub(now)):
					}
				}
				c.Flush(c.clock.Now())
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			<-done
			return
		case <-c.clock.After(c.jitter()):
			c.Step(c.clock.Now())
		}
	}
}

// jitter returns the interval scaled by a uniform factor in [0.9, 1.1).
func (c *Cluster) jitter() time.Duration {
	c.rmu.Lock()
	f := 0.9 + 0.2*c.rand.Float64()
	c.rmu.Unlock()
	return time.Duration(float64(c.interval) * f)
}

// FlushAt returns when a drift flush asked for at now may run: now, or the
// end of the gap after the last flush (Options.FlushGap).
func (c *Cluster) FlushAt(now time.Time) time.Time {
	last := c.lastFlush.Load()
	gap := c.gap()
	if last == 0 || gap == 0 {
		return now
	}
	if at := time.Unix(0, last).Add(gap); at.After(now) {
		return at
	}
	return now
}

// gap is the flush gap in force: Options.FlushGap, or by default
// DefaultFlushGap capped at a hundredth of the shortest window.
func (c *Cluster) gap() time.Duration {
	if !c.gapAuto {
		return c.flushGap
	}
	if l := c.minLife.Load(); l > 0 {
		return min(c.flushGap, time.Duration(l)*time.Millisecond/100)
	}
	return c.flushGap
}

// Flush ships, at now, the keys that reached their drift threshold.
func (c *Cluster) Flush(now time.Time) {
	c.lastFlush.Store(now.UnixNano())
	ms := now.UnixMilli()
	s := c.tick.Load()
	agg := c.agg.Load()
	mode := shipFlush
	if c.shipsOnce() && (!agg || c.tonce.Load()) {
		mode = shipOnce
	}
	pkt := c.packet()
	up := pkt // where counts go: to every peer, or, in owner mode, to be routed
	if agg {
		up = c.packet()
	}
	for _, r := range c.resources() {
		if !r.urgentFlag.Swap(false) {
			continue
		}
		all := r.globalUrgent.Swap(false)
		if all {
			r.unshipped.Store(0)
		}
		p := r.p.Load()
		for i := range r.shards {
			sh := &r.shards[i]
			sh.mu.Lock()
			if all || len(sh.urgent) > 0 {
				r.flush(sh, p, s, ms, pkt, up, all, mode)
			}
			sh.mu.Unlock()
		}
	}
	if c.send(pkt, false) {
		c.stats.flushes.Add(1)
	}
	if agg {
		c.shipTargets(up, s+1, s, ms, true)
	}
}

// Step is one sync tick at now: it ships every key that changed since the
// last tick (and repeats of recent changes), this node's holds that changed,
// and it forgets what aged out. Run calls it; tests call it directly.
func (c *Cluster) Step(now time.Time) {
	ms := now.UnixMilli()
	if b := c.sender.Load(); b != nil {
		c.live.Store(int64(max(1, b.s.Live())))
	}
	s := c.tick.Add(1)
	housekeeping := s%4 == 0
	rt := c.router()
	agg, moved := c.decideMode(rt, c.n())
	tonce := agg && c.targetsOnce(rt)
	c.tonce.Store(tonce)
	once := c.shipsOnce() && (!agg || tonce)
	mode := shipTick
	if once {
		mode = shipOnce
	}
	if moved { // every live bucket ships again, to its new targets
		for _, r := range c.resources() {
			r.reship(s)
		}
		c.mu.Lock()
		c.tab.track = agg
		c.replace(rt, agg, s)
		var pass []string
		if agg {
			pass = c.tab.newHomes(rt, c.name)
		}
		c.mu.Unlock()
		c.passHeld(rt, pass)
	} else if len(c.passing) > 0 {
		c.passHeld(rt, nil) // the members the sender would not resync with yet
	}
	pkt := c.packet()
	up := pkt
	if agg {
		up = c.packet()
	}
	for _, r := range c.resources() {
		p := r.p.Load()
		r.unshipped.Store(0)
		r.globalUrgent.Store(false)
		for i := range r.shards {
			sh := &r.shards[i]
			sh.mu.Lock()
			if len(sh.dirty) > 0 {
				r.ship(sh, p, s, ms, pkt, up, mode)
			}
			sh.mu.Unlock()
		}
		if housekeeping {
			r.sweep(p, s, ms)
		}
	}
	c.stepGauges(pkt, s, false, once)
	c.mu.Lock()
	c.tab.reask(ms)
	ops, asks := c.ownNames(nil, c.tab.takeAsks(), ms)
	c.unlockApply(ops, ms)
	c.askNames(asks)
	// An idle node still sends an empty packet every fourth tick (every
	// 4 × HeartbeatStretch in a large mesh): peers read a silence as loss
	// and resync (gossip.Config.ResyncAfter). When changes ship once, the
	// first idle tick after a shipment sends one too: its seq shows a peer
	// that lost the last message its gap.
	heartbeat := false
	if b := c.sender.Load(); b != nil {
		heartbeat = heartbeatDue(b.s, c.name, s)
	}
	c.send(pkt, heartbeat || (once && c.sentLast.Load()))
	if agg {
		c.shipTargets(up, s, s, ms, false)
	}
	if housekeeping {
		c.mu.Lock()
		c.tab.sweep(ms, c.grace(), c.life)
		c.resets.sweep(ms, c.grace(), c.resetLife)
		ops, expired := c.tab.expireSilent(ms, c.silence(), nil)
		var conflicts []string
		for name := range c.tab.origins {
			if c.tab.conflicting(name, ms) {
				conflicts = append(conflicts, name)
			}
		}
		c.unlockApply(ops, ms)
		c.named.sweep(ms)
		for _, name := range expired {
			c.stats.silentExpired.Add(1)
			c.log.Warn("peer silent: its holds are dropped", "peer", name, "silence", time.Duration(c.silence())*time.Millisecond)
		}
		for _, name := range conflicts {
			c.stats.nameConflicts.Add(1)
			if last, ok := c.conflictLogged[name]; !ok || ms-last > 60_000 {
				c.conflictLogged[name] = ms
				c.log.Error("two live agents share a node name: their counts and holds cannot be told apart; give each a unique --node-name",
					"node_name", name)
			}
		}
	}
}
