package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// report.go prints the table and the RESULT line.

// label is the phase column of a row.
func (p *phaseResult) label() string {
	s := p.sc.String()
	if p.note != "" {
		s += " " + p.note
	}
	return s
}

// load is the load column of a row: closed loop, or the open-loop rate.
func (p *phaseResult) load() string {
	if p.rate > 0 {
		return "open " + formatFloat(p.rate, 0) + "/s"
	}
	return "closed"
}

// tableHeader is the table's header; the first leftColumns columns are
// aligned left, the others (numbers) right.
var tableHeader = []string{"phase", "server", "load", "req/s", "decisions/s", "p50 µs", "p99 µs", "p99.9 µs",
	"errors", "CPU µs/req", "CPU µs/dec", "granted", "gen CPU µs/req"}

const leftColumns = 3

// writeTable prints the rows as an aligned table, then the reasons of
// unmeasured rows and the first error of rows with errors.
func writeTable(w io.Writer, rows []*phaseResult) {
	cells := [][]string{tableHeader}
	for _, p := range rows {
		if p.unavailable != "" {
			cells = append(cells, []string{p.label(), p.server, p.load(), "unavailable*"})
			continue
		}
		cells = append(cells, []string{
			p.label(), p.server, p.load(),
			formatFloat(p.rps(), 0), formatFloat(p.dps(), 0),
			formatFloat(p.quantile(50), 0), formatFloat(p.quantile(99), 0), formatFloat(p.quantile(99.9), 0),
			strconv.FormatInt(p.errors, 10),
			formatFloat(p.cpuPerRequest(), 2), formatFloat(p.cpuPerDecision(), 3),
			formatPercent(p.grantShare()), formatFloat(p.genPerRequest(), 2),
		})
	}
	writeAligned(w, cells, leftColumns)
	for _, p := range rows {
		if p.unavailable != "" {
			fmt.Fprintf(w, "* %s on the %s: %s\n", p.label(), p.server, p.unavailable)
		}
		if p.errors > 0 {
			fmt.Fprintf(w, "! %s on the %s: %d errors, the first: %s\n", p.label(), p.server, p.errors, p.firstErr)
		}
	}
}

// writeAligned prints cells as columns two spaces apart, the first left
// columns aligned left and the others right. A short row (an unmeasured
// one) runs its last cell on without padding.
func writeAligned(w io.Writer, cells [][]string, left int) {
	var width []int
	for _, row := range cells {
		for i, c := range row {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, row := range cells {
		b.Reset()
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			switch {
			case i == len(row)-1 && len(row) < len(width):
				b.WriteString(c)
			case i < left:
				b.WriteString(c + pad)
			default:
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// formatFloat formats v with prec decimals, "NaN" when it is not a number.
func formatFloat(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func formatPercent(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(100*v, 'f', 0, 64) + "%"
}

// result is the machine-readable summary of a run.
type result struct {
	agentRPS        float64 // /v1/request JSON, closed loop
	floorRPS        float64 // the floor under the same load
	rpsRatio        float64 // agentRPS / floorRPS
	cpuRatio        float64 // agent CPU per decision / floor CPU per request
	p99us           float64 // agent p99 at half the max rate, open loop
	batchJSONDPS    float64 // decisions/s of /v1/batch JSON
	batchMsgpackDPS float64 // decisions/s of /v1/batch MessagePack
}

// nanResult is a result with nothing measured.
func nanResult() result {
	n := math.NaN()
	return result{n, n, n, n, n, n, n}
}

// String is the RESULT line: one line, keys in a fixed order, numbers in
// plain decimal (NaN for what was not measured).
func (r result) String() string {
	var b strings.Builder
	b.WriteString("RESULT")
	field := func(k string, v float64, prec int) {
		b.WriteString(" ")
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(formatFloat(v, prec))
	}
	field("agent_rps", r.agentRPS, 0)
	field("floor_rps", r.floorRPS, 0)
	field("rps_ratio", r.rpsRatio, 3)
	field("cpu_ratio", r.cpuRatio, 3)
	field("p99_us", r.p99us, 0)
	field("batch_json_dps", r.batchJSONDPS, 0)
	field("batch_msgpack_dps", r.batchMsgpackDPS, 0)
	return b.String()
}

// measured returns p's value of f, NaN when p is missing or unmeasured.
func measured(p *phaseResult, f func(*phaseResult) float64) float64 {
	if p == nil || p.unavailable != "" {
		return math.NaN()
	}
	return f(p)
}

// summarize builds the result from the rows of a run: agent and floor under
// the same closed-loop load, the agent open loop at half its max (or nil),
// and the /v1/batch rows (or nil).
func summarize(agent, floor, half, batchJSON, batchMsgpack *phaseResult) result {
	r := nanResult()
	r.agentRPS = measured(agent, (*phaseResult).rps)
	r.floorRPS = measured(floor, (*phaseResult).rps)
	r.rpsRatio = r.agentRPS / r.floorRPS
	// Agent CPU per decision ÷ floor CPU per request: for /v1/request a
	// decision is a request; for a batch (a one-scenario run) the floor
	// answered the same batches, so both are per request.
	r.cpuRatio = measured(agent, (*phaseResult).cpuPerRequest) / measured(floor, (*phaseResult).cpuPerRequest)
	r.p99us = measured(half, func(p *phaseResult) float64 { return p.quantile(99) })
	r.batchJSONDPS = measured(batchJSON, (*phaseResult).dps)
	r.batchMsgpackDPS = measured(batchMsgpack, (*phaseResult).dps)
	return r
}

// writeRatios prints the agent/floor ratios of a pair of rows under the same
// load.
func writeRatios(w io.Writer, what string, agent, floor *phaseResult) {
	if agent == nil || floor == nil || agent.unavailable != "" || floor.unavailable != "" {
		return
	}
	fmt.Fprintf(w, "agent/floor, %s: req/s %s, CPU per request %s, p50 %s, p99 %s, p99.9 %s\n",
		what,
		formatFloat(agent.rps()/floor.rps(), 3),
		formatFloat(agent.cpuPerRequest()/floor.cpuPerRequest(), 3),
		formatFloat(agent.quantile(50)/floor.quantile(50), 2),
		formatFloat(agent.quantile(99)/floor.quantile(99), 2),
		formatFloat(agent.quantile(99.9)/floor.quantile(99.9), 2))
}

// writeRounds prints the agent/floor ratios of each round of a run of
// several and their medians, which the RESULT line gives.
func writeRounds(w io.Writer, cpu, rps []float64) {
	list := func(v []float64) string {
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = formatFloat(x, 3)
		}
		return strings.Join(parts, " ")
	}
	fmt.Fprintf(w, "agent/floor by round: CPU per request %s (median %s); req/s %s (median %s)\n",
		list(cpu), formatFloat(median(cpu), 3), list(rps), formatFloat(median(rps), 3))
}

// median returns the median of v (the mean of the middle two when their
// number is even), NaN when v is empty; v is not changed.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// mib formats KiB as MiB.
func mib(kib int64) string { return strconv.FormatFloat(float64(kib)/1024, 'f', 1, 64) + " MiB" }
