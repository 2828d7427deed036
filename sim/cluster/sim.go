package cluster

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip"
	"github.com/obol-dev/obol/gossip/ring"
	"github.com/obol-dev/obol/gossip/stream"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// sim.go sets a run up (nodes, load, network) and runs its event loop.

// Default names (Scenario.ResourceName, NamePrefix, KeyPrefix).
const (
	defaultResource = "sim/resource"
	defaultNode     = "node-"
	defaultKey      = "k"
)

// base is the virtual instant a run starts at: fixed, so that a run
// depends on its Scenario alone.
var base = time.Unix(1_700_000_000, 0)

// node is one simulated agent.
type node struct {
	idx      int
	name     string
	eng      *local.Engine
	rec      *reconcile.Cluster
	jit      *rand.Rand // the tick's jitter
	dead     bool
	rate     float64 // requests per second
	phase    float64
	k        int64 // requests issued
	next     int64 // ns: the next request
	cnt      nodeCounts
	lastSmp  int64           // ns: when it last started a sample (−1: never)
	flushAt  bool            // a deferred drift flush is in the queue
	own      map[int32]int64 // key → the bucket (ms) its last grant fell in
	out      *stream.Out     // its numbered stream (nil: Unsequenced)
	in       *stream.In      // its peers' streams
	tout     *stream.Targets // its targeted streams (nil: not numbered)
	tin      *stream.In      // its peers' targeted streams to it (nil: not numbered)
	repairAt int64           // when its queued evRepair runs (−1: none queued)
	// Churn (churn.go): the agent's number at this node (events carry
	// it), whether memberlist lists its name, whether the node has not
	// started yet, whether it keeps a state file and the file's bytes,
	// how many times it restarted, and its join's record (−1: none).
	gen       uint32
	listed    bool
	late      bool
	stateFile bool
	state     []byte
	restarts  int
	join      int
}

type sim struct {
	sc        Scenario
	resName   string
	res       Result
	rc        *config.Resource
	nodes     []*node
	q         queue
	clk       *clock.Fake
	now       int64
	warm, end int64
	sync      int64
	delay     int64
	jitter    int64
	detect    int64
	budget    int
	overhead  int
	events    int64
	nextYield int64
	maxEvents int64
	loadRand  *rand.Rand
	netRand   *rand.Rand
	zipf      *rand.Zipf
	domains   []string
	keyIdx    map[string]int32
	orc       *oracle
	conv      *converge
	width     int64 // ms: the main slot's bucket
	mainSlot  int
	gap       int64 // ns between two samples of one node
	live      int   // nodes not known dead
	curFrom   int32 // the origin of the packet being merged (−1: none)
	err       error
	dec       local.Decision
	byName    map[string]int
	ring      *ring.Ring // owner mode's placement (route.go)
	epoch     uint64
	curSum    bool             // the packet being merged is a sum
	resynced  map[[2]int]int64 // ns: when a node last asked a member for a push/pull (sender.Resync)
	// Churn (churn.go, judge.go).
	cfg        *config.Config
	nodePrefix string
	listed     map[string]bool // the names memberlist lists
	departs    []departure
	joins      []joinRec
	ppRand     *rand.Rand
	spread     int64 // ns: Scenario.JoinSpread
	stopAt     int64 // ns: the end of the run, the settle included
	lost       bool  // LostHits is judged (judge.go)
}

// Run simulates s and returns what it measured. It fails for a scenario
// Validate refuses, one whose estimated work is over its MaxEvents
// (ErrTooMuchWork, before anything runs) or that reaches it, and when ctx
// is done.
func Run(ctx context.Context, s Scenario) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	sm, err := setup(s) // ErrTooMuchWork from the estimate, before it allocates the nodes
	if err != nil {
		return Result{}, err
	}
	if err := sm.loop(ctx); err != nil {
		return Result{}, err
	}
	return sm.finish(), nil
}

