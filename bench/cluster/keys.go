package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/obol-dev/obol/reconcile"
)

// keys.go is the many-keys mode (-keys K): every node is offered -rate
// requests per second, each one hit of a key chosen uniformly among K keys
// of bench/keys (gcra, burst 10, 10 per second), and the run measures what
// the mesh carries: datagrams sent and received, bytes, the process's CPU
// per granted hit, merge lag and convergence. An N = 1 run at the same rate
// per node is the floor its CPU per hit is compared with.

// keysSpec is one run of the many-keys mode.
type keysSpec struct {
	n     int
	mode  string // "drift", "tick" or "alone" (n = 1)
	sync  time.Duration
	keys  int
	rate  float64       // requests offered per node per second
	warm  time.Duration // load before the measured span
	d     time.Duration // measured
	id    int           // makes the run's keys its own
	seed  uint64        // of the key choice
	drift float64
}

// keysResult is what a run of the many-keys mode measured. Rates are over
// the measured span; the datagram ratio and the losses cover the whole
// run, from the idle cluster before the load to the drain after it.
type keysResult struct {
	spec keysSpec
	// Decisions made in the measured span.
	requests, grants, denials int
	// Per node per second: sync datagrams sent (gossip Stats.PacketsOut:
	// one per datagram per peer) and received by the handler
	// (Stats.PacketsIn), drift flushes (reconcile Stats.Flushes), gossip
	// bytes sent (Stats.BytesOut: sync and push/pull).
	outNode, inNode, flushNode, bytesNode float64
	// bytesHitPeer is the sync bytes sent (Peer.BytesOut summed) per
	// granted hit per peer: ÷ grants ÷ (N−1).
	bytesHitPeer float64
	// The whole run: datagrams sent and received, received ÷ sent,
	// memberlist's "handler queue full" drops, datagrams memberlist failed
	// to send, and the datagrams the kernel dropped at the nodes' sockets
	// (-1 unknown); drain is how long after the load the receivers took to
	// catch up.
	sentRun, recvRun     uint64
	recvRatio            float64
	queueFull            int64
	sendErrors           uint64
	resyncs              uint64 // push/pulls gossip started with a peer back from a silence (Stats.Resyncs)
	asked, resent        uint64 // seqs asked for and messages sent again (Stats.Asked, Stats.Resent)
	udpDrops             int64
	drain                time.Duration
	cpu                  float64 // this process over the measured span, share of one CPU (-1 unknown)
	cpuHit               float64 // this process's CPU µs per granted hit in the measured span (-1 unknown)
	lagP50, lagP99       float64 // reconcile's merge lag, ms: the histogram bound the quantile falls under (+Inf past the last)
	lagMean              float64 // ms
	lagCount             uint64  // deltas merged in the measured span
	probes, lost         int
	p50, p99             float64 // convergence of probe hits, ms
	genLagP99, genLagMax float64 // how late the generator issued requests, ms
	liveMin              int     // the fewest live members any node saw during the load
	load                 float64 // 1-minute load average at the end of the measured span
}

// manyKeys runs the many-keys mode of o: for each size (an N = 1 floor
// first when o.ns has none), shipping mode and sync interval, one run on a
// fresh cluster; then the report.
func manyKeys(o options, stdout, stderr io.Writer) ([]keysResult, error) {
	cfg, err := keysConfig(o.drift)
	if err != nil {
		return nil, err
	}
	ns := o.ns
	if !slices.Contains(ns, 1) {
		ns = append([]int{1}, ns...)
	}
	fmt.Fprintf(stdout, "obol cluster bench, many keys: %d keys of %s (gcra burst %d, %d per second, drift %g), %g requests offered per node per second open loop (evenly paced, keys chosen uniformly), %v measured per run after %v warm-up; unsequenced %v, flush gap %v (0: the default), owner mode from %d members (0: the default); GOMAXPROCS=%d, %d CPUs\n\n",
		o.keys, resKeys, keysLimit, keysLimit, o.drift, o.rate, o.d, o.warm, o.unsequenced, o.flushGap, o.ownerFrom, runtime.GOMAXPROCS(0), runtime.NumCPU())
	var out []keysResult
	id := 0
	for _, n := range ns {
		type shape struct {
			mode string
			sync time.Duration
		}
		shapes := []shape{{"alone", o.syncs[0]}}
		if n > 1 {
			shapes = shapes[:0]
			for _, m := range o.modes {
				for _, s := range o.syncs {
					shapes = append(shapes, shape{m, s})
				}
			}
		}
		for _, sh := range shapes {
			id++
			c, err := startCluster(clusterSpec{n: n, tickOnly: sh.mode == "tick", sync: sh.sync, cfg: cfg, unsequenced: o.unsequenced, flushGap: o.flushGap, ownerFrom: o.ownerFrom,
				seed: o.seed, prefix: fmt.Sprintf("k%d-n%d-%s-%v", o.keys, n, sh.mode, sh.sync), countLog: true})
			if err != nil {
				return out, err
			}
			r, err := runKeys(c, keysSpec{n: n, mode: sh.mode, sync: sh.sync, keys: o.keys, rate: o.rate,
				warm: o.warm, d: o.d, id: id, seed: o.seed, drift: o.drift})
			c.close()
			if err != nil {
				return out, fmt.Errorf("n=%d %s sync=%v: %w", n, sh.mode, sh.sync, err)
			}
			fmt.Fprintln(stderr, r.line())
			out = append(out, r)
		}
	}
	reportKeys(stdout, out)
	return out, nil
}

