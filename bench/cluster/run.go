package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/obol-dev/obol/local"
)

// run.go drives one load run on a started cluster and measures node death.

// loadFactor is the offered load as a multiple of the limit.
const loadFactor = 5

// probeEvery is how often a convergence probe is made.
const probeEvery = 100 * time.Millisecond

// runSpec is one load run.
type runSpec struct {
	n      int
	kind   string // "gcra" or "tiers"
	spread string // "even" or "skew"
	mode   string // "drift", "tick" or "alone" (n = 1)
	sync   time.Duration
	limit  int
	warm   time.Duration // load before the measured windows start
	d      time.Duration // measured
	id     int           // makes the run's domains its own
}

func (s runSpec) resource() string {
	if s.kind == "gcra" {
		return resGCRA
	}
	return resTiers
}

// rates returns each node's offered requests per second: 5·L in all, evenly
// spread, or 80% on node 0 and the rest evenly over the others.
func (s runSpec) rates() []float64 {
	total := loadFactor * float64(s.limit)
	r := make([]float64, s.n)
	for i := range r {
		switch {
		case s.spread != "skew" || s.n == 1:
			r[i] = total / float64(s.n)
		case i == 0:
			r[i] = 0.8 * total
		default:
			r[i] = 0.2 * total / float64(s.n-1)
		}
	}
	return r
}

// runResult is what a run measured.
type runResult struct {
	spec                 runSpec
	windows              []int   // grants per aligned 1 s window after warm-up
	meanL, maxL          float64 // window grants ÷ L
	slideL               float64 // the most grants in any 1 s window after warm-up ÷ L
	requests, grants     int     // the whole run, warm-up included
	falseDen, strictDen  int     // see falseDenialsGCRA
	probes, lost         int
	p50, p99             float64 // convergence, ms (+Inf: a probe was lost)
	bytesMean, bytesMax  float64 // gossip bytes sent per node per second (mean, busiest)
	genLagP99, genLagMax float64 // how late the generator issued requests, ms
	// The host during the measured span: this process's CPU use (share of
	// one CPU), the 1-minute load average at its end, UDP datagrams the
	// kernel dropped (host-wide), and the longest stall in each window.
	cpu, load float64
	udpDrops  int64
	stalls    []time.Duration
	explain   []string
}

