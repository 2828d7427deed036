package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	ms1 = int64(time.Millisecond)
	s1  = int64(time.Second)
)

// t0 is an instant on a whole second, Unix ns.
var t0 = time.Unix(1_700_000_000, 0).UnixNano()

func TestWindowCounts(t *testing.T) {
	tests := []struct {
		name   string
		grants []int64
		from   int64
		to     int64
		want   []int
	}{
		{name: "before from and past to are left out",
			grants: []int64{t0 - 1, t0, t0 + s1 - 1, t0 + s1, t0 + 2*s1, t0 + 2*s1 + 5},
			from:   t0, to: t0 + 2*s1, want: []int{2, 1}},
		{name: "a partial last window is dropped",
			grants: []int64{t0, t0 + s1 + 1},
			from:   t0, to: t0 + s1 + s1/2, want: []int{1}},
		{name: "shorter than a window", grants: []int64{t0}, from: t0, to: t0 + s1/2, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := windowCounts(tc.grants, tc.from, tc.to, s1); !slices.Equal(got, tc.want) {
				t.Errorf("windowCounts = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSlidingMax(t *testing.T) {
	tests := []struct {
		name   string
		grants []int64
		from   int64
		to     int64
		want   int
	}{
		{name: "straddling two aligned windows",
			grants: []int64{t0 + 900*ms1, t0 + 950*ms1, t0 + s1, t0 + s1 + 10*ms1, t0 + 2*s1 + 500*ms1},
			from:   t0, to: t0 + 3*s1, want: 4},
		{name: "the last second, reached by a window ending at a grant",
			grants: []int64{t0 + 2*s1 + 100*ms1, t0 + 2*s1 + 200*ms1, t0 + 3*s1 - 1},
			from:   t0, to: t0 + 3*s1, want: 3},
		{name: "grants before from do not count",
			grants: []int64{t0 - 1, t0 + 10, t0 + 20},
			from:   t0, to: t0 + 2*s1, want: 2},
		{name: "a window is half-open: g and g+1s are not together",
			grants: []int64{t0, t0 + s1},
			from:   t0, to: t0 + 3*s1, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := slidingMax(tc.grants, tc.from, tc.to, s1); got != tc.want {
				t.Errorf("slidingMax = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestFalseDenialsGCRA(t *testing.T) {
	// Burst 10, 10 per second: EI = 100 ms, B = 1 s.
	const ei, b = 100 * ms1, s1
	five := func(at int64) []int64 { return []int64{at, at, at, at, at} }
	tests := []struct {
		name            string
		grants          []int64
		denials         []decision
		counted, strict int
	}{
		{name: "an empty exact bucket: a true denial",
			grants:  append(five(t0), five(t0+50*ms1)...),
			denials: []decision{{at: t0 + 99*ms1, done: t0 + 99*ms1}}},
		{name: "one token back at t0+100ms: a false denial",
			// max(t0+500ms, t0+50ms) + 500ms = t0+1s; at t0+100ms: (100+1000−1000)/100 = 1 token.
			grants:  append(five(t0), five(t0+50*ms1)...),
			denials: []decision{{at: t0 + 100*ms1, done: t0 + 100*ms1}},
			counted: 1, strict: 1},
		{name: "a grant made while the denial ran counts only for counted",
			grants:  append(append(five(t0), five(t0+50*ms1)...), t0+100*ms1+1),
			denials: []decision{{at: t0 + 100*ms1, done: t0 + 100*ms1 + 5}},
			counted: 0, strict: 1},
		{name: "with no grant the bucket is full: a false denial",
			denials: []decision{{at: t0, done: t0}},
			counted: 1, strict: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			slices.Sort(tc.grants)
			c, s := falseDenialsGCRA(tc.grants, tc.denials, ei, b)
			if c != tc.counted || s != tc.strict {
				t.Errorf("falseDenialsGCRA = %d, %d; want %d, %d", c, s, tc.counted, tc.strict)
			}
		})
	}
}

func TestFalseDenialsTiers(t *testing.T) {
	// Tier "3,1,1,0": 3 hits per instance of 1 s.
	grants := []int64{t0, t0 + 10*ms1, t0 + 20*ms1, t0 + 30*ms1, // an over-admitted 4th
		t0 + s1 + 5*ms1, // the second instance enters at t0+1.005s
	}
	tests := []struct {
		name    string
		denial  decision
		counted int
	}{
		{name: "the instance is full", denial: decision{at: t0 + 500*ms1, done: t0 + 500*ms1}},
		{name: "the instance has room before its third grant",
			denial: decision{at: t0 + 15*ms1, done: t0 + 15*ms1}, counted: 1},
		{name: "no instance is active: a request would enter one",
			denial: decision{at: t0 + s1 + 2*ms1, done: t0 + s1 + 2*ms1}, counted: 1},
		{name: "the second instance has room",
			denial: decision{at: t0 + s1 + 500*ms1, done: t0 + s1 + 500*ms1}, counted: 1},
		{name: "the same millisecond as the instance's end is past it",
			denial: decision{at: t0 + s1, done: t0 + s1}, counted: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := falseDenialsTiers(grants, []decision{tc.denial}, 3, 1000)
			if c != tc.counted {
				t.Errorf("falseDenialsTiers = %d, want %d", c, tc.counted)
			}
		})
	}
}

func TestConvergence(t *testing.T) {
	probes := []probe{{node: 0, at: t0, domain: "probe-a"}, {node: 1, at: t0, domain: "probe-b"}}
	seen := []map[string]int64{
		{"probe-b": t0 + 30*ms1},
		{"probe-a": t0 + 10*ms1},
		{"probe-a": t0 + 20*ms1},
	}
	lags, lost := convergence(probes, seen)
	if lost != 1 || len(lags) != 2 || lags[0] != 20 || !math.IsInf(lags[1], 1) {
		t.Errorf("convergence = %v, lost %d; want [20 +Inf], lost 1", lags, lost)
	}
	if q := quantile(lags, 0.5); q != 20 {
		t.Errorf("p50 = %v, want 20", q)
	}
}

// TestHarnessTiny runs the harness at tiny scale over real memberlist: three
// nodes, a tiers key of 200 per second offered 1000 per second, 1 s sync,
// with drift shipping and tick-only. Drift shipping must make no false
// denial and over-admit less than tick-only. A goroutine stall of a
// quarter second or more (a busy machine: the open-loop load then fires a
// quarter second of requests at once, before any node can ship) makes both
// modes over-admit alike, so such a pair is run again, up to three times in
// all; if every pair stalled, the comparison is skipped, saying so.
func TestHarnessTiny(t *testing.T) {
	const limit = 200
	const maxStall = 250 * time.Millisecond
	cfg, err := benchConfig(limit, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	var drift, tick runResult
	var stalled []string
	for attempt := range 3 {
		got := map[string]runResult{}
		worst := time.Duration(0)
		for _, mode := range []string{"drift", "tick"} {
			c, err := startCluster(clusterSpec{n: 3, tickOnly: mode == "tick", sync: time.Second, cfg: cfg, seed: uint64(1 + attempt), prefix: fmt.Sprintf("test-%s-%d", mode, attempt)})
			if err != nil {
				t.Fatal(err)
			}
			r, err := runLoad(c, runSpec{n: 3, kind: "tiers", spread: "even", mode: mode, sync: time.Second,
				limit: limit, warm: time.Second, d: 2 * time.Second, id: 1})
			c.close()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s\n  %s", r.line(), r.windowLine())
			if len(r.windows) != 2 || r.requests < 2500 || r.grants == 0 || r.probes == 0 {
				t.Fatalf("%s: %d windows, %d requests, %d grants, %d probes", mode, len(r.windows), r.requests, r.grants, r.probes)
			}
			if r.falseDen != 0 && mode == "drift" {
				t.Errorf("drift shipping: %d false denials:\n%s", r.falseDen, strings.Join(r.explain, "\n"))
			}
			for _, s := range r.stalls {
				worst = max(worst, s)
			}
			got[mode] = r
		}
		drift, tick = got["drift"], got["tick"]
		if worst < maxStall {
			stalled = nil
			break
		}
		stalled = append(stalled, worst.Round(time.Millisecond).String())
	}
	if stalled != nil {
		t.Skipf("every attempt stalled for %s or more (longest: %s): the machine is too busy to compare the shipping modes; run go test -run TestHarnessTiny ./bench/cluster on a quiet machine", maxStall, strings.Join(stalled, ", "))
	}
	if !(drift.maxL < tick.maxL) {
		t.Errorf("drift shipping's worst window %.3f × L is not below tick-only's %.3f × L", drift.maxL, tick.maxL)
	}
	var out strings.Builder
	report(&out, options{syncs: []time.Duration{time.Second}, drift: 0.05}, []runResult{drift, tick}, nil, mlTimers{})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "RESULT n=3 drift=0.05 overshoot_max=") {
		t.Errorf("last line %q", last)
	}
}

// TestManyKeysTiny runs the many-keys mode at tiny scale over real
// memberlist: the N = 1 floor and two nodes, 100 keys, 200 requests per
// node per second. The figures must be there and sane; none is timed.
func TestManyKeysTiny(t *testing.T) {
	o, err := parseFlags([]string{"-keys", "100", "-rate", "200", "-n", "2", "-d", "1s", "-warmup", "500ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rs, err := manyKeys(o, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if len(rs) != 2 || rs[0].spec.n != 1 || rs[1].spec.n != 2 {
		t.Fatalf("runs %+v, want the floor (n=1) then n=2", rs)
	}
	floor, r := rs[0], rs[1]
	if r.spec.mode != "drift" || r.spec.sync != 250*time.Millisecond {
		t.Errorf("shipping %s, sync %v; want drift, 250ms", r.spec.mode, r.spec.sync)
	}
	for _, x := range rs {
		if x.requests == 0 || x.grants == 0 {
			t.Errorf("n=%d: %d requests, %d grants", x.spec.n, x.requests, x.grants)
		}
		if cpuTime() >= 0 && !(x.cpuHit > 0) {
			t.Errorf("n=%d: CPU per hit %v", x.spec.n, x.cpuHit)
		}
	}
	if floor.sentRun != 0 || floor.outNode != 0 {
		t.Errorf("the floor sent %d datagrams", floor.sentRun)
	}
	if !(r.outNode > 0 && r.inNode > 0 && r.sentRun > 0 && r.recvRun > 0) {
		t.Errorf("datagrams: %v out, %v in /s/node; %d sent, %d received", r.outNode, r.inNode, r.sentRun, r.recvRun)
	}
	if !(r.recvRatio >= 0 && r.recvRatio <= 1) {
		t.Errorf("received ÷ sent = %v, want within [0, 1]", r.recvRatio)
	}
	if !(r.bytesNode > 0 && r.bytesHitPeer > 0) {
		t.Errorf("bytes: %v /s/node, %v /hit/peer", r.bytesNode, r.bytesHitPeer)
	}
	if r.lagCount == 0 || math.IsNaN(r.lagP50) || !(r.lagP99 >= r.lagP50) {
		t.Errorf("merge lag: %d deltas, p50 %v, p99 %v", r.lagCount, r.lagP50, r.lagP99)
	}
	if r.probes == 0 || r.queueFull < 0 || r.liveMin < 1 {
		t.Errorf("%d probes, queue full %d, live min %d", r.probes, r.queueFull, r.liveMin)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "RESULT keys=100 rate=200 drift=0.05 n=2 shipping=drift sync=250ms ") ||
		!strings.Contains(last, " received_ratio=") || !strings.Contains(last, " cluster_cpu_us_per_hit=") {
		t.Errorf("last line %q", last)
	}
}

func TestManyKeysFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "-rate needs -keys", args: []string{"-rate", "100"}, wantErr: "-rate is for the many-keys mode"},
		{name: "-kind is not used", args: []string{"-keys", "10", "-kind", "gcra"}, wantErr: "-kind is not used"},
		{name: "a rate below 1", args: []string{"-keys", "10", "-rate", "0.5"}, wantErr: "-rate: 0.5"},
		{name: "negative keys", args: []string{"-keys", "-1"}, wantErr: "-keys: -1"},
		{name: "the mode's defaults", args: []string{"-keys", "10"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.modes, []string{"drift"}) || !slices.Equal(o.syncs, []time.Duration{250 * time.Millisecond}) || o.rate != 2000 {
				t.Errorf("modes %v, syncs %v, rate %v; want [drift], [250ms], 2000", o.modes, o.syncs, o.rate)
			}
		})
	}
}

func TestLagQuantile(t *testing.T) {
	// Cumulative over 5, 10, 25, … ms: 50 deltas ≤ 5 ms, 40 in (5, 10], 9 in (10, 25], 1 past 5000.
	counts := []uint64{50, 90, 99, 99, 99, 99, 99, 99, 99, 99}
	tests := []struct {
		name string
		q    float64
		want float64
	}{
		{name: "the median is the 50th", q: 0.5, want: 5},
		{name: "the 51st is in the second bucket", q: 0.51, want: 10},
		{name: "p99 is the 99th", q: 0.99, want: 25},
		{name: "the last is past every bound", q: 1, want: math.Inf(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := lagQuantile(counts, 100, tc.q); got != tc.want {
				t.Errorf("lagQuantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	if got := lagQuantile(make([]uint64, 10), 0, 0.5); !math.IsNaN(got) {
		t.Errorf("with no delta: %v, want NaN", got)
	}
}
