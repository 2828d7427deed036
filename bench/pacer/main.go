// Command pacer compares client-side throttling strategies on virtual time:
// rate_throttle_client's ExponentialBackoff and
// ExponentialIncreaseProportionalRemainingDecrease, as published, and obol's
// KeepReserve (package adaptive), against a GCRA server. See doc.go.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/bench/internal/benchkit"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "pacer:", err)
		}
		os.Exit(2)
	}
}

// published are rate_throttle_client's README figures (30 minutes, 2
// processes × 5 threads, multiplier 1.2).
var published = map[adaptive.Strategy]metrics{
	adaptive.ExponentialBackoff:    {retryRate: 0.8041, maxSleep: 46.72, stdev: 147.84, clear: 74.33},
	adaptive.ProportionalRemaining: {retryRate: 0.0307, maxSleep: 17.32, stdev: 78.44, clear: 84.23},
}

var strategies = []adaptive.Strategy{adaptive.ExponentialBackoff, adaptive.ProportionalRemaining, adaptive.KeepReserve}

// options are the command's flags.
type options struct {
	seed       uint64
	seeds      int
	duration   time.Duration
	request    time.Duration
	procs      int
	threads    int
	limit      int
	period     time.Duration
	startSleep time.Duration
	stopUnder  int
}