// runLoad offers the load of s to c and measures it.
func runLoad(c *cluster, s runSpec) (runResult, error) {
	out := runResult{spec: s}
	res, dom := s.resource(), fmt.Sprintf("load-%d", s.id)
	for _, n := range c.nodes {
		n.tap.take()
	}
	start := time.Now().Add(100 * time.Millisecond)
	from := start.Add(s.warm)
	end := from.Add(s.d)
	rates := s.rates()

	recs := make([][]decision, s.n)
	lates := make([][]int64, s.n)
	errs := make([]error, s.n+1)
	var probes []probe
	var wg sync.WaitGroup
	for i, nd := range c.nodes {
		// Stagger the nodes' schedules across one interval of their own.
		phase := float64(i) / float64(s.n)
		wg.Go(func() {
			recs[i], lates[i], errs[i] = drive(nd.eng, i, res, func() string { return dom }, rates[i], phase, start, end)
		})
	}
	if s.n > 1 {
		wg.Go(func() { probes, errs[s.n] = probeLoop(c, res, s.id, start, end) })
	}
	time.Sleep(time.Until(from))
	h0, watch := sampleHost(), watchStalls()
	b0 := make([]uint64, s.n)
	for i, nd := range c.nodes {
		b0[i] = nd.gn.Stats().BytesOut
	}
	time.Sleep(time.Until(end))
	h1, stalls := sampleHost(), watch.done()
	out.load = loadAvg()
	out.cpu, out.udpDrops = -1, -1
	if h0.cpu >= 0 && h1.cpu >= 0 {
		out.cpu = float64(h1.cpu-h0.cpu) / float64(h1.at.Sub(h0.at))
	}
	if h0.udpDrop >= 0 && h1.udpDrop >= 0 {
		out.udpDrops = h1.udpDrop - h0.udpDrop
	}
	var bsum, bmax float64
	for i, nd := range c.nodes {
		b := float64(nd.gn.Stats().BytesOut-b0[i]) / s.d.Seconds()
		bsum += b
		bmax = max(bmax, b)
	}
	out.bytesMean, out.bytesMax = bsum/float64(s.n), bmax
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	seen := c.probeSightings(s.sync)

	var grants []int64
	var denials []decision
	var late []int64
	for i := range recs {
		out.requests += len(recs[i])
		for _, d := range recs[i] {
			if d.granted {
				grants = append(grants, d.at)
			} else {
				denials = append(denials, d)
			}
		}
		late = append(late, lates[i]...)
	}
	slices.Sort(grants)
	slices.Sort(late)
	out.grants = len(grants)
	if len(late) > 0 {
		out.genLagP99 = float64(late[int(math.Ceil(0.99*float64(len(late))))-1]) / 1e6
		out.genLagMax = float64(late[len(late)-1]) / 1e6
	}
	L := float64(s.limit)
	out.windows = windowCounts(grants, from.UnixNano(), end.UnixNano(), int64(time.Second))
	out.meanL, out.maxL = meanMax(out.windows, L)
	out.stalls = stallsPer(stalls, from.UnixNano(), int64(time.Second), len(out.windows))
	out.slideL = float64(slidingMax(grants, from.UnixNano(), end.UnixNano(), int64(time.Second))) / L
	if s.kind == "gcra" {
		ei := int64(time.Second) / int64(s.limit)
		out.falseDen, out.strictDen = falseDenialsGCRA(grants, denials, ei, ei*int64(s.limit))
		if out.falseDen > 0 {
			out.explain = explainGCRA(grants, denials, ei, ei*int64(s.limit), start.UnixNano(), 8)
		}
	} else {
		out.falseDen, out.strictDen = falseDenialsTiers(grants, denials, s.limit, 1000)
		if out.falseDen > 0 {
			out.explain = explainTiers(grants, denials, s.limit, 1000, start.UnixNano(), 8)
		}
	}
	lags, lost := convergence(probes, seen)
	out.probes, out.lost = len(probes), lost
	out.p50, out.p99 = quantile(lags, 0.50), quantile(lags, 0.99)
	return out, nil
}

// drive offers rate requests per second of resource to e from start until
// end, each for one hit of the domain that domain returns (called once per
// request, on drive's goroutine), open loop and evenly paced: request k is
// due at start + (k + phase)/rate, and a goroutine that wakes late issues
// every request that came due at once, so the offered count never depends
// on how fast the engine answers. Each decision's instant is the clock read
// just before it. It returns the decisions and how late each was issued
// (ns).
func drive(e *local.Engine, node int, resource string, domain func() string, rate, phase float64, start, end time.Time) ([]decision, []int64, error) {
	iv := float64(time.Second) / rate
	total := int(end.Sub(start).Seconds()*rate) + 1
	recs := make([]decision, 0, total)
	late := make([]int64, 0, total)
	for k := 0; ; k++ {
		due := start.Add(time.Duration((float64(k) + phase) * iv))
		if !due.Before(end) {
			return recs, late, nil
		}
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		dom := domain()
		t := time.Now()
		d, err := e.Request(t, resource, dom, 1, 1)
		if err != nil {
			return recs, late, fmt.Errorf("request %s/%s: %w", resource, dom, err)
		}
		recs = append(recs, decision{at: t.UnixNano(), done: time.Now().UnixNano(), granted: d.Granted > 0, node: node, retry: int64(d.RetryAfter)})
		late = append(late, max(0, int64(t.Sub(due))))
	}
}

// probeLoop makes one probe hit every probeEvery, round-robin over the
// nodes, each on a domain of its own, from start until end.
func probeLoop(c *cluster, resource string, id int, start, end time.Time) ([]probe, error) {
	var out []probe
	for k := 0; ; k++ {
		due := start.Add(probeEvery/2 + time.Duration(k)*probeEvery)
		if !due.Before(end) {
			return out, nil
		}
		time.Sleep(time.Until(due))
		p := probe{node: k % len(c.nodes), domain: fmt.Sprintf("%s%d-%d", probePrefix, id, k)}
		t := time.Now()
		d, err := c.nodes[p.node].eng.Request(t, resource, p.domain, 1, 1)
		if err != nil {
			return out, fmt.Errorf("probe: %w", err)
		}
		if d.Granted != 1 {
			return out, fmt.Errorf("probe %s on node %d was refused", p.domain, p.node)
		}
		p.at = t.UnixNano()
		out = append(out, p)
	}
}

