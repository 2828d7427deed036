package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// node.go starts in-process agents over real memberlist on 127.0.0.1, each
// wired as the agent's startCluster wires one: reconcile.New → Engine.Attach
// → gossip.New(…, rec) → rec.SetSender(node) → go rec.Run(ctx), plus the
// engine's housekeeping Step every second as the agent runs it.

// The resources of the bench config.
const (
	resGCRA   = "bench/gcra"
	resTiers  = "bench/tiers"
	resCopies = "bench/copies"
	resKeys   = "bench/keys" // the many-keys mode's only resource
)

// probePrefix starts the domains of convergence probes.
const probePrefix = "probe-"

// benchConfig returns the config every node runs: one gcra key (burst L,
// count L, period 1s), one tiers key ("L,1,1,0") and a copies resource for
// the death measurement.
func benchConfig(limit int, drift float64) (*config.Config, error) {
	y := fmt.Sprintf(`
resources:
  %s:
    kind: gcra
    burst: %d
    count: %d
    period: 1s
    drift: %g
  %s:
    kind: tiers
    tiers: "%d,1,1,0"
    drift: %g
  %s:
    kind: copies
    domain_limit: 1000
`, resGCRA, limit, limit, drift, resTiers, limit, drift, resCopies)
	return config.Parse([]byte(y))
}

// keysConfig returns the config of the many-keys mode: one gcra resource
// limited as a user limits a domain (burst 10, count 10, period 1s) with
// the given drift.
func keysConfig(drift float64) (*config.Config, error) {
	y := fmt.Sprintf(`
resources:
  %s:
    kind: gcra
    burst: %d
    count: %d
    period: 1s
    drift: %g
`, resKeys, keysLimit, keysLimit, drift)
	return config.Parse([]byte(y))
}

// keysLimit is the burst and the count per second of each key of the
// many-keys mode.
const keysLimit = 10

// mainSlot is the reconcile slot whose count a decision on the resource
// reads: tier 1 for tiers, spends for gcra.
var mainSlot = map[string]int{resTiers: 1, resGCRA: local.SlotSpend, resKeys: local.SlotSpend}

// tap is the engine as the cluster's Applier: it forwards every change to
// the engine, then notes when a probe's count was applied, so that a probe
// counts as arrived once the engine counts it.
type tap struct {
	reconcile.Applier

	mu   sync.Mutex
	seen map[string]int64 // probe domain → Unix ns of its first count
}

var _ reconcile.Applier = (*tap)(nil)

func (t *tap) ApplyCount(resource, domain string, slot int, at, width, n, now int64) {
	t.Applier.ApplyCount(resource, domain, slot, at, width, n, now)
	if !strings.HasPrefix(domain, probePrefix) {
		return
	}
	if s, ok := mainSlot[resource]; !ok || s != slot {
		return
	}
	ts := time.Now().UnixNano()
	t.mu.Lock()
	if _, ok := t.seen[domain]; !ok {
		t.seen[domain] = ts
	}
	t.mu.Unlock()
}

// take returns the probes seen so far and starts a new record.
func (t *tap) take() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.seen
	t.seen = make(map[string]int64)
	return s
}

// node is one in-process agent.
type node struct {
	name   string
	eng    *local.Engine
	rec    *reconcile.Cluster
	gn     *gossip.Node
	tap    *tap
	cancel context.CancelFunc
	wg     sync.WaitGroup
	dead   bool

	// queueFull counts memberlist's "handler queue full" log lines (a
	// received message dropped): nil unless clusterSpec.countLog.
	queueFull *atomic.Int64
}

// stop ends the node's loops and shuts memberlist down without leaving:
// to its peers it has crashed.
func (n *node) stop() {
	if n.dead {
		return
	}
	n.dead = true
	_ = n.gn.Shutdown()
	n.cancel()
	n.wg.Wait()
}

// mlTimers are the failure-detection settings memberlist ran with, read
// from its final config through gossip.Config.Tune (which changes nothing).
type mlTimers struct {
	probeInterval, probeTimeout time.Duration
	suspicionMult, maxMult      int
	gossipInterval              time.Duration
}

