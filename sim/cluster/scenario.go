package cluster

import (
	"fmt"
	"math"
	"time"

	"github.com/obol-dev/obol/config"
	simpkg "github.com/obol-dev/obol/sim"
)

// scenario.go is what a run is asked to do: the Scenario, its defaults and
// its validation.

// Defaults of a Scenario's zero fields.
const (
	DefaultSyncInterval = 250 * time.Millisecond
	DefaultDelay        = time.Millisecond
	DefaultDuration     = 5 * time.Second
	// DefaultDetectAfter is how long after a death the survivors get
	// NodeGone: what bench/cluster measured of memberlist's
	// DefaultLANConfig (5.5–5.7 s).
	DefaultDetectAfter = 5500 * time.Millisecond
	// DefaultMaxEvents bounds the events of one run.
	DefaultMaxEvents = 50_000_000
	// DefaultSamples is about how many hits convergence follows.
	DefaultSamples = 5000
	// DefaultLoadFactor: Rate 0 offers this many times the key's limit per
	// second, cluster-wide (bench/cluster's load).
	DefaultLoadFactor = 5
	// DefaultStateInterval is how often an agent with a state file writes
	// it (the agent's --state-interval default).
	DefaultStateInterval = 5 * time.Second
	// DefaultJoinSpread is how long after a node joins (its push/pull with
	// a seed) every other member knows of it: memberlist's gossip of the
	// join.
	DefaultJoinSpread = 200 * time.Millisecond
)

// Limits of a Scenario.
const (
	MaxNodes = 5000
	MaxKeys  = 10_000_000
)

// Node spread of the offered load (Scenario.Skew).
const (
	SkewEven = "even" // every node the same rate
	SkewHot  = "hot"  // node 0 takes 80%, the others share 20% evenly
	SkewZipf = "zipf" // node i's share ∝ 1/(i+1)
)

// Key choice (Scenario.KeySpread).
const (
	KeysUniform = "uniform"
	KeysZipf    = "zipf" // key k's share ∝ 1/(k+1)^1.1
)

// Arrival processes (Scenario.Arrivals).
const (
	ArrivalsEven    = "even"
	ArrivalsPoisson = "poisson"
)

// Partition cuts the nodes in Nodes off from the others from Start to End
// (virtual time from the run's start): a datagram sent across the cut in
// that span is lost.
type Partition struct {
	Start, End time.Duration
	Nodes      []int
}

// Death kills node Node at At: it stops deciding, shipping and receiving.
type Death struct {
	Node int
	At   time.Duration
}

// Restart stops node Node's agent at At and starts a new one in its place
// Down later, with a new incarnation (a later start time), the node's
// share of the load, and fresh streams: cleanly, as on SIGTERM (a last
// Step ships its unshipped counts, it writes its state file when it keeps
// one, and the others get NodeGone at once, as after memberlist's Leave),
// or, with Crash, it just dies (the others get NodeGone DetectAfter
// later). The new agent is named as before with SameName, else
// NamePrefix + Node + "-r" + the node's restart count (1 for its first).
// With StateFile it first restores the node's state file (the old agent's
// Snapshot at its clean stop, or, after a crash, at the last multiple of
// StateInterval before it), then joins the mesh (see the package doc).
type Restart struct {
	Node                       int
	At, Down                   time.Duration
	SameName, Crash, StateFile bool
}

// Start makes node Node absent (not live, no load, no ticks) until At,
// when its agent starts and joins the mesh: scale-out.
type Start struct {
	Node int
	At   time.Duration
}

// Leave stops node Node's agent cleanly at At for good (as a Restart
// without Crash, with no return): scale-in.
type Leave struct {
	Node int
	At   time.Duration
}