// meshCounters are a cluster's counters at one instant, summed over its
// nodes.
type meshCounters struct {
	sent, recv       uint64 // sync datagrams
	bytes, syncBytes uint64 // gossip bytes sent: all, sync only
	flushes          uint64
	sendErrors       uint64
	resyncs          uint64
	asked, resent    uint64
	queueFull        int64
	// The nodes' UDP sockets: bytes waiting in their receive queues,
	// datagrams the kernel dropped for them; sockOK false: unknown.
	sockQueued, sockDrops int64
	sockOK                bool
	lag                   reconcile.Histogram
	lagCount, lagSumMs    uint64
}

// counters reads c's counters. With sentFirst every node's sent count is
// read before any received count, else after: read so at the start of a
// span and the other way at its end, a datagram counted received in the
// span was counted sent in it, unless it was already in flight when the
// span began.
func counters(c *cluster, sentFirst bool) meshCounters {
	var m meshCounters
	m.lag.Counts = make([]uint64, len(reconcile.LagBoundsMs))
	readSent := func() {
		for _, nd := range c.nodes {
			st := nd.gn.Stats()
			m.sent += st.PacketsOut
			m.bytes += st.BytesOut
			m.sendErrors += st.SendErrors
			m.resyncs += st.Resyncs
			m.asked += st.Asked
			m.resent += st.Resent
			for _, p := range nd.gn.Peers() {
				m.syncBytes += p.BytesOut
			}
			rs := nd.rec.Stats()
			m.flushes += rs.Flushes
		}
	}
	ports := make(map[int]bool, len(c.nodes))
	for _, nd := range c.nodes {
		if _, p, err := net.SplitHostPort(nd.gn.Addr()); err == nil {
			if v, err := strconv.Atoi(p); err == nil {
				ports[v] = true
			}
		}
	}
	readRecv := func() {
		m.sockQueued, m.sockDrops, m.sockOK = udpSockets(ports)
		for _, nd := range c.nodes {
			m.recv += nd.gn.Stats().PacketsIn
			if nd.queueFull != nil {
				m.queueFull += nd.queueFull.Load()
			}
			h := nd.rec.Stats().MergeLag
			for i, v := range h.Counts {
				m.lag.Counts[i] += v
			}
			m.lagCount += h.Count
			m.lagSumMs += uint64(h.SumMs)
		}
	}
	if sentFirst {
		readSent()
		readRecv()
	} else {
		readRecv()
		readSent()
	}
	return m
}

// lagQuantile returns the bound (ms) of the first bucket of the cumulative
// histogram counts (over reconcile.LagBoundsMs, total observations) that
// holds the q-quantile by nearest rank, +Inf past the last bound, NaN with
// no observation.
func lagQuantile(counts []uint64, total uint64, q float64) float64 {
	if total == 0 {
		return math.NaN()
	}
	rank := uint64(math.Ceil(q * float64(total)))
	for i, c := range counts {
		if c >= rank {
			return float64(reconcile.LagBoundsMs[i])
		}
	}
	return math.Inf(1)
}

