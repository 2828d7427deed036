package reconcile

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
)

// cluster.go is one job, this node's side of the cluster model: the
// Cluster, its loop (Run: ticks and drift flushes), what it ships (Step,
// Flush, Snapshot) and how it merges what its peers send (HandlePacket,
// NodeGone), with the two seams it runs on, Applier (the engine) and
// Sender (gossip).

// Applier is the engine as reconcile changes it: the growth of peers' counts
// and their holds. Implemented by *local.Engine. Methods are safe for
// concurrent use, take the instant now (Unix ms), never block on the network
// and ignore keys of resources they do not know.
type Applier interface {
	// ApplyCount adds n of a peer's hits (or gcra spends, refunds) of
	// resource/domain in slot, made in the bucket [at, at+width).
	ApplyCount(resource, domain string, slot int, at, width, n, now int64)
	// ApplyEntry says a peer entered tier slot of resource/domain at at.
	ApplyEntry(resource, domain string, slot int, at, now int64)
	// AddRemoteHolds changes the copies peers hold for resource/domain by n.
	AddRemoteHolds(resource, domain string, n int64)
	// EachHold calls fn for every resource/domain this node holds copies of.
	EachHold(fn func(resource, domain string, holds int64))
}

// Sender ships packets to peers: gossip.Node. Send must not block for long.
type Sender interface {
	Send(p *packet.Packet) error
	Live() int
}

// Repairer is implemented by a Sender whose peers may all repair a lost
// message by asking for it again (gossip.Node over sequenced streams).
// While Repairs reports true, a change ships once: no resends, the key's
// name only when no shipment carried it lately (see NameTTL), and an
// empty packet on the first idle
// tick after a shipment, so that a peer that lost the last message of a
// burst sees the gap. Otherwise changes follow the resend schedule.
type Repairer interface {
	Repairs() bool
}

// HeartbeatStretcher is implemented by a Sender whose peers read a longer
// silence as normal in a large mesh (gossip.Node): an idle node sends its
// heartbeat (an empty packet to every peer) every 4 × HeartbeatStretch()
// ticks instead of every fourth, so that what an idle mesh sends per node
// does not grow with its size. A Sender without it: every fourth tick.
type HeartbeatStretcher interface {
	HeartbeatStretch() int
}

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

// Options configure a Cluster. The zero value of each field is a usable
// default except Name.
type Options struct {
	// Name is this node's name in the mesh. Required.
	Name string
	// Incarnation identifies this run of the node (0 = the clock's now, ns).
	Incarnation uint64
	// SyncInterval is the tick between shipments; 0 = 250ms. Each tick is
	// jittered by ±10% so that nodes do not ship in lockstep.
	SyncInterval time.Duration
	// TickOnly ships only on the tick, never at the drift threshold: the
	// baseline of counters synced on a timer, for benchmarks.
	TickOnly bool
	// FlushGap is the least time between two drift flushes: keys that
	// reach their threshold sooner after a flush are shipped together at
	// the end of the gap, in one flush. 0 = DefaultFlushGap, shortened to
	// a hundredth of the shortest window of any resource (so that the
	// hits a gap holds back are at most 1% of a limit); negative = none
	// (every threshold reached is a flush at once); a positive value is
	// used as is.
	FlushGap time.Duration
	// OwnerFrom is the least number of live members at which the node
	// runs in owner mode, when its Sender is a Router whose every member
	// takes part (owner.go): 0 = DefaultOwnerFrom (100), negative =
	// never, 1 or more = from that many members. Once
	// in owner mode it stays there until the live count falls an eighth
	// under OwnerFrom (at least one member).
	OwnerFrom int
	// Clock is the time source of Run and of merges; nil = the real clock.
	Clock clock.Clock
	// Rand jitters the tick; nil = a randomly seeded source.
	Rand *rand.Rand
	// Logger gets one line per send error burst; nil = discard.
	Logger *slog.Logger
	// OnNameConflict is called (at most once a minute) when a packet claims
	// this node's own name with another incarnation: another live agent
	// uses the same node name. It must not block. nil: the conflict is only
	// logged and counted.
	OnNameConflict func(otherIncarnation uint64)
}

// DefaultFlushGap is Options.FlushGap's default. When every hit reaches the
// drift threshold (N > drift·limit, where the threshold is one hit), a
// busy key, or many sparse ones, would otherwise be a datagram to every
// peer per hit, most of its bytes the datagram's own overhead; with the
// gap a node sends at most 100 flushes a second, and the hits it admits
// during one gap reach peers up to a gap later (see docs/cluster.md's
// bound). It is shortened to a hundredth of the shortest window of any
// resource.
const DefaultFlushGap = 10 * time.Millisecond