// Scenario is one simulated run. Zero fields take the documented defaults.
type Scenario struct {
	// Resource is the key's config (normalized: config.ParseResource gives
	// one); required. See the package doc for the kinds the oracle takes.
	Resource *config.Resource
	// Nodes is the cluster's size, 1 to MaxNodes; required.
	Nodes int
	// SyncInterval is the tick; 0 = DefaultSyncInterval.
	SyncInterval time.Duration
	// Drift overrides the resource's drift tolerance when set, in [0, 1].
	Drift *float64
	// TickOnly ships only on the tick, never at the drift threshold.
	TickOnly bool
	// FlushGap is each node's least time between two drift flushes
	// (reconcile.Options.FlushGap): 0 = reconcile's default, negative =
	// none.
	FlushGap time.Duration
	// Unsequenced ships as agents without sequenced streams do (gossip
	// Config.Unsequenced, or a mesh with a peer of an earlier release):
	// unsequenced messages, each change resent on reconcile's schedule,
	// no repair. By default messages are numbered and a change ships
	// once; a receiver asks for what it missed and the origin sends it
	// again from its ring, or resyncs (see the package doc).
	Unsequenced bool
	// OwnerFrom is reconcile.Options.OwnerFrom: the least number of live
	// nodes at which they run in owner mode (0: reconcile's default,
	// negative: never). In owner mode a node sends a key's counts to its
	// owner and successor only, on a ring of the nodes not known dead, and
	// owners send sums back (see the package doc).
	OwnerFrom int
	// TargetedResends sends owner mode's messages to one node unnumbered,
	// each change resent on reconcile's schedule, as agents of the
	// release before numbered targeted streams. By default (unless
	// Unsequenced) they are numbered per receiver and ship once; a
	// receiver that finds one missing asks its origin for a reship.
	TargetedResends bool
	// FlatHeartbeat sends an idle node's heartbeat to every peer every
	// fourth tick whatever the cluster's size, as agents of the release
	// before stretched heartbeats. By default, above
	// stream.HeartbeatPeers + 1 nodes, every 4 × stream.Stretch ticks
	// (gossip.Node.HeartbeatStretch).
	FlatHeartbeat bool
	// Delay is the one-way network delay (0 = DefaultDelay; use NoDelay
	// for none), Jitter a uniform extra in [0, Jitter).
	Delay, Jitter time.Duration
	// Loss is the probability that a datagram is lost, per peer: [0, 1).
	Loss float64
	// Encrypt counts AES-GCM's 29 bytes per datagram; Label is memberlist's
	// label (2 + len bytes per datagram).
	Encrypt bool
	Label   string
	// Rate is the requests offered per second per node on average; 0 =
	// DefaultLoadFactor × the limit per second, over Nodes.
	Rate float64
	// Skew spreads the load over the nodes: SkewEven (""), SkewHot, SkewZipf.
	Skew string
	// Arrivals is ArrivalsEven ("") or ArrivalsPoisson.
	Arrivals string
	// Keys is how many keys the load falls on (0 = 1, one hot key);
	// KeySpread is KeysUniform ("") or KeysZipf.
	Keys      int
	KeySpread string
	// Duration is the simulated time (0 = DefaultDuration); Warmup, the
	// start not measured (0 = two windows, at most half of Duration).
	Duration, Warmup time.Duration
	// Partitions and Deaths are the faults; DetectAfter, how long after a
	// death survivors get NodeGone (0 = DefaultDetectAfter).
	Partitions  []Partition
	Deaths      []Death
	DetectAfter time.Duration
	// Churn: agents that restart, start late and leave (see Restart, Start
	// and Leave). A node's events must follow one another: a node is up
	// from the run's start unless it has a Start (then its first event),
	// and each Restart, Leave and Death finds it up; a Restart's new agent
	// is up at At + Down, after which the node's next event may come.
	Restarts []Restart
	Starts   []Start
	Leaves   []Leave
	// StateInterval is how often a node whose Restarts keep a state file
	// writes it, at the multiples of it from the run's start (0 =
	// DefaultStateInterval); JoinSpread, how long after a joining agent's
	// push/pull with its seed every other member knows of it (0 =
	// DefaultJoinSpread; use NoDelay for none).
	StateInterval, JoinSpread time.Duration
	// PushPullEvery, when set, models memberlist's periodic push/pull:
	// every running node exchanges states (as a resync) with one member
	// picked at random every PushPullEvery (memberlist's default is 30 s),
	// scaled as memberlist scales it past 32 members, from a random phase.
	// 0: not modelled.
	PushPullEvery time.Duration
	// Seed makes the run: the same Scenario gives the same Result.
	Seed uint64
	// SampleGap is the least time between two convergence samples of one
	// node (0: Duration × Nodes / DefaultSamples, about DefaultSamples in
	// all).
	SampleGap time.Duration
	// ProbeEvery, when set, makes one probe hit every ProbeEvery, round-robin
	// over the live nodes, each on a fresh domain outside the load's keys
	// (and outside the oracle): bench/cluster's convergence probes, whose
	// bytes count in what it measures.
	ProbeEvery time.Duration
	// Names: the resource's (ResourceName, "" = "sim/resource"), node i's
	// (NamePrefix + i, "" = "node-"), key k's (KeyPrefix + k, "" = "k"),
	// probe k's ("probe-0-" + k). They travel in packets, so their lengths
	// count in the bytes.
	ResourceName, NamePrefix, KeyPrefix string
	// MaxEvents bounds the work (0 = DefaultMaxEvents).
	MaxEvents int64
	// Yield, when set, is called every YieldEvery events with the events
	// so far: a caller's hook to pace the run (rest, yield) or to stop it by
	// returning an error, which Run returns.
	Yield func(events int64) error
}