// limitPerS is the key's limit per second.
func limitPerS(rc *config.Resource) float64 {
	if rc.Kind == config.KindGCRA {
		return float64(rc.Count) / rc.Period.Seconds()
	}
	return float64(rc.Tiers[0].Limit) / rc.Tiers[0].Window.Seconds()
}

func setup(s Scenario) (*sim, error) {
	sm := &sim{sc: s, curFrom: -1}
	rc := *s.Resource
	if s.Drift != nil {
		d := *s.Drift
		rc.Drift = &d
	}
	sm.rc = &rc
	sm.resName = or(s.ResourceName, defaultResource)
	keyPrefix, nodePrefix := or(s.KeyPrefix, defaultKey), or(s.NamePrefix, defaultNode)
	sm.sync = s.syncInterval()
	switch s.Delay {
	case 0:
		sm.delay = int64(DefaultDelay)
	case NoDelay:
	default:
		sm.delay = int64(s.Delay)
	}
	sm.jitter = int64(s.Jitter)
	sm.detect = int64(s.DetectAfter)
	if sm.detect == 0 {
		sm.detect = int64(DefaultDetectAfter)
	}
	sm.end = int64(s.duration())
	sm.warm = int64(s.Warmup)
	if sm.warm == 0 {
		sm.warm = min(2*int64(windowFor(&rc)), sm.end/2)
	}
	sm.maxEvents = s.MaxEvents
	if sm.maxEvents == 0 {
		sm.maxEvents = DefaultMaxEvents
	}
	// The work is estimated before anything is allocated: a scenario over
	// its budget costs its refusal nothing (200 nodes' engines, rings and
	// streams took 150 ms of processor time, most of it collecting them).
	rates := spread(s, limitPerS(&rc))
	if est := s.estimate(rates); est > sm.maxEvents {
		return nil, fmt.Errorf("%w: about %d events (requests, ticks, merges and keys held) estimated, budget %d; simulate fewer nodes or keys, a lower rate or a shorter duration", ErrTooMuchWork, est, sm.maxEvents)
	}
	mc := &memberlist.Config{ProtocolVersion: memberlist.ProtocolVersion2Compatible, Label: s.Label}
	if s.Encrypt {
		mc.SecretKey = make([]byte, 32)
	}
	sm.budget = gossip.Budget(mc)
	sm.overhead = gossip.MaxDatagram - sm.budget
	if sm.budget < 64 {
		return nil, bad("label", "leaves a datagram budget of %d bytes, under 64", sm.budget)
	}
	keys := max(s.Keys, 1)
	sm.domains = make([]string, keys)
	sm.keyIdx = make(map[string]int32, keys)
	for i := range sm.domains {
		d := keyPrefix + strconv.Itoa(i)
		sm.domains[i] = d
		sm.keyIdx[d] = int32(i)
	}
	sm.loadRand = rand.New(rand.NewPCG(s.Seed, 0x10ad))
	sm.netRand = rand.New(rand.NewPCG(s.Seed, 0x4e7))
	if s.KeySpread == KeysZipf && keys > 1 {
		sm.zipf = rand.NewZipf(sm.loadRand, 1.1, 1, uint64(keys-1))
	}
	sm.orc = newOracle(&rc, keys, sm.warm, sm.end)
	sm.conv = newConverge(s.Nodes)
	if rc.Kind == config.KindGCRA {
		sm.mainSlot = local.SlotSpend
	} else {
		sm.mainSlot = local.SlotTotal
	}
	sm.width = reconcile.BucketWidths(&rc)[sm.mainSlot]
	sm.gap = int64(s.SampleGap)
	if sm.gap == 0 {
		sm.gap = sm.end * int64(s.Nodes) / DefaultSamples
	}
	sm.clk = clock.NewFake(base)
	cfg := &config.Config{Resources: map[string]*config.Resource{sm.resName: &rc}}
	sm.cfg, sm.nodePrefix = cfg, nodePrefix
	sm.ppRand = rand.New(rand.NewPCG(s.Seed, 0x9977))
	switch s.JoinSpread {
	case 0:
		sm.spread = int64(DefaultJoinSpread)
	case NoDelay:
	default:
		sm.spread = int64(s.JoinSpread)
	}
	late := make(map[int]bool, len(s.Starts))
	for _, st := range s.Starts {
		late[st.Node] = true
	}
	sm.live = s.Nodes - len(late)
	sm.byName = make(map[string]int, s.Nodes)
	sm.listed = make(map[string]bool, s.Nodes)
	for i := range s.Nodes {
		nd := &node{idx: i, name: nodePrefix + strconv.Itoa(i), rate: rates[i], lastSmp: -1, own: map[int32]int64{}, repairAt: -1, join: -1}
		nd.phase = float64(i) / float64(s.Nodes)
		sm.nodes = append(sm.nodes, nd)
		sm.byName[nd.name] = i
		if late[i] {
			nd.dead, nd.late = true, true
			continue // its agent is made when it starts (churn.go)
		}
		// An incarnation is a start time in ns, as the agent's: its size
		// on the wire is real.
		sm.agent(nd, nd.name, uint64(base.UnixNano())+uint64(i))
		sm.listed[nd.name], nd.listed = true, true
	}
	sm.judgeSetup()
	sm.placeRing()
	return sm, nil
}