// Cluster is this node's side of the cluster model: its own hits to ship
// and what its peers told it. Safe for concurrent use.
type Cluster struct {
	name     string
	inc      uint64
	started  int64       // ms: when New ran (joinFloors)
	floored  atomic.Bool // a state's TATs were taken as floors (joinFloors)
	interval time.Duration
	tickOnly bool
	clock    clock.Clock
	log      *slog.Logger
	// conflictLogged is when a name conflict was last logged, per name (ms;
	// Step's alone).
	conflictLogged map[string]int64
	onConflict     func(uint64)
	selfConflictAt atomic.Int64 // ms: when a packet last claimed this node's name (rate limit)

	rmu  sync.Mutex
	rand *rand.Rand

	resMu sync.RWMutex
	res   map[string]*Res

	applier atomic.Pointer[applierBox]
	side    atomic.Pointer[sideBox]
	sender  atomic.Pointer[senderBox]
	live    atomic.Int64

	ownerFrom int
	agg       atomic.Bool       // owner mode, as of the last Step
	tonce     atomic.Bool       // owner mode's targeted messages ship once (targetsOnce), as of the last Step
	sentTo    map[string]uint32 // members sent targeted counts or sums: the tick of the last (c.mu; followUps)
	epoch     uint64            // the Router's epoch at the last Step (Step's alone)
	relayKick bool              // a relay became urgent (c.mu)

	kick      chan struct{}
	gapAuto   bool         // flushGap is the default, capped by minLife
	minLife   atomic.Int64 // ms: the shortest window of any resource (0: none)
	sentLast  atomic.Bool  // the last Step or Flush sent entries
	named     nameMemory   // the names this node shipped lately
	flushGap  time.Duration
	lastFlush atomic.Int64  // Unix ns of the last Flush (0: none yet)
	tick      atomic.Uint32 // Steps taken: the schedule of resends counts in ticks

	mu  sync.Mutex // the remote table
	tab *table

	gmu     sync.Mutex // own gauges (Step only, and Snapshot)
	gauges  map[uint64]*ownGauge
	gver    uint64
	scratch map[uint64]int64

	stats statsCounters
}

type applierBox struct{ a Applier }
type sideBox struct {
	prefix string
	a      Applier
}
type senderBox struct{ s Sender }

type ownGauge struct {
	resource, domain string
	value            int64
	version          uint64
	changed          uint32 // the tick it changed before
	names            int8
}