// runKeys offers the load of s to c and measures it.
func runKeys(c *cluster, s keysSpec) (keysResult, error) {
	out := keysResult{spec: s}
	names := make([]string, s.keys)
	for j := range names {
		names[j] = fmt.Sprintf("k%d-%d", s.id, j)
	}
	for _, nd := range c.nodes {
		nd.tap.take()
	}
	// The cluster is idle: nothing in flight.
	base := counters(c, true)
	start := time.Now().Add(100 * time.Millisecond)
	from := start.Add(s.warm)
	end := from.Add(s.d)

	recs := make([][]decision, s.n)
	lates := make([][]int64, s.n)
	errs := make([]error, s.n+1)
	var probes []probe
	var wg sync.WaitGroup
	for i, nd := range c.nodes {
		phase := float64(i) / float64(s.n)
		rng := rand.New(rand.NewPCG(s.seed, uint64(s.id)<<32|uint64(i)))
		pick := func() string { return names[rng.IntN(len(names))] }
		wg.Go(func() { recs[i], lates[i], errs[i] = drive(nd.eng, i, resKeys, pick, s.rate, phase, start, end) })
	}
	if s.n > 1 {
		wg.Go(func() { probes, errs[s.n] = probeLoop(c, resKeys, s.id, start, end) })
	}
	// The fewest live members any node sees: an overloaded process can
	// have its nodes declare each other dead.
	liveMin := s.n
	wg.Go(func() {
		for time.Now().Before(end) {
			time.Sleep(100 * time.Millisecond)
			for _, nd := range c.nodes {
				liveMin = min(liveMin, nd.gn.Live())
			}
		}
	})
	time.Sleep(time.Until(from))
	m0, h0 := counters(c, true), sampleHost()
	time.Sleep(time.Until(end))
	h1, m1 := sampleHost(), counters(c, false)
	out.load = loadAvg()
	wg.Wait()
	out.liveMin = liveMin
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	seen := c.probeSightings(s.sync)
	fin := drain(c)
	out.drain = time.Since(end)

	fromNs, endNs := from.UnixNano(), end.UnixNano()
	var late []int64
	for i := range recs {
		for _, d := range recs[i] {
			if d.at < fromNs || d.at >= endNs {
				continue
			}
			out.requests++
			if d.granted {
				out.grants++
			} else {
				out.denials++
			}
		}
		late = append(late, lates[i]...)
	}
	slices.Sort(late)
	if len(late) > 0 {
		out.genLagP99 = float64(late[int(math.Ceil(0.99*float64(len(late))))-1]) / 1e6
		out.genLagMax = float64(late[len(late)-1]) / 1e6
	}

	perNode := func(a, b uint64) float64 { return float64(b-a) / float64(s.n) / s.d.Seconds() }
	out.outNode = perNode(m0.sent, m1.sent)
	out.inNode = perNode(m0.recv, m1.recv)
	out.flushNode = perNode(m0.flushes, m1.flushes)
	out.bytesNode = perNode(m0.bytes, m1.bytes)
	out.bytesHitPeer = math.NaN()
	if s.n > 1 && out.grants > 0 {
		out.bytesHitPeer = float64(m1.syncBytes-m0.syncBytes) / float64(out.grants) / float64(s.n-1)
	}

	out.sentRun, out.recvRun = fin.sent-base.sent, fin.recv-base.recv
	out.recvRatio = math.NaN()
	if out.sentRun > 0 {
		out.recvRatio = float64(out.recvRun) / float64(out.sentRun)
	}
	out.queueFull = fin.queueFull - base.queueFull
	out.sendErrors = fin.sendErrors - base.sendErrors
	out.resyncs = fin.resyncs - base.resyncs
	out.asked, out.resent = fin.asked-base.asked, fin.resent-base.resent
	out.udpDrops = -1
	if base.sockOK && fin.sockOK {
		out.udpDrops = fin.sockDrops - base.sockDrops
	}

	out.cpu, out.cpuHit = -1, -1
	if h0.cpu >= 0 && h1.cpu >= 0 {
		used := h1.cpu - h0.cpu
		out.cpu = float64(used) / float64(h1.at.Sub(h0.at))
		if out.grants > 0 {
			out.cpuHit = float64(used) / float64(time.Microsecond) / float64(out.grants)
		}
	}

	counts := make([]uint64, len(m1.lag.Counts))
	for i := range counts {
		counts[i] = m1.lag.Counts[i] - m0.lag.Counts[i]
	}
	out.lagCount = m1.lagCount - m0.lagCount
	out.lagP50 = lagQuantile(counts, out.lagCount, 0.50)
	out.lagP99 = lagQuantile(counts, out.lagCount, 0.99)
	out.lagMean = math.NaN()
	if out.lagCount > 0 {
		out.lagMean = float64(m1.lagSumMs-m0.lagSumMs) / float64(out.lagCount)
	}

	lags, lost := convergence(probes, seen)
	out.probes, out.lost = len(probes), lost
	out.p50, out.p99 = quantile(lags, 0.50), quantile(lags, 0.99)
	return out, nil
}

// maxDrain bounds how long drain waits.
const maxDrain = 30 * time.Second