// YieldEvery is how many events run between two calls of Scenario.Yield
// (and two looks at Run's context).
const YieldEvery = 4096

// NoDelay as Scenario.Delay is a network without delay.
const NoDelay = time.Duration(-1)

// ErrScenario is wrapped by every Validate error: sim.ErrScenario, which
// package api reads without linking this package.
var ErrScenario = simpkg.ErrScenario

// ErrTooMuchWork is wrapped by Run's error when a scenario's work is over
// its MaxEvents, estimated before the run or counted during it:
// sim.ErrTooMuchWork.
var ErrTooMuchWork = simpkg.ErrTooMuchWork

func bad(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrScenario, field, fmt.Sprintf(format, args...))
}

// Validate reports the first problem of s, naming the field and what it
// expected.
func (s *Scenario) Validate() error {
	if s.Resource == nil {
		return bad("resource", "required")
	}
	if err := checkResource(s.Resource); err != nil {
		return err
	}
	switch {
	case s.Nodes < 1 || s.Nodes > MaxNodes:
		return bad("nodes", "must be 1 to %d, got %d", MaxNodes, s.Nodes)
	case s.SyncInterval < 0:
		return bad("sync_interval", "must be > 0 (0 = %s), got %s", DefaultSyncInterval, s.SyncInterval)
	case s.SyncInterval > 0 && s.SyncInterval < time.Millisecond:
		return bad("sync_interval", "must be at least 1ms, got %s", s.SyncInterval)
	case s.Drift != nil && !(*s.Drift >= 0 && *s.Drift <= 1):
		return bad("drift", "must be in [0, 1], got %g", *s.Drift)
	case s.Delay < 0 && s.Delay != NoDelay:
		return bad("delay", "must be ≥ 0, got %s", s.Delay)
	case s.Jitter < 0:
		return bad("jitter", "must be ≥ 0, got %s", s.Jitter)
	case !(s.Loss >= 0 && s.Loss < 1):
		return bad("loss", "must be in [0, 1), got %g", s.Loss)
	case s.ResourceName != "" && !validName(s.ResourceName):
		return bad("resource_name", "must be NAMESPACE/NAME, got %q", s.ResourceName)
	case len(s.NamePrefix) > 200 || len(s.KeyPrefix) > 200:
		return bad("name_prefix", "node and key prefixes are at most 200 bytes")
	case len(s.Label) > 255:
		return bad("label", "at most 255 bytes, got %d", len(s.Label))
	case !(s.Rate >= 0) || math.IsInf(s.Rate, 0):
		return bad("rate", "must be a finite number ≥ 0, got %g", s.Rate)
	case s.Skew != "" && s.Skew != SkewEven && s.Skew != SkewHot && s.Skew != SkewZipf:
		return bad("skew", "must be %q, %q or %q, got %q", SkewEven, SkewHot, SkewZipf, s.Skew)
	case s.Arrivals != "" && s.Arrivals != ArrivalsEven && s.Arrivals != ArrivalsPoisson:
		return bad("arrivals", "must be %q or %q, got %q", ArrivalsEven, ArrivalsPoisson, s.Arrivals)
	case s.Keys < 0 || s.Keys > MaxKeys:
		return bad("keys", "must be 0 to %d, got %d", MaxKeys, s.Keys)
	case s.KeySpread != "" && s.KeySpread != KeysUniform && s.KeySpread != KeysZipf:
		return bad("key_spread", "must be %q or %q, got %q", KeysUniform, KeysZipf, s.KeySpread)
	case s.Duration < 0:
		return bad("duration", "must be > 0 (0 = %s), got %s", DefaultDuration, s.Duration)
	case s.Warmup < 0:
		return bad("warmup", "must be ≥ 0, got %s", s.Warmup)
	case s.DetectAfter < 0:
		return bad("detect_after", "must be ≥ 0, got %s", s.DetectAfter)
	case s.SampleGap < 0:
		return bad("sample_gap", "must be ≥ 0, got %s", s.SampleGap)
	case s.ProbeEvery < 0:
		return bad("probe_every", "must be ≥ 0, got %s", s.ProbeEvery)
	case s.ProbeEvery > 0 && s.ProbeEvery < time.Millisecond:
		return bad("probe_every", "must be at least 1ms, got %s", s.ProbeEvery)
	case s.MaxEvents < 0:
		return bad("max_events", "must be ≥ 0, got %d", s.MaxEvents)
	}
	d := s.duration()
	if s.Warmup >= d {
		return bad("warmup", "must be less than the duration %s, got %s", d, s.Warmup)
	}
	for i, p := range s.Partitions {
		f := fmt.Sprintf("partitions[%d]", i)
		if p.Start < 0 || p.End <= p.Start {
			return bad(f, "needs 0 ≤ start < end, got %s to %s", p.Start, p.End)
		}
		if len(p.Nodes) == 0 {
			return bad(f+".nodes", "must name at least one node")
		}
		for _, n := range p.Nodes {
			if n < 0 || n >= s.Nodes {
				return bad(f+".nodes", "node %d is not in 0 to %d", n, s.Nodes-1)
			}
		}
	}
	dead := map[int]bool{}
	for i, dt := range s.Deaths {
		f := fmt.Sprintf("deaths[%d]", i)
		switch {
		case dt.Node < 0 || dt.Node >= s.Nodes:
			return bad(f+".node", "node %d is not in 0 to %d", dt.Node, s.Nodes-1)
		case dead[dt.Node]:
			return bad(f+".node", "node %d dies twice", dt.Node)
		case dt.At < 0:
			return bad(f+".at", "must be ≥ 0, got %s", dt.At)
		}
		dead[dt.Node] = true
	}
	return s.validateChurn()
}