// deathResult is what the node-death measurement found.
type deathResult struct {
	n, holds int
	// From memberlist's config: the suspicion timeout (min, and the
	// Lifeguard max it starts from when confirmations are expected) and
	// the expected detection: the wait until a survivor first probes the
	// dead node, one failed probe round, and the minimum.
	suspMin, suspMax, expected time.Duration
	confirm                    int // confirmations expected before the minimum applies
	// Measured from the kill: the last survivor's NodeGone, and the last
	// survivor's holds of the victim reaching zero; obol is the most any
	// survivor took from its NodeGone to its holds at zero.
	detect, free, obol time.Duration
}

// deathHolds is how many copies the victim holds.
const deathHolds = 10

// death kills c's last node while it holds copies, without leaving, and
// measures how long every other node keeps counting them.
func death(c *cluster) (deathResult, error) {
	n := len(c.nodes)
	victim, survivors := c.nodes[n-1], c.nodes[:n-1]
	out := deathResult{n: n, holds: deathHolds}
	ml := c.ml
	scale := max(1, math.Log10(float64(n)))
	// memberlist's suspicionTimeout, to its millisecond precision.
	out.suspMin = time.Duration(ml.suspicionMult) * time.Duration(scale*1000) * ml.probeInterval / 1000
	out.confirm = ml.suspicionMult - 2
	if n-2 < out.confirm {
		out.confirm = 0
	}
	out.suspMax = out.suspMin
	if out.confirm > 0 {
		out.suspMax = time.Duration(ml.maxMult) * out.suspMin
	}
	// Each survivor probes one member per interval, round-robin over the
	// N−1 others: the first of N−1 survivors reaches the dead node after
	// about (N−1)/N of an interval.
	out.expected = ml.probeInterval*time.Duration(n-1)/time.Duration(n) + ml.probeInterval + out.suspMin

	now := time.Now()
	sid, err := victim.eng.OpenSession(now, time.Hour)
	if err != nil {
		return out, err
	}
	r, err := victim.eng.Reserve(now, resCopies, "held", deathHolds, deathHolds, sid)
	if err != nil {
		return out, err
	}
	if r.Granted != deathHolds {
		return out, fmt.Errorf("the victim was granted %d copies, want %d", r.Granted, deathHolds)
	}
	holds := func(nd *node) int {
		ks, err := nd.eng.State(time.Now(), resCopies, "held")
		if err != nil {
			panic(err) // a configured copies resource cannot fail
		}
		return ks.Holds
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range survivors {
		for holds(s) != deathHolds {
			if time.Now().After(deadline) {
				return out, fmt.Errorf("%s never counted the victim's holds", s.name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	base := make([]uint64, len(survivors))
	for i, s := range survivors {
		base[i] = s.rec.Stats().NodesGone
	}

	t0 := time.Now()
	victim.stop()
	gone := make([]time.Duration, len(survivors))
	freed := make([]time.Duration, len(survivors))
	left := 2 * len(survivors)
	deadline = t0.Add(90 * time.Second)
	for left > 0 {
		if time.Now().After(deadline) {
			return out, fmt.Errorf("after %v the survivors still count the dead node's copies", time.Since(t0).Round(time.Second))
		}
		time.Sleep(2 * time.Millisecond)
		for i, s := range survivors {
			el := time.Since(t0)
			if gone[i] == 0 && s.rec.Stats().NodesGone > base[i] {
				gone[i] = el
				left--
			}
			if freed[i] == 0 && holds(s) == 0 {
				freed[i] = el
				left--
			}
		}
	}
	for i := range survivors {
		out.detect = max(out.detect, gone[i])
		out.free = max(out.free, freed[i])
		out.obol = max(out.obol, freed[i]-gone[i])
	}
	return out, nil
}