// New returns a cluster for this node.
func New(o Options) *Cluster {
	c := &Cluster{
		name: o.Name, inc: o.Incarnation, interval: o.SyncInterval, tickOnly: o.TickOnly, flushGap: o.FlushGap, ownerFrom: o.OwnerFrom,
		clock: o.Clock, rand: o.Rand, log: o.Logger, conflictLogged: make(map[string]int64), onConflict: o.OnNameConflict,
		res:    make(map[string]*Res),
		kick:   make(chan struct{}, 1),
		tab:    newTable(o.Name),
		gauges: make(map[uint64]*ownGauge),
	}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	if c.inc == 0 {
		c.inc = uint64(c.clock.Now().UnixNano())
	}
	if c.interval <= 0 {
		c.interval = 250 * time.Millisecond
	}
	if c.ownerFrom == 0 {
		c.ownerFrom = DefaultOwnerFrom
	}
	switch {
	case c.flushGap == 0:
		c.flushGap, c.gapAuto = DefaultFlushGap, true
	case c.flushGap < 0:
		c.flushGap = 0
	}
	if c.rand == nil {
		c.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.tab.selfInc = c.inc
	c.started = c.clock.Now().UnixMilli()
	c.live.Store(1)
	return c
}

// Name returns this node's name.
func (c *Cluster) Name() string { return c.name }

// Incarnation returns this run's incarnation.
func (c *Cluster) Incarnation() uint64 { return c.inc }

// SyncInterval returns the tick between shipments.
func (c *Cluster) SyncInterval() time.Duration { return c.interval }

// Recorder returns the handle of resource name, configured as rc (its
// params are replaced when a reload calls it again): a *Res, stable for
// the cluster's life (local.Cluster).
func (c *Cluster) Recorder(name string, rc *config.Resource) local.Recorder {
	p := paramsOf(rc)
	c.resMu.Lock()
	defer c.resMu.Unlock()
	r, ok := c.res[name]
	if !ok {
		r = &Res{c: c, name: name}
		c.res[name] = r
	}
	r.p.Store(p)
	var least int64
	for _, x := range c.res {
		for _, l := range x.p.Load().life {
			if l > 0 && (least == 0 || l < least) {
				least = l
			}
		}
	}
	c.minLife.Store(least)
	return r
}

// SetApplier sets the engine peers' counts are applied to (a reload sets the
// new engine).
func (c *Cluster) SetApplier(a Applier) { c.applier.Store(&applierBox{a}) }

// SetSideApplier makes a the applier of every resource whose name starts
// with prefix and has no '/' (so that no configured resource, always
// NAMESPACE/NAME, is one: the Envoy rate limit service's counters,
// "rls:..."), beside the engine's; an engine reload does not replace it.
func (c *Cluster) SetSideApplier(prefix string, a Applier) {
	c.side.Store(&sideBox{prefix, a})
}

// SetEngine is SetApplier(e): local.Engine.Attach calls it (local.Cluster).
func (c *Cluster) SetEngine(e *local.Engine) { c.SetApplier(e) }

var (
	_ local.Cluster = (*Cluster)(nil)
	_ Applier       = (*local.Engine)(nil)
)

// SetSender sets what ships packets; until it is set nothing is shipped.
func (c *Cluster) SetSender(s Sender) { c.sender.Store(&senderBox{s}) }

func (c *Cluster) n() int { return int(c.live.Load()) }

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

func (c *Cluster) resources() []*Res {
	c.resMu.RLock()
	defer c.resMu.RUnlock()
	out := make([]*Res, 0, len(c.res))
	for _, r := range c.res {
		out = append(out, r)
	}
	return out
}

func (c *Cluster) packet() *packet.Packet {
	return &packet.Packet{From: c.name, Incarnation: c.inc}
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

// shipsOnce reports whether the sender's peers all repair loss
// (Repairer).
func (c *Cluster) shipsOnce() bool {
	b := c.sender.Load()
	if b == nil {
		return false
	}
	r, ok := b.s.(Repairer)
	return ok && r.Repairs()
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

// shipTargets routes the counts of up to their keys' owners and
// successors and adds the relays due (at tick s, or of urgent keys in a
// flush), and sends them (owner mode).
func (c *Cluster) shipTargets(up *packet.Packet, next, s uint32, now int64, flush bool) {
	rt := c.router()
	if rt == nil {
		return
	}
	ts := targets{}
	c.route(rt, up, ts, next, now)
	c.mu.Lock()
	c.relay(rt, ts, s, now, flush)
	c.relayKick = false
	c.followUps(ts, s, flush)
	c.mu.Unlock()
	c.sendTargets(rt, ts)
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
		c.passHeld(pass)
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
	c.mu.Unlock()
	c.apply(ops, ms)
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
		ops, expired := c.tab.expireSilent(ms, c.silence(), nil)
		var conflicts []string
		for name := range c.tab.origins {
			if c.tab.conflicting(name, ms) {
				conflicts = append(conflicts, name)
			}
		}
		c.mu.Unlock()
		c.named.sweep(ms)
		c.apply(ops, ms)
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

// silence is how long, ms, a peer may send nothing before its holds are
// dropped: a live peer sends at least every fourth tick, so 20 ticks of
// silence (and at least 10 s) is a peer that is gone, whatever memberlist
// still says. Housekeeping runs every fourth tick, so the holds go within
// silence plus 4 ticks.
func (c *Cluster) silence() int64 {
	return max(20*int64(c.interval/time.Millisecond), 10_000)
}

// width returns the bucket size of resource's slot (1 ms when unknown).
func (c *Cluster) width(resource string, slot int) int64 {
	c.resMu.RLock()
	r, ok := c.res[resource]
	c.resMu.RUnlock()
	if !ok {
		return 1
	}
	p := r.p.Load()
	if slot < 0 || slot >= len(p.bucket) {
		return 1
	}
	return p.bucket[slot]
}

// grace is how long, ms, a bucket is kept past its lifetime: a late
// duplicate finds it and is not applied twice. A count of a bucket older
// than its lifetime plus grace is not applied at all (apply): its bucket
// may have been forgotten, and applying it again would count it twice.
func (c *Cluster) grace() int64 { return 2*int64(c.interval/time.Millisecond) + 1000 }

// life reports how long a slot's buckets (or entries) of resource matter.
func (c *Cluster) life(resource string, slot uint32, mark bool) (int64, bool) {
	c.resMu.RLock()
	r, ok := c.res[resource]
	c.resMu.RUnlock()
	if !ok {
		return 0, false
	}
	p := r.p.Load()
	l := p.life
	if mark {
		l = p.mark
	}
	if int(slot) >= len(l) {
		return 0, false
	}
	return l[slot], true
}

// stepGauges reads this node's holds at tick s and appends to pkt the ones
// due (every nonzero one every eighth tick, and all of them with a
// watermark when all is set, for a snapshot; a change once when once is
// set, else on the resend schedule). A gauge that fell to zero is
// forgotten once its shipments are over.
func (c *Cluster) stepGauges(pkt *packet.Packet, s uint32, all, once bool) {
	b := c.applier.Load()
	if b == nil {
		return
	}
	c.gmu.Lock()
	defer c.gmu.Unlock()
	if c.scratch == nil {
		c.scratch = make(map[uint64]int64)
	}
	cur := c.scratch
	clear(cur)
	b.a.EachHold(func(resource, domain string, holds int64) {
		h := KeyHash(resource, domain)
		if g, ok := c.gauges[h]; !ok {
			c.gauges[h] = &ownGauge{resource: resource, domain: domain, names: resends}
		} else if g.resource != resource || g.domain != domain {
			return // a hash collision: keep the first
		}
		cur[h] += holds
	})
	refresh := s%8 == 0
	for h, g := range c.gauges {
		if v := cur[h]; v != g.value || g.version == 0 {
			c.gver++
			g.value, g.version, g.changed = v, c.gver, s
		}
		changed := g.changed == s
		if all || (once && changed) || (!once && due(s, g.changed)) || (refresh && g.value != 0) {
			pkt.Gauges = append(pkt.Gauges, packet.Gauge{Hash: h, Value: g.value, Version: g.version})
			if g.names > 0 || all || (!once && int32(s-g.changed) > 2) || refresh {
				pkt.Names = append(pkt.Names, packet.Name{Hash: h, Resource: g.resource, Domain: g.domain})
				switch {
				case all:
				case once:
					g.names = 0
				case g.names > 0:
					g.names--
				}
			}
		}
		if g.value == 0 && (once || !pending(s, g.changed)) {
			delete(c.gauges, h)
		}
	}
	if all {
		c.gver++
		pkt.Gauges = append(pkt.Gauges, packet.Gauge{Hash: 0, Version: c.gver})
	}
}

// send ships pkt to every live peer, when it holds anything or heartbeat
// is set.
func (c *Cluster) send(pkt *packet.Packet, heartbeat bool) bool {
	if len(pkt.Counts) == 0 && len(pkt.Marks) == 0 && len(pkt.Gauges) == 0 && !heartbeat {
		return false
	}
	b := c.sender.Load()
	if b == nil {
		return false
	}
	c.sentLast.Store(len(pkt.Counts) > 0 || len(pkt.Marks) > 0 || len(pkt.Gauges) > 0)
	if err := b.s.Send(pkt); err != nil {
		if c.stats.sendErrors.Add(1) == 1 {
			c.log.Warn("gossip send failed", "err", err)
		}
		return false
	}
	c.stats.packetsSent.Add(1)
	return true
}

// HandlePacket merges a peer's packet (gossip.Handler). It never blocks on
// the network: the engine applies the growth in memory.
func (c *Cluster) HandlePacket(p *packet.Packet) {
	now := c.clock.Now().UnixMilli()
	if p.From == c.name && p.Incarnation != c.inc {
		c.stats.nameConflicts.Add(1)
		if last := c.selfConflictAt.Load(); (last == 0 || now-last > 60_000) && c.selfConflictAt.CompareAndSwap(last, now) {
			c.log.Error("another live agent uses this node's name: counts and holds of the two cannot be told apart; give each agent a unique --node-name",
				"node_name", c.name, "incarnation", c.inc, "other_incarnation", p.Incarnation)
			if c.onConflict != nil {
				c.onConflict(p.Incarnation)
			}
		}
		return
	}
	buf := opBufs.Get().(*[]op)
	defer func() {
		if cap(*buf) > maxPooledOps {
			return // a snapshot's: let it go
		}
		clear(*buf) // drop the names they point to
		*buf = (*buf)[:0]
		opBufs.Put(buf)
	}()
	c.mu.Lock()
	var ops []op
	ok := true
	ops = (*buf)[:0]
	var tats []packet.Mark
	if p.Full && !p.Sum {
		tats = takeTATs(p)
		if !p.Join || now-c.started > joinFloors.Milliseconds() || !c.floored.CompareAndSwap(false, true) {
			tats = nil // not this node's join: see joinFloors
		}
	}
	held := p.Full && len(p.Held) > 0 && !p.Sum
	if held { // every entry of the state before any count (mergeHeld)
		ops, _ = c.tab.mergeHeld(p.Names, p.Held, true, now, ops)
	}
	if p.Sum {
		ops = c.tab.mergeSum(p, now, ops)
	} else {
		ops, ok = c.tab.merge(p, now, ops)
	}
	if held {
		var grew int
		ops, grew = c.tab.mergeHeld(nil, p.Held, false, now, ops)
		c.stats.heldStates.Add(1)
		c.stats.heldGrew.Add(uint64(grew))
	}
	ops = c.tab.floors(tats, ops)
	if len(c.tab.grew) > 0 {
		next := c.tick.Load() + 1
		for _, g := range c.tab.grew {
			c.noteGrowth(g.h, g.o, g.slot, g.bucket, int64(g.d), next, now)
		}
		clear(c.tab.grew)
		c.tab.grew = c.tab.grew[:0]
	}
	kick := c.relayKick
	c.relayKick = false
	asks := c.tab.takeAsks()
	ops, asks = c.ownNames(ops, asks, now)
	*buf = ops
	c.mu.Unlock()
	if kick {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	c.askNames(asks)
	if ok && len(p.Names) > 0 {
		c.named.heard(p.Names, now)
	}
	if !ok {
		c.stats.stale.Add(1)
		return
	}
	c.stats.packetsMerged.Add(1)
	if p.Sum {
		c.stats.sumsMerged.Add(1)
	}
	if !p.Full && len(p.Counts) > 0 {
		newest := p.Counts[0].Bucket
		for _, cn := range p.Counts[1:] {
			newest = max(newest, cn.Bucket)
		}
		c.stats.lag.observe(now - newest)
	}
	c.apply(ops, now)
}

// opBufs holds the op buffers HandlePacket merges into, so that a stream
// of packets allocates none once the buffers have grown; one grown past
// maxPooledOps (by a push/pull snapshot) is not kept.
var opBufs = sync.Pool{New: func() any { return new([]op) }}

const maxPooledOps = 4096

func (c *Cluster) apply(ops []op, now int64) {
	b := c.applier.Load()
	if b == nil {
		return
	}
	side := c.side.Load()
	for i := range ops {
		o := &ops[i]
		a := b.a
		if side != nil && strings.HasPrefix(o.resource, side.prefix) && !strings.Contains(o.resource, "/") {
			a = side.a
		}
		switch o.kind {
		case opEntry:
			a.ApplyEntry(o.resource, o.domain, o.slot, o.at, now)
		case opCount:
			if l, ok := c.life(o.resource, uint32(o.slot), false); ok && o.at+l+c.grace() <= now {
				c.stats.tooOld.Add(uint64(o.n))
				continue
			}
			a.ApplyCount(o.resource, o.domain, o.slot, o.at, c.width(o.resource, o.slot), o.n, now)
			c.stats.countsApplied.Add(o.n)
		case opHolds:
			a.AddRemoteHolds(o.resource, o.domain, o.n)
		}
	}
}

// Snapshot returns this node's whole live state, for push/pull
// (gossip.Handler).
func (c *Cluster) Snapshot() *packet.Packet {
	ms := c.clock.Now().UnixMilli()
	pkt := c.packet()
	pkt.Full = true
	for _, r := range c.resources() {
		r.snapshot(r.p.Load(), c.tick.Load(), ms, pkt)
	}
	c.stepGauges(pkt, c.tick.Load(), true, false)
	c.mu.Lock()
	c.tab.held(pkt, ms, c.life)
	c.mu.Unlock()
	c.addTATs(pkt, ms)
	return pkt
}

// NodeGone drops the holds of a node memberlist declared left or dead
// (gossip.Handler).
func (c *Cluster) NodeGone(name string) {
	c.mu.Lock()
	ops := c.tab.gone(name, nil)
	c.mu.Unlock()
	c.stats.nodesGone.Add(1)
	c.apply(ops, c.clock.Now().UnixMilli())
}

var _ gossip.Handler = (*Cluster)(nil)