// checkResource refuses what the oracle cannot judge, and a resource not
// normalized: the engine and the cluster take its drift and max_keys as
// they are.
func checkResource(rc *config.Resource) error {
	if rc.Drift == nil || rc.MaxKeys == 0 {
		return bad("resource", "not normalized (drift or max_keys absent): parse it with config.ParseResource, or call its Normalize")
	}
	if rc.Shadow {
		return bad("resource.shadow", "a shadow resource grants everything; the simulator needs it off")
	}
	if len(rc.Domains) > 0 {
		return bad("resource.domains", "per-domain overrides are not simulated; give the default only")
	}
	switch rc.Kind {
	case config.KindGCRA:
		if rc.Burst < 1 || rc.Count < 1 || rc.Period <= 0 {
			return bad("resource", "gcra needs burst ≥ 1, count ≥ 1 and period > 0 (normalize it with config.ParseResource)")
		}
		if rc.Period/time.Duration(rc.Count) < 1 {
			return bad("resource", "gcra period/count is under 1ns")
		}
	case config.KindTiers:
		if len(rc.Tiers) != 1 {
			return bad("resource.tiers", "the oracle takes exactly one tier, got %d", len(rc.Tiers))
		}
		t := rc.Tiers[0]
		if t.Window != t.Active || t.Limit < 1 || t.Active < time.Millisecond {
			return bad("resource.tiers[0]", "the oracle takes a tier whose window equals its active time (≥ 1ms) and limit ≥ 1, got limit %d window %s active %s", t.Limit, t.Window, t.Active)
		}
		if rc.HardLimit != nil || rc.GlobalLimit != nil {
			return bad("resource", "hard_limit and global_limit are not simulated")
		}
	default:
		return bad("resource.kind", "must be gcra or tiers, got %q", rc.Kind)
	}
	return nil
}

func (s *Scenario) duration() time.Duration {
	if s.Duration == 0 {
		return DefaultDuration
	}
	return s.Duration
}

// validName reports whether name is NAMESPACE/NAME, as the config wants.
func validName(name string) bool {
	cfg := &config.Config{Resources: map[string]*config.Resource{name: {Kind: config.KindGCRA, Burst: 1, Count: 1, Period: time.Second}}}
	return cfg.Validate() == nil
}
