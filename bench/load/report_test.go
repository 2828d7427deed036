package main

import (
	"bytes"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// resultPattern is the RESULT line's exact shape.
var resultPattern = regexp.MustCompile(`^RESULT agent_rps=(\S+) floor_rps=(\S+) rps_ratio=(\S+) cpu_ratio=(\S+) p99_us=(\S+) batch_json_dps=(\S+) batch_msgpack_dps=(\S+)$`)

func TestResultString(t *testing.T) {
	r := result{
		agentRPS: 41234.56, floorRPS: 60000.4, rpsRatio: 0.687242, cpuRatio: 1.23456,
		p99us: 812, batchJSONDPS: 1.5e6, batchMsgpackDPS: 2345678.9,
	}
	const want = "RESULT agent_rps=41235 floor_rps=60000 rps_ratio=0.687 cpu_ratio=1.235 p99_us=812 batch_json_dps=1500000 batch_msgpack_dps=2345679"
	if got := r.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !resultPattern.MatchString(want) {
		t.Errorf("the pattern does not match %q", want)
	}
	nan := nanResult().String()
	if nan != "RESULT agent_rps=NaN floor_rps=NaN rps_ratio=NaN cpu_ratio=NaN p99_us=NaN batch_json_dps=NaN batch_msgpack_dps=NaN" {
		t.Errorf("nothing measured: %s", nan)
	}
	inf := result{agentRPS: 1, floorRPS: 0, rpsRatio: math.Inf(1)}.String()
	if !strings.Contains(inf, "rps_ratio=NaN") || strings.Contains(inf, "Inf") {
		t.Errorf("an infinite ratio is not NaN: %s", inf)
	}
}

// row is a measured phase: requests over 2 s, cpu ticks at 100 Hz, and
// one latency per µs value given.
func row(sc scenario, requests int64, ticks uint64, latencies ...int64) *phaseResult {
	p := &phaseResult{server: "agent", sc: sc, elapsed: 2 * time.Second, hist: newHist(),
		cpuTicks: ticks, cpuOK: true, hz: 100}
	p.requests = requests
	for _, v := range latencies {
		_ = p.hist.RecordValue(v)
	}
	return p
}

func TestSummarize(t *testing.T) {
	agent := row(requestJSON, 100_000, 100, 100, 200, 300)       // 50k req/s, 10 µs/req
	floor := row(requestJSON, 200_000, 80, 50)                   // 100k req/s, 4 µs/req
	half := row(requestJSON, 50_000, 60, 100, 100, 100, 900)     // p99 = 900
	bj := row(batchJSON, 10_000, 100)                            // 5k req/s × 100
	bm := &phaseResult{sc: batchMsgpack, unavailable: "not yet"} // not measured
	r := summarize(agent, floor, half, bj, bm)
	if r.agentRPS != 50_000 || r.floorRPS != 100_000 || r.rpsRatio != 0.5 {
		t.Errorf("rps: %+v", r)
	}
	if math.Abs(r.cpuRatio-2.5) > 1e-9 {
		t.Errorf("cpu ratio %g, want 10/4 = 2.5", r.cpuRatio)
	}
	if r.p99us < 899 || r.p99us > 901 {
		t.Errorf("p99 %g, want 900", r.p99us)
	}
	if r.batchJSONDPS != 500_000 || !math.IsNaN(r.batchMsgpackDPS) {
		t.Errorf("batch: %g, %g", r.batchJSONDPS, r.batchMsgpackDPS)
	}
	if got := summarize(agent, floor, nil, nil, nil); !math.IsNaN(got.p99us) || !math.IsNaN(got.batchJSONDPS) {
		t.Errorf("missing rows are not NaN: %+v", got)
	}
	if bj.cpuPerDecision() != bj.cpuPerRequest()/100 {
		t.Errorf("CPU per decision of a batch of 100: %g per request, %g per decision", bj.cpuPerRequest(), bj.cpuPerDecision())
	}
}

func TestWriteTable(t *testing.T) {
	ok := row(requestJSON, 1000, 5, 10, 20)
	bad := row(requestMsgpack, 10, 5, 10)
	bad.errors, bad.firstErr = 3, "status 500 internal: boom"
	un := &phaseResult{server: "agent", sc: batchJSON, unavailable: "POST /v1/batch is not served"}
	open := row(requestJSON, 1000, 5, 10)
	open.rate, open.note = 250, "@50% max"
	var b bytes.Buffer
	writeTable(&b, []*phaseResult{ok, bad, un, open})
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "phase ") || !strings.Contains(lines[0], "CPU µs/dec") {
		t.Errorf("header: %q", lines[0])
	}
	// Right-aligned numbers: every full row ends at the header's last column.
	width := len([]rune(lines[0]))
	for _, i := range []int{1, 2, 4} {
		if n := len([]rune(lines[i])); n != width {
			t.Errorf("row %d is %d wide, the header %d:\n%s", i, n, width, out)
		}
	}
	for _, want := range []string{
		"/v1/batch×100 json", "unavailable*",
		"* /v1/batch×100 json on the agent: POST /v1/batch is not served",
		"! /v1/request msgpack on the agent: 3 errors, the first: status 500 internal: boom",
		"open 250/s", "@50% max",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestGrowthOf(t *testing.T) {
	s := func(kib int64) soakSample { return soakSample{rss: benchkit.Status{RSSKiB: kib}} }
	// The first minute's report is the base, not the start.
	if _, _, g := growthOf([]soakSample{s(10), s(100), s(110), s(115)}); math.Abs(g-0.15) > 1e-9 {
		t.Errorf("growth %g, want 0.15", g)
	}
	// A soak shorter than one report: start to end.
	if _, _, g := growthOf([]soakSample{s(100), s(130)}); math.Abs(g-0.30) > 1e-9 {
		t.Errorf("growth %g, want 0.30", g)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{1.2}, 1.2},
		{[]float64{1.3, 1.1, 1.2}, 1.2},
		{[]float64{1.4, 1.1, 1.2, 1.3}, 1.25},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(in); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if in[0] != tc.in[0] {
			t.Errorf("median sorted its argument")
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median(nil) is not NaN")
	}
}

// TestMerge: two rounds of a server add up, and a round without its CPU
// time leaves the merged row without one.
func TestMerge(t *testing.T) {
	a := &phaseResult{elapsed: time.Second, counts: counts{requests: 100}, cpuTicks: 50, cpuOK: true, genOK: true, hz: 100}
	b := &phaseResult{elapsed: time.Second, counts: counts{requests: 300}, cpuTicks: 50, cpuOK: true, genOK: true, hz: 100}
	a.merge(b)
	if a.requests != 400 || a.elapsed != 2*time.Second || a.rps() != 200 || a.cpuPerRequest() != 2500 {
		t.Errorf("merged: %d requests over %s, %v req/s, %v µs/req", a.requests, a.elapsed, a.rps(), a.cpuPerRequest())
	}
	a.merge(&phaseResult{elapsed: time.Second, cpuOK: false})
	if !math.IsNaN(a.cpuPerRequest()) {
		t.Errorf("a round without CPU time: %v µs/req", a.cpuPerRequest())
	}
}