func run(args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("pacer", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the jitter (the run is deterministic for a seed)")
	fs.IntVar(&o.seeds, "seeds", 1, "runs per strategy, seeds seed…seed+n−1; above 1 the table shows p50 [p10, p90] and RESULT the p50")
	fs.DurationVar(&o.duration, "duration", 30*time.Minute, "virtual time of the steady run")
	fs.DurationVar(&o.request, "request", 165*time.Millisecond, "each request's own duration (virtual)")
	fs.IntVar(&o.procs, "procs", 2, "processes: each shares one throttle between its threads")
	fs.IntVar(&o.threads, "threads", 5, "threads per process")
	fs.IntVar(&o.limit, "limit", adaptive.DefaultLimit, "the server's bucket and refill per period, and the clear workload")
	fs.DurationVar(&o.period, "period", adaptive.DefaultPeriod, "the server's refill period")
	fs.DurationVar(&o.startSleep, "start-sleep", time.Second, "the sleep clients start at in the clear run")
	fs.IntVar(&o.stopUnder, "stop-under", 10, "the clear run ends for a client once it sees this many remaining or fewer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.seeds < 1 || o.procs < 1 || o.threads < 1 || o.limit < 1:
		return fmt.Errorf("-seeds, -procs, -threads and -limit must be ≥ 1")
	case o.duration <= 0 || o.request <= 0 || o.period <= 0 || o.startSleep < 0:
		return fmt.Errorf("-duration, -request and -period must be > 0, -start-sleep ≥ 0")
	}
	fmt.Fprintf(out, "Steady: %d clients (%d processes × %d threads, each process sharing one throttle) against obol's GCRA of %d per %v, starting empty, for %v.\n",
		o.procs*o.threads, o.procs, o.threads, o.limit, o.period, o.duration)
	fmt.Fprintf(out, "Clear: a workload of %d requests, no refill, clients starting at a %v sleep, until each sees ≤ %d remaining.\n", o.limit, o.startSleep, o.stopUnder)
	fmt.Fprintf(out, "Every request takes %v; retry rate = 429s ÷ requests, mean over clients; stdev = sample standard deviation of the clients' request counts.\n\n", o.request)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "strategy\tsource\tretry rate\tmax sleep\tstdev requests\tclear\tmean requests")
	var ours metrics
	reproduced := map[adaptive.Strategy]metrics{}
	for _, s := range strategies {
		if p, ok := published[s]; ok {
			fmt.Fprintf(tw, "%s\tpublished\t%.2f%%\t%.2f s\t%.2f\t%.2f s\t\n", s, 100*p.retryRate, p.maxSleep, p.stdev, p.clear)
		}
		var runs []metrics
		for i := range o.seeds {
			runs = append(runs, measure(o, s, o.seed+uint64(i)))
		}
		med := median(runs)
		reproduced[s] = med
		if s == adaptive.KeepReserve {
			ours = med
		}
		src := fmt.Sprintf("seed %d", o.seed)
		if o.seeds > 1 {
			src = fmt.Sprintf("p50 [p10, p90] of %d seeds", o.seeds)
		}
		name := s.String()
		if s == adaptive.KeepReserve {
			name += " (obol)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.1f\n", name, src,
			spread(runs, func(m metrics) float64 { return 100 * m.retryRate }, "%.2f%%"),
			spread(runs, func(m metrics) float64 { return m.maxSleep }, "%.2f s"),
			spread(runs, func(m metrics) float64 { return m.stdev }, "%.2f"),
			spread(runs, func(m metrics) float64 { return m.clear }, "%.2f s"),
			med.meanReqs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	for _, s := range []adaptive.Strategy{adaptive.ProportionalRemaining, adaptive.ExponentialBackoff} {
		fmt.Fprintf(out, "KeepReserve vs %s: published: better on %s; this run: better on %s\n",
			s, verdict(ours, published[s]), verdict(ours, reproduced[s]))
	}
	fmt.Fprintf(out, "RESULT retry_rate=%.4f max_sleep_s=%.2f stdev_requests=%.2f clear_s=%.2f\n",
		ours.retryRate, ours.maxSleep, ours.stdev, ours.clear)
	return nil
}

// measure runs both scenarios of strategy s with one seed.
func measure(o options, s adaptive.Strategy, seed uint64) metrics {
	base := scenario{strategy: s, procs: o.procs, threads: o.threads, request: o.request, limit: o.limit, period: o.period, seed: seed}
	steady := base
	steady.duration, steady.stopUnder = o.duration, -1
	m := summarize(run1(steady, newGCRAServer(o.limit, o.period)))
	clear := base
	clear.startSleep, clear.stopUnder = o.startSleep, o.stopUnder
	m.clear = run1(clear, &countServer{left: o.limit}).end.Seconds()
	return m
}

// median returns the run whose figures are each the median (per figure).
func median(runs []metrics) metrics {
	pick := func(f func(metrics) float64) float64 {
		v := make([]float64, len(runs))
		for i, m := range runs {
			v[i] = f(m)
		}
		return benchkit.Percentile(v, 0.5)
	}
	return metrics{
		retryRate: pick(func(m metrics) float64 { return m.retryRate }),
		maxSleep:  pick(func(m metrics) float64 { return m.maxSleep }),
		stdev:     pick(func(m metrics) float64 { return m.stdev }),
		clear:     pick(func(m metrics) float64 { return m.clear }),
		meanReqs:  pick(func(m metrics) float64 { return m.meanReqs }),
	}
}

// spread renders one figure: the value, or p50 [p10, p90] over several runs.
func spread(runs []metrics, f func(metrics) float64, format string) string {
	v := make([]float64, len(runs))
	for i, m := range runs {
		v[i] = f(m)
	}
	slices.Sort(v)
	if len(v) == 1 {
		return fmt.Sprintf(format, v[0])
	}
	q := func(p float64) float64 { return benchkit.Percentile(v, p) }
	return fmt.Sprintf(format+" ["+format+", "+format+"]", q(0.5), q(0.1), q(0.9))
}

// verdict says on which of the four figures a is better (lower) than b.
func verdict(a, b metrics) string {
	var better []string
	for _, c := range []struct {
		name string
		a, b float64
	}{{"retry rate", a.retryRate, b.retryRate}, {"max sleep", a.maxSleep, b.maxSleep}, {"stdev", a.stdev, b.stdev}, {"clear", a.clear, b.clear}} {
		if c.a < c.b {
			better = append(better, c.name)
		}
	}
	return fmt.Sprintf("%d of 4 (%s)", len(better), strings.Join(better, ", "))
}