// clusterSpec says how to start a cluster.
type clusterSpec struct {
	n        int
	tickOnly bool
	sync     time.Duration
	cfg      *config.Config
	seed     uint64
	prefix   string // node names are prefix-0, prefix-1, …
	// countLog gives each node a logger that counts memberlist's
	// "handler queue full" lines (node.queueFull); without it the nodes
	// log nothing, as gossip.New does with no logger.
	countLog bool
	// unsequenced and flushGap: gossip.Config.Unsequenced and
	// reconcile.Options.FlushGap of every node (the shipping of earlier
	// releases, for before/after comparisons).
	unsequenced bool
	flushGap    time.Duration
	// ownerFrom is reconcile.Options.OwnerFrom of every node.
	ownerFrom int
}

type cluster struct {
	spec  clusterSpec
	nodes []*node
	ml    mlTimers
}

// startCluster starts spec.n nodes, node i joining every node before it,
// and waits until every node sees all of them alive and has had a sync tick
// since (so that its drift threshold divides by n).
func startCluster(spec clusterSpec) (*cluster, error) {
	c := &cluster{spec: spec}
	var once sync.Once
	tune := func(mc *memberlist.Config) {
		once.Do(func() {
			c.ml = mlTimers{mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult, mc.SuspicionMaxTimeoutMult, mc.GossipInterval}
		})
	}
	var join []string
	for i := range spec.n {
		name := fmt.Sprintf("%s-%d", spec.prefix, i)
		rec := reconcile.New(reconcile.Options{
			Name: name, SyncInterval: spec.sync, TickOnly: spec.tickOnly, FlushGap: spec.flushGap, OwnerFrom: spec.ownerFrom,
			Rand: rand.New(rand.NewPCG(spec.seed, uint64(i))),
		})
		eng := local.New(spec.cfg)
		eng.Attach(rec)
		tp := &tap{Applier: eng, seen: make(map[string]int64)}
		rec.SetApplier(tp)
		var qf *atomic.Int64
		var lg *slog.Logger
		if spec.countLog {
			qf = new(atomic.Int64)
			lg = slog.New(queueFullCounter{qf})
		}
		gn, err := gossip.New(gossip.Config{
			Name: name, Bind: "127.0.0.1:0", Join: append([]string(nil), join...),
			Incarnation: rec.Incarnation(), Tune: tune, Logger: lg, Unsequenced: spec.unsequenced,
		}, rec)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		rec.SetSender(gn)
		ctx, cancel := context.WithCancel(context.Background())
		nd := &node{name: name, eng: eng, rec: rec, gn: gn, tap: tp, queueFull: qf, cancel: cancel}
		nd.wg.Go(func() { rec.Run(ctx) })
		nd.wg.Go(func() { stepLoop(ctx, eng) })
		c.nodes = append(c.nodes, nd)
		join = append(join, gn.Addr())
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.allLive() {
		if time.Now().After(deadline) {
			c.close()
			return nil, errors.New("the nodes did not all see each other within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Run reads Live() at each tick (jittered: at most 1.1 × sync apart).
	time.Sleep(spec.sync*12/10 + 50*time.Millisecond)
	return c, nil
}

func (c *cluster) allLive() bool {
	for _, n := range c.nodes {
		if !n.dead && n.gn.Live() != len(c.nodes) {
			return false
		}
	}
	return true
}

// close stops every node.
// probeSightings waits until the last probes can have arrived (a probe
// waits for the next tick, at most 1.1 × sync, and the network) and takes
// what each node's tap saw of them.
func (c *cluster) probeSightings(sync time.Duration) []map[string]int64 {
	time.Sleep(2*sync + 300*time.Millisecond)
	seen := make([]map[string]int64, len(c.nodes))
	for i, nd := range c.nodes {
		seen[i] = nd.tap.take()
	}
	return seen
}

func (c *cluster) close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.stop)
	}
	wg.Wait()
}

// stepLoop is the agent's housekeeping: Step every second.
func stepLoop(ctx context.Context, e *local.Engine) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.Step(time.Now())
		}
	}
}

// queueFullCounter is a slog handler that keeps nothing but a count of the
// records saying memberlist's handler queue was full: memberlist logs
// "handler queue full, dropping message" for each received message it
// drops because HandoffQueueDepth messages already wait for its handler
// goroutine, and gossip routes memberlist's log to the node's logger at
// debug level. Safe for concurrent use.
type queueFullCounter struct{ n *atomic.Int64 }

var _ slog.Handler = queueFullCounter{}

func (h queueFullCounter) Enabled(context.Context, slog.Level) bool { return true }

func (h queueFullCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "handler queue full") {
		h.n.Add(1)
	}
	return nil
}

func (h queueFullCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h queueFullCounter) WithGroup(string) slog.Handler      { return h }