// drain waits, up to maxDrain, until the receivers have caught up with
// what was sent: twice in a row, over 200 ms, the nodes' sockets held
// nothing and their handlers received no more datagrams than were sent
// meanwhile (plus one per pair of nodes), so no backlog was being worked
// off. It returns the counters then, the received read first.
func drain(c *cluster) meshCounters {
	n := uint64(len(c.nodes))
	prev := counters(c, false)
	deadline := time.Now().Add(maxDrain)
	for calm := 0; calm < 2 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		cur := counters(c, false)
		if cur.recv-prev.recv <= cur.sent-prev.sent+n*(n-1) && (!cur.sockOK || cur.sockQueued == 0) {
			calm++
		} else {
			calm = 0
		}
		prev = cur
	}
	return prev
}

// line is a run's progress line.
func (r keysResult) line() string {
	s := r.spec
	return fmt.Sprintf("keys n=%d %s sync=%v: %.0f hits/s/node, datagrams %.0f out %.0f in /s/node, received ÷ sent %s, queue full %d, %s µs CPU/hit, load %s",
		s.n, s.mode, s.sync, float64(r.grants)/float64(s.n)/s.d.Seconds(), r.outNode, r.inNode, ratio(r.recvRatio), r.queueFull,
		known(r.cpuHit, "%.1f"), known(r.load, "%.1f"))
}

// floorHit returns the CPU µs per hit of the N = 1 run in rs, or -1.
func floorHit(rs []keysResult) float64 {
	for _, r := range rs {
		if r.spec.n == 1 {
			return r.cpuHit
		}
	}
	return -1
}

// clusterHit is r's CPU per hit above the floor f, or NaN when either is
// unknown or r is the floor.
func clusterHit(r keysResult, f float64) float64 {
	if r.spec.n == 1 || r.cpuHit < 0 || f < 0 {
		return math.NaN()
	}
	return r.cpuHit - f
}

// lagBound formats a merge-lag quantile (a histogram bound, ms) for the
// RESULT line: "25", or ">5000" past the last bound.
func lagBound(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return ">" + strconv.FormatInt(reconcile.LagBoundsMs[len(reconcile.LagBoundsMs)-1], 10)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// lagMs formats a merge-lag quantile for the table: "≤25", or ">5000".
func lagMs(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 1) {
		return lagBound(v)
	}
	return "≤" + lagBound(v)
}

func num(v float64, prec int) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// column is one figure of a run: its table heading, its RESULT key, and
// its value in each (they differ only for the merge-lag bounds).
type column struct{ head, key, cell, value string }

// columns returns r's figures; floor is the N = 1 run's CPU µs per hit.
func (r keysResult) columns(floor float64) []column {
	s := r.spec
	lost := "-"
	if r.udpDrops >= 0 {
		lost = strconv.FormatInt(int64(r.sentRun)-int64(r.recvRun)-r.udpDrops-r.queueFull, 10)
	}
	c := func(head, key, v string) column { return column{head, key, v, v} }
	return []column{
		c("n", "n", strconv.Itoa(s.n)),
		c("shipping", "shipping", s.mode),
		c("sync", "sync", s.sync.String()),
		c("hits/s/node", "hits_per_node_s", num(float64(r.grants)/float64(s.n)/s.d.Seconds(), 0)),
		c("denied", "denied", strconv.Itoa(r.denials)),
		c("dgrams out/s/node", "dgrams_out_per_node_s", num(r.outNode, 0)),
		c("dgrams in/s/node", "dgrams_in_per_node_s", num(r.inNode, 0)),
		c("sent", "sent", strconv.FormatUint(r.sentRun, 10)),
		c("received ÷ sent", "received_ratio", ratio(r.recvRatio)),
		c("udp drops", "udp_drops", known(float64(r.udpDrops), "%.0f")),
		c("queue full", "queue_full", strconv.FormatInt(r.queueFull, 10)),
		c("lost elsewhere", "lost_elsewhere", lost),
		c("send errors", "send_errors", strconv.FormatUint(r.sendErrors, 10)),
		c("resyncs", "resyncs", strconv.FormatUint(r.resyncs, 10)),
		c("asked", "asked", strconv.FormatUint(r.asked, 10)),
		c("resent", "resent", strconv.FormatUint(r.resent, 10)),
		c("drain s", "drain_s", num(r.drain.Seconds(), 1)),
		c("flushes/s/node", "flushes_per_node_s", num(r.flushNode, 0)),
		c("B/s/node", "bytes_per_node_s", num(r.bytesNode, 0)),
		c("B/hit/peer", "bytes_per_hit_peer", num(r.bytesHitPeer, 1)),
		c("cpu µs/hit", "cpu_us_per_hit", known(r.cpuHit, "%.1f")),
		c("cluster µs/hit", "cluster_cpu_us_per_hit", num(clusterHit(r, floor), 1)),
		{"lag p50 ms", "lag_p50_ms", lagMs(r.lagP50), lagBound(r.lagP50)},
		{"lag p99 ms", "lag_p99_ms", lagMs(r.lagP99), lagBound(r.lagP99)},
		c("conv p50 ms", "converge_p50_ms", ms(r.p50)),
		c("conv p99 ms", "converge_p99_ms", ms(r.p99)),
		c("late p99 ms", "late_p99_ms", num(r.genLagP99, 1)),
		c("live min", "live_min", strconv.Itoa(r.liveMin)),
		c("cpu %", "cpu_pct", known(r.cpu*100, "%.0f")),
		c("load", "load", known(r.load, "%.1f")),
	}
}

