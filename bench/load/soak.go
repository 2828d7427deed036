package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// soak.go runs /v1/request JSON for a long time at a fixed fraction of the
// agent's measured maximum and watches the agent's memory, goroutines (or
// threads) and errors.

// soakFraction is the share of the measured maximum the soak runs at.
const soakFraction = 0.8

// soakMaxGrowth is the most the agent's RSS may grow from the first report
// to the end.
const soakMaxGrowth = 0.20

// soakSample is one report of the soak.
type soakSample struct {
	at         time.Duration // since the soak began
	rss        benchkit.Status
	statusErr  error
	goroutines int64
	hasGor     bool
}

// soakResult is the soak's verdict.
type soakResult struct {
	rate     float64
	samples  []soakSample
	requests int64
	errors   int64
	firstErr string
	growth   float64 // RSS growth from the first report to the end
	pass     bool
}

// growthOf returns the RSS growth from the first report after the start
// (the start itself when there is none) to the end.
func growthOf(samples []soakSample) (first, last soakSample, growth float64) {
	if len(samples) == 0 {
		return
	}
	first, last = samples[0], samples[len(samples)-1]
	if len(samples) > 2 {
		first = samples[1]
	}
	if first.rss.RSSKiB > 0 {
		growth = float64(last.rss.RSSKiB-first.rss.RSSKiB) / float64(first.rss.RSSKiB)
	}
	return first, last, growth
}

// runSoak measures the maximum briefly (unless -rate is given), then runs
// open loop at 80% of it for -soak, reporting every -soak-every.
func (b *bench) runSoak(ctx context.Context) (*runReport, error) {
	sc := requestJSON
	bodies, err := b.bodies(sc)
	if err != nil {
		return nil, err
	}
	if u, err := probe(b.agent, b.o.tcp, sc, bodies[0]); u != "" || err != nil {
		return nil, fmt.Errorf("the agent does not serve %s: %s%v", sc, u, err)
	}
	rate := b.o.rate
	if rate <= 0 {
		t := phaseTiming{warmup: min(b.o.warmup, time.Second), dur: min(b.o.dur, 3*time.Second), hz: b.hz}
		fmt.Fprintf(b.stderr, "measuring the agent's max: %s, closed loop, %s + %s…\n", sc, t.warmup, t.dur)
		top, err := runPhase(ctx, loadSpec{srv: b.agent, tcp: b.o.tcp, sc: sc, bodies: bodies, conns: b.o.conns, seed: b.o.seed}, t)
		if err != nil {
			return nil, err
		}
		if top.errors > 0 || top.requests == 0 {
			return nil, fmt.Errorf("measuring the max: %d requests, %d errors (%s)", top.requests, top.errors, top.firstErr)
		}
		rate = soakFraction * top.rps()
		fmt.Fprintf(b.stdout, "max %s: %.0f req/s closed loop; soaking at %.0f%% of it\n", sc, top.rps(), 100*soakFraction)
	}
	gor := "not served (no go_goroutines in GET /metrics): threads from /proc/PID/status instead"
	if _, ok := goroutines(b.agent); ok {
		gor = "go_goroutines from GET /metrics"
	}
	fmt.Fprintf(b.stdout, "soak: %s open loop at %.0f req/s for %s, a report every %s (agent goroutines: %s)\n",
		sc, rate, b.o.soak, b.o.soakEvery, gor)

	res := &soakResult{rate: rate}
	sample := func(at time.Duration) soakSample {
		s := soakSample{at: at}
		s.rss, s.statusErr = benchkit.ReadStatus(b.agent.pid)
		s.goroutines, s.hasGor = goroutines(b.agent)
		return s
	}
	start := time.Now()
	end := start.Add(b.o.soak)
	s0 := sample(0)
	res.samples = append(res.samples, s0)
	writeSoakLine(b.stdout, s0, b.o.soakEvery, nil)
	l, err := startLoad(ctx, loadSpec{srv: b.agent, tcp: b.o.tcp, sc: sc, bodies: bodies, conns: b.o.conns, rate: rate, seed: b.o.seed}, start, end)
	if err != nil {
		return nil, err
	}
	last := start
	for next := start.Add(b.o.soakEvery); ; next = next.Add(b.o.soakEvery) {
		at := next
		if at.After(end) {
			at = end
		}
		_ = benchkit.SleepUntil(ctx, at)
		h, c := l.collect()
		now := time.Now()
		s := sample(now.Sub(start))
		res.samples = append(res.samples, s)
		res.requests += c.requests
		res.errors += c.errors
		if res.firstErr == "" {
			res.firstErr = c.firstErr
		}
		writeSoakLine(b.stdout, s, b.o.soakEvery, &phaseResult{hist: h, counts: c, elapsed: now.Sub(last), sc: sc})
		last = now
		if !at.Before(end) || ctx.Err() != nil {
			break
		}
	}
	l.wait()
	first, final, growth := growthOf(res.samples)
	res.growth = growth
	res.pass = res.errors == 0 && growth <= soakMaxGrowth && final.statusErr == nil && ctx.Err() == nil
	verdict := "PASS"
	if !res.pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(b.stdout, "SOAK %s rate=%.0f requests=%d errors=%d rss_first_mib=%.1f rss_end_mib=%.1f rss_growth_pct=%.1f\n",
		verdict, rate, res.requests, res.errors, float64(first.rss.RSSKiB)/1024, float64(final.rss.RSSKiB)/1024, 100*growth)
	rep := &runReport{soak: res}
	switch {
	case ctx.Err() != nil:
		return rep, ctx.Err()
	case res.errors > 0:
		return rep, fmt.Errorf("soak: %d errors, the first: %s", res.errors, res.firstErr)
	case final.statusErr != nil:
		return rep, fmt.Errorf("soak: cannot read the agent's /proc status: %w", final.statusErr)
	case growth > soakMaxGrowth:
		return rep, fmt.Errorf("soak: the agent's RSS grew %.1f%% from %s to %s (limit %.0f%%)",
			100*growth, mib(first.rss.RSSKiB), mib(final.rss.RSSKiB), 100*soakMaxGrowth)
	case !res.pass:
		return rep, errors.New("soak failed")
	}
	return rep, nil
}

// writeSoakLine prints one report: the interval's load (nil at the start)
// and the agent's memory.
func writeSoakLine(w io.Writer, s soakSample, every time.Duration, p *phaseResult) {
	unit := time.Second
	if every < 10*time.Second {
		unit = 10 * time.Millisecond
	}
	fmt.Fprintf(w, "soak t=%-8s", s.at.Round(unit))
	if p != nil {
		fmt.Fprintf(w, " req/s=%-8s p50=%sµs p99=%sµs p99.9=%sµs errors=%d",
			formatFloat(p.rps(), 0), formatFloat(p.quantile(50), 0), formatFloat(p.quantile(99), 0),
			formatFloat(p.quantile(99.9), 0), p.errors)
	}
	if s.statusErr != nil {
		fmt.Fprintf(w, " rss=? (%v)\n", s.statusErr)
		return
	}
	fmt.Fprintf(w, " rss=%s threads=%d", mib(s.rss.RSSKiB), s.rss.Threads)
	if s.hasGor {
		fmt.Fprintf(w, " goroutines=%d", s.goroutines)
	}
	fmt.Fprintln(w)
}
