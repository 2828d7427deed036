package reconcile

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/gossip"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
)

// cluster.go is the hub of this node's side of the cluster model: the
// Cluster, its options and the two seams it runs on, the registered
// resources (Register: each with its spec and its Applier, the engine or
// the rate limit service's store) and Sender (gossip), with what every
// step reads (resources, windows, lifetimes). The steps have a file each,
// as memberlist's state is split by probe, gossip and push/pull: tick.go (the loop, Step and Flush),
// ship.go (sending to every peer, and to owners), receive.go (merging what
// peers send: HandlePacket, NodeGone) and repair.go (Snapshot, follow-ups,
// reships and re-placement); owner.go is owner mode's relay.

// Applier is what peers' records of a registered resource are applied to
// (local.Applier, which the engine implements): the growth of their counts
// and their holds. It is named here too because the cluster is where it is
// used.
type Applier = local.Applier

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
	// passing is the members a gone origin's counts are still to be
	// passed to by a push/pull the sender would not start yet (passHeld;
	// Step's alone).
	passing        []string
	onConflict     func(uint64)
	selfConflictAt atomic.Int64 // ms: when a packet last claimed this node's name (rate limit)

	rmu  sync.Mutex
	rand *rand.Rand

	resMu sync.RWMutex
	res   map[string]*Res

	// unresolved are the names resolve found no applier to make, each
	// until when it is not asked again (ms).
	unresolved struct {
		mu sync.Mutex
		m  map[string]int64
	}

	tap      atomic.Pointer[applierBox] // SetApplier's, in place of every registered applier; nil: none
	appliers []Applier                  // every applier a resource is registered with, once each, in order of registration (resMu)
	sender   atomic.Pointer[senderBox]
	live     atomic.Int64

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
	// resets is the latest reset of each key (reset.go): the table's,
	// which the engine's resets record into without c.mu.
	resets *resetBook
	// amu orders the engine's changes as the table made them: it is taken
	// before c.mu is released and held until they are applied (unlockApply).
	// A floor (a gcra TAT taken from a joiner's first state) does not
	// commute with counts: a count merged before the floor but applied
	// after it would be counted twice.
	amu sync.Mutex
	// merged, nil but in tests, is called with c.mu held after each packet
	// is merged (HandlePacket), with its origin.
	merged func(from string)

	gmu     sync.Mutex // own gauges (Step only, and Snapshot)
	gauges  map[uint64]*ownGauge
	gver    uint64
	scratch map[uint64]int64

	stats statsCounters
}

type applierBox struct{ a Applier }
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
	c.resets = c.tab.resets
	c.tab.replays = c.replays
	c.tab.resetLife = c.resetLife
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

// Register makes resource name known to the cluster as spec describes it,
// a the applier of its peers' records, and returns the resource's
// recorder: a *Res, stable for the cluster's life (local.Cluster). A later
// call for the same name (a reload) replaces its spec and applier. Each
// resource's records are applied to the applier it was registered with;
// records of a name nobody registered are applied nowhere. a must be
// comparable (a pointer, as the engine's and the rate limit service's
// are): the holds and gcra TATs of this node are asked of each distinct
// applier once.
func (c *Cluster) Register(name string, spec local.ClusterSpec, a Applier) local.Recorder {
	p := paramsOf(spec, a)
	c.resMu.Lock()
	defer c.resMu.Unlock()
	r, ok := c.res[name]
	var was Applier // the applier r was registered with
	if !ok {
		r = &Res{c: c, name: name}
		c.res[name] = r
	} else {
		was = r.p.Load().applier
	}
	r.p.Store(p)
	wasUsed := false
	for _, x := range c.res {
		wasUsed = wasUsed || was != nil && x.p.Load().applier == was
	}
	c.setMinLife()
	if was != nil && !wasUsed { // no resource is applied to it any more
		c.appliers = slices.DeleteFunc(slices.Clone(c.appliers), func(x Applier) bool { return x == was })
	}
	if a != nil && !slices.Contains(c.appliers, a) {
		c.appliers = append(slices.Clip(c.appliers), a)
	}
	return r
}

// Unregister forgets resource name (local.Unregisterer): its records are
// applied nowhere from now on, and the table forgets its counts at the
// next sweep. The engine unregisters a limit set by a request it forgot
// (idle); a peer's count of it registers it again (Resolver).
func (c *Cluster) Unregister(name string) {
	c.resMu.Lock()
	defer c.resMu.Unlock()
	if _, ok := c.res[name]; !ok {
		return
	}
	delete(c.res, name)
	c.setMinLife()
}

// setMinLife sets minLife, c.resMu held for writing: the shortest window of
// a resource the config defines. A limit set by a request does not count
// (local.ClusterSpec.Requested): a client's window of a millisecond would
// otherwise shorten every resource's flush gap to nothing.
func (c *Cluster) setMinLife() {
	var least int64
	for _, x := range c.res {
		xp := x.p.Load()
		if xp.requested {
			continue
		}
		for _, l := range xp.life {
			if l > 0 && (least == 0 || l < least) {
				least = l
			}
		}
	}
	c.minLife.Store(least)
}

// Resolver is implemented by an Applier that can make the resource of a
// name nobody registered (local's attachment: a limit set by a request,
// whose name carries its definition): the cluster asks it before applying
// a peer's record of such a name, and the applier registers it.
type Resolver interface {
	Resolve(resource string) bool
}