// agent makes a new agent at nd named name, of incarnation inc: its
// engine, cluster, streams and random sources (the node's first agent's
// are those of gen 0), with nothing of an earlier agent of the node.
func (sm *sim) agent(nd *node, name string, inc uint64) {
	s, i, g := &sm.sc, nd.idx, uint64(nd.gen)
	nd.name = name
	nd.out, nd.in, nd.tin, nd.tout = nil, nil, nil, nil
	if !s.Unsequenced {
		nd.out = stream.NewOut(gossip.RepairMessages, gossip.RepairBytes)
		nd.in = stream.NewIn(stream.Options{})
		if !s.TargetedResends {
			nd.tin = stream.NewIn(stream.Options{})
			nd.tout = stream.NewTargets(gossip.RepairMessages, gossip.RepairBytes)
		}
	}
	nd.jit = rand.New(rand.NewPCG(s.Seed, uint64(i)+1+g<<40))
	nd.rec = reconcile.New(reconcile.Options{
		Name: name, Incarnation: inc, SyncInterval: time.Duration(sm.sync),
		TickOnly: s.TickOnly, FlushGap: s.FlushGap, OwnerFrom: s.OwnerFrom, Clock: sm.clk, Rand: rand.New(rand.NewPCG(s.Seed, uint64(i)+1<<32+g<<48)),
	})
	nd.eng = local.New(sm.cfg)
	nd.eng.Attach(nd.rec)
	nd.rec.SetApplier(&tap{Engine: nd.eng, s: sm, r: i})
	nd.rec.SetSender(&sender{s: sm, from: i})
	nd.lastSmp, nd.flushAt, nd.repairAt = -1, false, -1
	clear(nd.own)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// spread returns each node's offered rate.
func spread(s Scenario, limit float64) []float64 {
	total := s.Rate * float64(s.Nodes)
	if s.Rate == 0 {
		total = DefaultLoadFactor * limit
	}
	w := make([]float64, s.Nodes)
	var sum float64
	for i := range w {
		switch {
		case s.Skew == SkewHot && s.Nodes > 1:
			w[i] = 0.2 / float64(s.Nodes-1)
			if i == 0 {
				w[i] = 0.8
			}
		case s.Skew == SkewZipf:
			w[i] = 1 / float64(i+1)
		default:
			w[i] = 1
		}
		sum += w[i]
	}
	for i := range w {
		w[i] = total * w[i] / sum
	}
	return w
}

// Estimate returns the work Run estimates for s before it runs, the
// figure it holds against s.MaxEvents (requests, ticks, merges and keys
// held; see estimateOf), without running it or making its nodes. Drift
// and TickOnly do not change it. It fails as Validate does (ErrScenario).
func Estimate(s Scenario) (int64, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	return s.estimate(spread(s, limitPerS(s.Resource))), nil
}

// estimate is the work of s whose nodes are offered rates (spread).
func (s *Scenario) estimate(rates []float64) int64 {
	return estimateOf(rates, max(s.Keys, 1), int64(s.duration()), s.syncInterval())
}

// syncInterval is the shipping tick in ns, the default for 0.
func (s *Scenario) syncInterval() int64 {
	if s.SyncInterval == 0 {
		return int64(DefaultSyncInterval)
	}
	return int64(s.SyncInterval)
}

// estimateOf is the work of a run of len(rates) nodes offered rates (per
// node, per second) on keys keys for end ns, ticking every sync ns, before
// it runs: requests, ticks, one merge per peer of each tick's packet (every
// tick while a node has hits to ship, every fourth otherwise), and the keys
// every node comes to hold (each key a request touches reaches every node:
// nodes × min(keys, requests), each counted as one event: it is decoded,
// stored and swept at every node). Without the keys, 200 nodes on 100,000
// keys at 79 requests/s each passed the agent's 1,000,000-event budget and
// ran until its time limit stopped it, 8 s on the clock, resident memory
// from 76 to 244 MB; counted, they are about 16M, refused at once.
func estimateOf(rates []float64, keys int, end, sync int64) int64 {
	nodes := len(rates)
	d := float64(end) / 1e9
	ticksPerNode := float64(end) / (0.9 * float64(sync))
	var est, requests float64
	for _, rate := range rates {
		perTick := rate * float64(sync) / 1e9
		requests += rate * d
		est += rate*d + ticksPerNode*(1+min(1, max(0.25, perTick))*float64(nodes-1))
	}
	est += float64(nodes) * min(float64(keys), math.Ceil(requests))
	if est > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(est)
}

func (sm *sim) at(ns int64) time.Time { return base.Add(time.Duration(ns)) }

// tickAfter is a node's next tick: the interval scaled by U[0.9, 1.1), as
// reconcile's Run jitters it.
func (sm *sim) tickAfter(nd *node) int64 {
	return int64(float64(sm.sync) * (0.9 + 0.2*nd.jit.Float64()))
}

func (sm *sim) scheduleRequest(nd *node) {
	if nd.rate <= 0 {
		return
	}
	// The instant is computed in float64 and compared with the end before
	// it is converted: at a tiny rate (1e-10/s) it is past any int64, and
	// a converted overflow would queue a request at a negative time.
	var at float64
	if sm.sc.Arrivals == ArrivalsPoisson {
		at = float64(nd.next) + sm.loadRand.ExpFloat64()/nd.rate*1e9
	} else {
		at = (float64(nd.k) + nd.phase) / nd.rate * 1e9
	}
	nd.k++
	if !(at < float64(sm.end)) {
		nd.next = sm.end // no more requests on this node
		return
	}
	nd.next = int64(at)
	sm.q.push(event{at: nd.next, kind: evRequest, node: int32(nd.idx), gen: nd.gen})
}

func (sm *sim) loop(ctx context.Context) error {
	// Every node has been running: a first Step counts the live nodes.
	for _, nd := range sm.nodes {
		if nd.late {
			continue
		}
		nd.rec.Step(sm.at(0))
		// Agents start at independent instants: the first tick at a uniform
		// phase of the interval.
		sm.q.push(event{at: int64(nd.jit.Float64() * float64(sm.sync)), kind: evTick, node: int32(nd.idx)})
		sm.q.push(event{at: int64(time.Second) * int64(nd.idx+1) / int64(len(sm.nodes)), kind: evHousekeep, node: int32(nd.idx)})
		sm.scheduleRequest(nd)
	}
	if sm.sc.ProbeEvery > 0 {
		sm.q.push(event{at: int64(sm.sc.ProbeEvery) / 2, kind: evProbe})
	}
	for _, d := range sm.sc.Deaths {
		sm.q.push(event{at: int64(d.At), kind: evDeath, node: int32(d.Node)})
	}
	sm.churnSetup()
	for sm.q.len() > 0 {
		e := sm.q.pop()
		if e.at >= sm.stopAt {
			break
		}
		if e.at >= sm.end && afterEnd(e.kind) {
			continue // the settle (judge.go): no load, no churn
		}
		sm.now = e.at
		sm.clk.Set(sm.at(e.at))
		if sm.events >= sm.nextYield {
			sm.nextYield = sm.events + YieldEvery
			if err := ctx.Err(); err != nil {
				return err
			}
			if sm.sc.Yield != nil {
				if err := sm.sc.Yield(sm.events); err != nil {
					return err
				}
			}
		}
		if sm.events > sm.maxEvents {
			return fmt.Errorf("%w: more than %d events (requests, ticks and merges) at %s of virtual time", ErrTooMuchWork, sm.maxEvents, time.Duration(sm.now))
		}
		var nd *node
		if e.kind != evProbe && e.kind != evDeliver {
			nd = sm.nodes[e.node]
			if agentBound(e.kind) && e.gen != nd.gen {
				continue // for an agent that another took the place of
			}
		}
		switch e.kind {
		case evRequest:
			if nd.dead {
				continue
			}
			sm.events++
			sm.request(nd)
			sm.scheduleRequest(nd)
			sm.checkJoin(nd)
		case evTick:
			if nd.dead {
				continue
			}
			sm.events++
			sm.res.Ticks++
			nd.rec.Step(sm.at(e.at))
			sm.q.push(event{at: e.at + sm.tickAfter(nd), kind: evTick, node: e.node, gen: nd.gen})
			sm.checkJoin(nd)
		case evHousekeep:
			if !nd.dead {
				nd.eng.Step(sm.at(e.at))
				sm.sampleHeld(nd)
				sm.q.push(event{at: e.at + int64(time.Second), kind: evHousekeep, node: e.node, gen: nd.gen})
			}
		case evDeliver:
			sm.deliver(e)
		case evFlush:
			nd.flushAt = false
			if !nd.dead {
				sm.res.Flushes++
				nd.rec.Flush(sm.at(e.at))
			}
		case evRepair:
			nd.repairAt = -1
			if !nd.dead {
				sm.repair(nd)
			}
		case evAsk:
			if !nd.dead {
				sm.answer(nd, e.from, e.req)
			}
		case evState:
			if !nd.dead {
				sm.state(nd, e.from, e.st)
			}
		case evProbe:
			sm.events++
			sm.probe(int(e.node))
			sm.q.push(event{at: e.at + int64(sm.sc.ProbeEvery), kind: evProbe, node: e.node + 1})
		case evDeath:
			sm.stop(nd, false)
		case evDetect:
			sm.departed(sm.departs[e.from])
		default:
			sm.churn(e, nd)
		}
		if sm.err != nil {
			return sm.err
		}
	}
	sm.judge()
	return sm.err
}

// agentBound reports whether events of kind k are for one agent of their
// node (event.gen), and stale once another agent took its place.
func agentBound(k eventKind) bool {
	switch k {
	case evRequest, evTick, evHousekeep, evFlush, evRepair, evAsk, evState:
		return true
	}
	return false
}

// afterEnd reports whether events of kind k are dropped once the load
// ends (in the settle): the load and the churn.
func afterEnd(k eventKind) bool {
	switch k {
	case evRequest, evProbe, evDeath, evRestart, evLeave, evUp:
		return true
	}
	return false
}

// key picks the key of the next request.
func (sm *sim) key() int {
	switch {
	case len(sm.domains) == 1:
		return 0
	case sm.zipf != nil:
		return int(sm.zipf.Uint64())
	default:
		return sm.loadRand.IntN(len(sm.domains))
	}
}

// request decides one request at node nd, feeds the oracle, starts a
// convergence sample, and flushes when a key reached its drift threshold.
func (sm *sim) request(nd *node) {
	k := sm.key()
	t := sm.at(sm.now)
	if err := nd.eng.Decide(&sm.dec, t, sm.resName, sm.domains[k], 1, 1); err != nil {
		sm.err = fmt.Errorf("sim/cluster: node %d deciding %s: %w", nd.idx, sm.domains[k], err)
		return
	}
	granted := sm.dec.Granted > 0
	sm.res.Requests++
	sm.orc.decided(k, sm.now, granted)
	if !granted {
		sm.res.Denials++
	} else {
		sm.res.Grants++
		if sm.now >= sm.warm {
			nd.cnt.grants++
		}
		ms := t.UnixMilli()
		b := ms - ms%sm.width
		if last, ok := nd.own[int32(k)]; !ok || last != b {
			nd.own[int32(k)] = b
			if len(sm.nodes) > 1 && (nd.lastSmp < 0 || sm.now-nd.lastSmp >= sm.gap) {
				nd.lastSmp = sm.now
				sm.conv.add(bucketKey{origin: int32(nd.idx), key: int32(k), bucket: b}, sm.now, sm.expects(k))
			}
		}
	}
	sm.kicked(nd, t)
}

// kicked flushes nd at t when a key reached its drift threshold, or defers
// the flush to the end of the node's flush gap, as reconcile's Run does.
func (sm *sim) kicked(nd *node, t time.Time) {
	if !nd.rec.Kicked() || nd.flushAt {
		return
	}
	if at := nd.rec.FlushAt(t); at.After(t) {
		nd.flushAt = true
		sm.q.push(event{at: int64(at.Sub(base)), kind: evFlush, node: int32(nd.idx), gen: nd.gen})
		return
	}
	sm.res.Flushes++
	nd.rec.Flush(t)
}

// probe makes probe k's hit on the k-th live node, round-robin.
func (sm *sim) probe(k int) {
	nd := sm.nodes[k%len(sm.nodes)]
	if nd.dead {
		return
	}
	t := sm.at(sm.now)
	if err := nd.eng.Decide(&sm.dec, t, sm.resName, "probe-0-"+strconv.Itoa(k), 1, 1); err != nil {
		sm.err = fmt.Errorf("sim/cluster: node %d probe %d: %w", nd.idx, k, err)
		return
	}
	sm.kicked(nd, t)
}

func (sm *sim) alive(i int) bool { return !sm.nodes[i].dead }

// owners reports whether the run is in owner mode (Scenario.OwnerFrom, or
// reconcile's default, at most the cluster's size).
func (sm *sim) owners() bool {
	from := sm.sc.OwnerFrom
	if from == 0 {
		from = reconcile.DefaultOwnerFrom
	}
	return from > 0 && len(sm.nodes) >= from
}

// expects returns which nodes a sample of key k must reach: every live
// node with direct fan-out; in owner mode the live nodes that need the
// key's count, its owner and successor and the nodes that have the key
// active (a grant of it within the last window), which are the ones sums
// go to.
func (sm *sim) expects(k int) func(int) bool {
	if !sm.owners() {
		return sm.alive
	}
	owner, succ := sm.ring.Owners(reconcile.KeyHash(sm.resName, sm.domains[k]))
	window := int64(windowFor(sm.rc) / time.Millisecond)
	ms := sm.at(sm.now).UnixMilli()
	return func(i int) bool {
		nd := sm.nodes[i]
		if nd.dead {
			return false
		}
		if nd.name == owner || nd.name == succ {
			return true
		}
		b, ok := nd.own[int32(k)]
		return ok && b+window > ms
	}
}