// reportKeys prints the many-keys table, its definitions and, last, one
// RESULT line per run of more than one node (the floor's alone when no
// other ran).
func reportKeys(w io.Writer, rs []keysResult) {
	floor := floorHit(rs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i, r := range rs {
		cols := r.columns(floor)
		if i == 0 {
			for _, c := range cols {
				fmt.Fprint(tw, c.head+"\t")
			}
			fmt.Fprintln(tw)
		}
		for _, c := range cols {
			fmt.Fprint(tw, c.cell+"\t")
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nhits/s/node: granted hits per node per second; denied: denials (all in the measured span, as every rate here). dgrams out: sync datagrams sent per node per second,")
	fmt.Fprintln(w, "one per datagram per peer (gossip Stats.PacketsOut); dgrams in: those that reached the receiving node's handler (Stats.PacketsIn). sent: all datagrams sent over the")
	fmt.Fprintln(w, "whole run, from the idle cluster before the load until the receivers had caught up after it (drain: that long after the load, at most 30 s); received ÷ sent: of")
	fmt.Fprintln(w, "those, the share that reached a handler. The rest, in that span: udp drops: datagrams the kernel dropped at the nodes' sockets, receive buffer full (/proc/net/udp;")
	fmt.Fprintln(w, "memberlist's probes included); queue full: datagrams memberlist dropped because HandoffQueueDepth messages waited for its handler (its \"handler queue full\" log")
	fmt.Fprintln(w, "lines); lost elsewhere: sent − received − udp drops − queue full (what was still queued when the drain gave up; below 0 when the udp drops counted memberlist's")
	fmt.Fprintln(w, "own packets). send errors: datagrams memberlist failed to send (Stats.SendErrors); resyncs: push/pulls (full snapshots both ways) gossip started with a peer")
	fmt.Fprintln(w, "heard from again after 2.5 s of silence, back from the dead, or with a gap it could not fill (Stats.Resyncs); asked: seqs the receivers found missing and asked")
	fmt.Fprintln(w, "for again (Stats.Asked); resent: messages sent again on those asks (Stats.Resent). Both are over the whole run.")
	fmt.Fprintln(w, "flushes: drift flushes sent (reconcile Stats.Flushes). B/s/node: gossip bytes sent (sync + push/pull); B/hit/peer: sync bytes sent ÷ granted hits ÷ (N−1).")
	fmt.Fprintln(w, "cpu µs/hit: this process's CPU time (user + system) in the measured span ÷ granted hits; cluster µs/hit: that minus the N=1 run's (the floor: engine, load and")
	fmt.Fprintln(w, "harness with no gossip). lag: reconcile's merge lag (Stats.MergeLag: per merged delta, the age of its newest bucket on arrival), as the histogram bound the quantile")
	fmt.Fprintln(w, "falls under; conv: a probe hit on a fresh key until every other node's engine counts it (never: some node had not, 2 sync intervals after the load). late: how late")
	fmt.Fprintln(w, "the generator issued its requests. live min: the fewest live members any node saw during the load. cpu: this process, % of one CPU; load: 1-min load average.")
	fmt.Fprintln(w)
	printed := false
	for _, r := range rs {
		if r.spec.n > 1 {
			fmt.Fprintln(w, r.result(floor))
			printed = true
		}
	}
	if !printed && len(rs) > 0 {
		fmt.Fprintln(w, rs[len(rs)-1].result(floor))
	}
}

// result is r's RESULT line: the mode's parameters, then every column.
func (r keysResult) result(floor float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "RESULT keys=%d rate=%g drift=%g", r.spec.keys, r.spec.rate, r.spec.drift)
	for _, c := range r.columns(floor) {
		fmt.Fprintf(&b, " %s=%s", c.key, c.value)
	}
	return b.String()
}