// resolve asks each registered applier that is a Resolver to make resource,
// and returns its registration, or nil. A name no applier made is not
// asked about again for refuseFor (unresolved): a peer's counts of a
// definition this node refuses (its namespace closed or full here) cost a
// map lookup each, not a parse.
func (c *Cluster) resolve(resource string, now int64) *Res {
	c.unresolved.mu.Lock()
	until, refused := c.unresolved.m[resource]
	c.unresolved.mu.Unlock()
	if refused && now < until {
		return nil
	}
	c.resMu.RLock()
	as := c.appliers
	c.resMu.RUnlock()
	for _, a := range as {
		if rv, ok := a.(Resolver); ok && rv.Resolve(resource) {
			c.resMu.RLock()
			r := c.res[resource]
			c.resMu.RUnlock()
			if r != nil {
				return r
			}
		}
	}
	c.unresolved.mu.Lock()
	if len(c.unresolved.m) >= maxUnresolved || c.unresolved.m == nil {
		c.unresolved.m = make(map[string]int64)
	}
	c.unresolved.m[resource] = now + refuseFor
	c.unresolved.mu.Unlock()
	return nil
}

// refuseFor is how long, ms, resolve remembers a name no applier made;
// maxUnresolved bounds how many it remembers (past it, it starts afresh).
const (
	refuseFor     = 10_000
	maxUnresolved = 4096
)

// SetApplier makes a the applier of every resource's records in place of
// the one it was registered with, and the one asked for this node's holds
// and TATs (nil: back to the registered ones): a tap that watches what is
// applied and passes it on, as the simulators' and benches' do.
func (c *Cluster) SetApplier(a Applier) {
	if a == nil {
		c.tap.Store(nil)
		return
	}
	c.tap.Store(&applierBox{a})
}

// applierOf returns the applier of r's records: the tap, else r's own (nil
// when r is nil: a name nobody registered).
func (c *Cluster) applierOf(tap *applierBox, r *Res) Applier {
	switch {
	case tap != nil:
		return tap.a
	case r == nil:
		return nil
	}
	return r.p.Load().applier
}

// eachApplier calls fn with the tap, or else with each distinct registered
// applier once, in order of registration: what this node's holds and gcra
// TATs are asked of.
func (c *Cluster) eachApplier(fn func(Applier)) {
	if b := c.tap.Load(); b != nil {
		fn(b.a)
		return
	}
	c.resMu.RLock()
	as := c.appliers
	c.resMu.RUnlock()
	for _, a := range as {
		fn(a)
	}
}

var _ local.Cluster = (*Cluster)(nil)

// SetSender sets what ships packets; until it is set nothing is shipped.
func (c *Cluster) SetSender(s Sender) { c.sender.Store(&senderBox{s}) }

func (c *Cluster) n() int { return int(c.live.Load()) }

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

// silence is how long, ms, a peer may send nothing before its holds are
// dropped: a live peer sends at least every fourth tick, so 20 ticks of
// silence (and at least 10 s) is a peer that is gone, whatever memberlist
// still says. Housekeeping runs every fourth tick, so the holds go within
// silence plus 4 ticks.
func (c *Cluster) silence() int64 {
	return max(20*int64(c.interval/time.Millisecond), 10_000)
}

// widthOf returns the bucket size of slot under p (1 ms when p is nil, a
// resource nobody registered, or the slot is not p's).
func widthOf(p *params, slot int) int64 {
	if p == nil || slot < 0 || slot >= len(p.bucket) {
		return 1
	}
	return p.bucket[slot]
}

// grace is how long, ms, a bucket is kept past its lifetime: a late
// duplicate finds it and is not applied twice. A count of a bucket older
// than its lifetime plus grace is not applied at all (apply): its bucket
// may have been forgotten, and applying it again would count it twice.
func (c *Cluster) grace() int64 { return 2*int64(c.interval/time.Millisecond) + 1000 }

// replays reports whether the engine's reset of a key of resource forgets
// its peers' counts made after the reset too, which the table then applies
// again (local.ClusterSpec.Replays).
func (c *Cluster) replays(resource string) bool {
	c.resMu.RLock()
	r, ok := c.res[resource]
	c.resMu.RUnlock()
	return ok && r.p.Load().replays
}

// resetLife reports how long a reset of a key of resource matters
// (params.resetLife); false for a resource nobody registered.
func (c *Cluster) resetLife(resource string) (int64, bool) {
	c.resMu.RLock()
	r, ok := c.res[resource]
	c.resMu.RUnlock()
	if !ok {
		return 0, false
	}
	return r.p.Load().resetLife(), true
}

// life reports how long a slot's buckets (or entries) of resource matter.
func (c *Cluster) life(resource string, slot uint32, mark bool) (int64, bool) {
	c.resMu.RLock()
	r, ok := c.res[resource]
	c.resMu.RUnlock()
	if !ok {
		return 0, false
	}
	p := r.p.Load()
	if mark {
		return p.markLife(slot)
	}
	if int(slot) >= len(p.life) {
		return 0, false
	}
	return p.life[slot], true
}

var _ gossip.Handler = (*Cluster)(nil)
