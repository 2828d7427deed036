package main

import (
	"context"
	"math"
	"os"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// phase.go measures one phase: a warm-up, then a measured interval over which
// the server's CPU time is read from /proc/PID/stat at both ends.

// phaseResult is one row of the table.
type phaseResult struct {
	server      string // "agent" or "floor"
	sc          scenario
	rate        float64 // open-loop target (requests/s), 0 for closed loop
	note        string  // shown after the scenario, e.g. "@50% max"
	unavailable string  // why the phase was not measured, or ""
	elapsed     time.Duration
	hist        *hdrhistogram.Histogram
	counts
	cpuTicks uint64 // the server's CPU time over the interval
	cpuOK    bool
	genTicks uint64 // the generator's own CPU time over the interval
	genOK    bool
	hz       int64 // clock ticks per second
}

// merge adds o, another measurement of the same server and scenario, to
// p: the intervals, the counts, the CPU times (known only when both are)
// and the latencies.
func (p *phaseResult) merge(o *phaseResult) {
	p.elapsed += o.elapsed
	p.counts.add(&o.counts)
	p.cpuTicks, p.cpuOK = p.cpuTicks+o.cpuTicks, p.cpuOK && o.cpuOK
	p.genTicks, p.genOK = p.genTicks+o.genTicks, p.genOK && o.genOK
	switch {
	case p.hist == nil:
		p.hist = o.hist
	case o.hist != nil:
		p.hist.Merge(o.hist)
	}
}

// rps is the requests answered per second over the measured interval.
func (p *phaseResult) rps() float64 {
	if p.elapsed <= 0 {
		return math.NaN()
	}
	return float64(p.requests) / p.elapsed.Seconds()
}

// dps is the decisions per second: requests × items per request.
func (p *phaseResult) dps() float64 { return p.rps() * float64(p.sc.decisions()) }

// cpuPerRequest is the server's CPU time per answered request, in µs.
func (p *phaseResult) cpuPerRequest() float64 {
	if !p.cpuOK || p.requests == 0 {
		return math.NaN()
	}
	return ticksToMicros(p.cpuTicks, p.hz) / float64(p.requests)
}

// cpuPerDecision is the server's CPU time per decision, in µs.
func (p *phaseResult) cpuPerDecision() float64 {
	return p.cpuPerRequest() / float64(p.sc.decisions())
}

// genPerRequest is the generator's CPU time per answered request, in µs.
func (p *phaseResult) genPerRequest() float64 {
	if !p.genOK || p.requests == 0 {
		return math.NaN()
	}
	return ticksToMicros(p.genTicks, p.hz) / float64(p.requests)
}

// quantile is a latency quantile in µs (q in 0..100), NaN with no samples.
func (p *phaseResult) quantile(q float64) float64 {
	if p.hist == nil || p.hist.TotalCount() == 0 {
		return math.NaN()
	}
	return float64(p.hist.ValueAtQuantile(q))
}

// grantShare is the share of granted decisions among the decoded replies.
func (p *phaseResult) grantShare() float64 {
	if p.sampled == 0 {
		return math.NaN()
	}
	return float64(p.granted) / float64(p.sampled)
}

func ticksToMicros(ticks uint64, hz int64) float64 {
	return float64(ticks) * 1e6 / float64(hz)
}

// phaseTiming is how long a phase warms up and then measures.
type phaseTiming struct {
	warmup, dur time.Duration
	hz          int64
}

// runPhase runs spec for warm-up + measured interval and measures it. The
// load stops by itself at the end of the interval (or when ctx is done).
func runPhase(ctx context.Context, spec loadSpec, t phaseTiming) (phaseResult, error) {
	res := phaseResult{server: spec.srv.name, sc: spec.sc, rate: spec.rate, hz: t.hz}
	start := time.Now()
	from := start.Add(t.warmup)
	end := from.Add(t.dur)
	l, err := startLoad(ctx, spec, start, end)
	if err != nil {
		return res, err
	}
	_ = benchkit.SleepUntil(ctx, from)
	l.collect() // drop the warm-up
	cpu0, cpuErr0 := benchkit.CPUTicks(spec.srv.pid)
	gen0, genErr0 := benchkit.CPUTicks(os.Getpid())
	t0 := time.Now()

	_ = benchkit.SleepUntil(ctx, end)
	res.hist, res.counts = l.collect()
	cpu1, cpuErr1 := benchkit.CPUTicks(spec.srv.pid)
	gen1, genErr1 := benchkit.CPUTicks(os.Getpid())
	res.elapsed = time.Since(t0)
	l.wait()

	if cpuErr0 == nil && cpuErr1 == nil && cpu1 >= cpu0 {
		res.cpuTicks, res.cpuOK = cpu1-cpu0, true
	}
	if genErr0 == nil && genErr1 == nil && gen1 >= gen0 {
		res.genTicks, res.genOK = gen1-gen0, true
	}
	return res, ctx.Err()
}
