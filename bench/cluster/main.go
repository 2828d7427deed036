package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "cluster:", err)
		}
		os.Exit(2)
	}
}

// options are the command line.
type options struct {
	ns      []int
	kinds   []string
	spreads []string
	modes   []string
	syncs   []time.Duration
	limit   int
	drift   float64
	warm, d time.Duration
	death   bool
	seed    uint64
	verbose bool
	// The many-keys mode (keys > 0): keys keys, rate requests offered per
	// node per second.
	keys int
	rate float64
	// unsequenced and flushGap: every node's gossip.Config.Unsequenced and
	// reconcile.Options.FlushGap.
	unsequenced bool
	flushGap    time.Duration
	// ownerFrom is every node's reconcile.Options.OwnerFrom.
	ownerFrom int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ns := fs.String("n", "1,3,5,10", "cluster sizes (1 = the noise floor: one node, no gossip)")
	kinds := fs.String("kind", "gcra,tiers", "key kinds: gcra (burst L, count L, period 1s), tiers (\"L,1,1,0\")")
	spreads := fs.String("spread", "even,skew", "load spreads: even, or skew (80% on one node)")
	modes := fs.String("mode", "drift,tick", "shipping: drift (at the drift threshold and on the tick) or tick (on the tick only)")
	syncs := fs.String("sync", "250ms,1s", "sync intervals")
	fs.IntVar(&o.limit, "limit", 1000, "L, the key's limit per second")
	fs.Float64Var(&o.drift, "drift", 0.05, "the resources' drift tolerance")
	fs.DurationVar(&o.d, "d", 30*time.Second, "measured duration of each run")
	fs.DurationVar(&o.warm, "warmup", 2*time.Second, "load before the measured windows of each run")
	quick := fs.Bool("quick", false, "3s runs (same as -d 3s)")
	fs.BoolVar(&o.death, "death", true, "measure node death for each size > 1")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the sync ticks' jitter (and of the many-keys mode's key choice)")
	fs.BoolVar(&o.verbose, "v", false, "describe the first false denials of each run")
	fs.IntVar(&o.keys, "keys", 0, "many-keys mode: each request hits one of this many keys of bench/keys (gcra burst 10, 10 per second), chosen uniformly; 0: the one-key runs")
	fs.Float64Var(&o.rate, "rate", 2000, "many-keys mode: requests offered per node per second")
	fs.BoolVar(&o.unsequenced, "unsequenced", false, "ship as before numbered streams: unsequenced messages, every change resent on the schedule (gossip.Config.Unsequenced)")
	fs.DurationVar(&o.flushGap, "flush-gap", 0, "least time between two drift flushes of a node (reconcile.Options.FlushGap; 0: its default, negative: none)")
	fs.IntVar(&o.ownerFrom, "owner-from", 0, "least mesh size in owner mode (reconcile.Options.OwnerFrom; 0: its default, 100; -1: never)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := benchkit.SetFlags(fs)
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *quick {
		o.d = 3 * time.Second
	}
	var errs []error
	for _, s := range split(*ns) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 128 {
			errs = append(errs, fmt.Errorf("-n: %q is not a size in 1–128", s))
			continue
		}
		o.ns = append(o.ns, n)
	}
	pick := func(flag, v string, allowed ...string) []string {
		var out []string
		for _, s := range split(v) {
			if !slices.Contains(allowed, s) {
				errs = append(errs, fmt.Errorf("-%s: %q is not one of %s", flag, s, strings.Join(allowed, ", ")))
				continue
			}
			out = append(out, s)
		}
		return out
	}
	o.kinds = pick("kind", *kinds, "gcra", "tiers")
	o.spreads = pick("spread", *spreads, "even", "skew")
	o.modes = pick("mode", *modes, "drift", "tick")
	for _, s := range split(*syncs) {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("-sync: %q is not a positive duration", s))
			continue
		}
		o.syncs = append(o.syncs, d)
	}
	switch {
	case o.limit < 20 || o.limit > 1_000_000:
		errs = append(errs, fmt.Errorf("-limit: %d is not in 20–1000000", o.limit))
	case o.drift <= 0 || o.drift > 1:
		errs = append(errs, fmt.Errorf("-drift: %g is not in (0, 1]", o.drift))
	case o.d < time.Second || o.warm < 0:
		errs = append(errs, errors.New("-d must be ≥ 1s and -warmup ≥ 0"))
	}
	switch {
	case o.keys < 0 || o.keys > 10_000_000:
		errs = append(errs, fmt.Errorf("-keys: %d is not in 0–10000000", o.keys))
	case o.keys == 0 && set["rate"]:
		errs = append(errs, errors.New("-rate is for the many-keys mode: give -keys too"))
	case o.keys > 0:
		if !(o.rate >= 1 && o.rate <= 1_000_000) {
			errs = append(errs, fmt.Errorf("-rate: %g is not in 1–1000000", o.rate))
		}
		for _, f := range []string{"kind", "spread", "limit", "death", "v"} {
			if set[f] {
				errs = append(errs, fmt.Errorf("-%s is not used by the many-keys mode (-keys)", f))
			}
		}
		// The many-keys mode ships as the agent does unless told otherwise.
		if !set["mode"] {
			o.modes = []string{"drift"}
		}
		if !set["sync"] {
			o.syncs = []time.Duration{250 * time.Millisecond}
		}
	}
	return o, errors.Join(errs...)
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.keys > 0 {
		_, err := manyKeys(o, stdout, stderr)
		return err
	}
	cfg, err := benchConfig(o.limit, o.drift)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "obol cluster bench: L=%d/s, offered %d·L/s open loop (evenly paced), drift %g, %v measured per run after %v warm-up; GOMAXPROCS=%d, %d CPUs\n\n",
		o.limit, loadFactor, o.drift, o.d, o.warm, runtime.GOMAXPROCS(0), runtime.NumCPU())
	var results []runResult
	var deaths []deathResult
	var ml mlTimers
	id := 0
	for _, n := range o.ns {
		type shape struct {
			mode string
			sync time.Duration
		}
		var shapes []shape
		if n == 1 {
			shapes = []shape{{"alone", o.syncs[0]}}
		} else {
			for _, m := range o.modes {
				for _, s := range o.syncs {
					shapes = append(shapes, shape{m, s})
				}
			}
		}
		for _, sh := range shapes {
			c, err := startCluster(clusterSpec{n: n, tickOnly: sh.mode == "tick", sync: sh.sync, cfg: cfg, unsequenced: o.unsequenced, flushGap: o.flushGap, ownerFrom: o.ownerFrom,
				seed: o.seed, prefix: fmt.Sprintf("n%d-%s-%v", n, sh.mode, sh.sync)})
			if err != nil {
				return err
			}
			ml = c.ml
			spreads := o.spreads
			if n == 1 {
				spreads = spreads[:1]
			}
			for _, k := range o.kinds {
				for _, sp := range spreads {
					id++
					s := runSpec{n: n, kind: k, spread: sp, mode: sh.mode, sync: sh.sync, limit: o.limit, warm: o.warm, d: o.d, id: id}
					r, err := runLoad(c, s)
					if err != nil {
						c.close()
						return err
					}
					fmt.Fprintf(stderr, "%s\n", r.line())
					if o.verbose {
						fmt.Fprintln(stderr, "  "+r.windowLine())
						for _, l := range r.explain {
							fmt.Fprintln(stderr, l)
						}
					}
					results = append(results, r)
				}
			}
			// Node death on the default shape: drift shipping at the first sync.
			if o.death && n > 1 && sh.mode == o.modes[0] && sh.sync == o.syncs[0] {
				d, err := death(c)
				if err != nil {
					c.close()
					return fmt.Errorf("node death, n=%d: %w", n, err)
				}
				fmt.Fprintf(stderr, "death n=%d: detected %v, freed %v\n", n, d.detect.Round(time.Millisecond), d.free.Round(time.Millisecond))
				deaths = append(deaths, d)
			}
			c.close()
		}
	}
	report(stdout, o, results, deaths, ml)
	return nil
}

// line is a run's progress line.
func (r runResult) line() string {
	s := r.spec
	return fmt.Sprintf("n=%d %s %s %s sync=%v: windows mean %.3f max %.3f ×L, false denials %d, converge p99 %s ms, %.0f B/s/node",
		s.n, s.kind, s.spread, s.mode, s.sync, r.meanL, r.maxL, r.falseDen, ms(r.p99), r.bytesMean)
}

// windowLine lists each window ÷ L with the longest stall in it.
func (r runResult) windowLine() string {
	var b strings.Builder
	b.WriteString("windows ÷ L (longest stall):")
	for i, c := range r.windows {
		fmt.Fprintf(&b, " %.3f", float64(c)/float64(r.spec.limit))
		if i < len(r.stalls) && r.stalls[i] > 0 {
			fmt.Fprintf(&b, "(%dms)", r.stalls[i].Milliseconds())
		}
	}
	return b.String()
}

func ms(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "never"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// known formats v, or "-" when it is negative (unknown).
func known(v float64, format string) string {
	if v < 0 || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func ratio(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// report prints the tables and, last, the RESULT line.
func report(w io.Writer, o options, results []runResult, deaths []deathResult, ml mlTimers) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "n\tkind\tspread\tshipping\tsync\tmean/L\tmax/L\tslide/L\tfalse den.\tconv p50 ms\tconv p99 ms\tnever\tB/s/node\tB/s max\tlate p99 ms\tstall max ms\tcpu %\tload\tudp drops\t")
	for _, r := range results {
		s := r.spec
		fd := strconv.Itoa(r.falseDen)
		if r.strictDen != r.falseDen {
			fd += fmt.Sprintf(" (%d)", r.strictDen)
		}
		never := "-"
		if r.probes > 0 {
			never = fmt.Sprintf("%d/%d", r.lost, r.probes)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t%.1f\t%d\t%s\t%s\t%s\t\n",
			s.n, s.kind, s.spread, s.mode, s.sync, ratio(r.meanL), ratio(r.maxL), ratio(r.slideL),
			fd, ms(r.p50), ms(r.p99), never, r.bytesMean, r.bytesMax, r.genLagP99, slices.Max(append([]time.Duration{0}, r.stalls...)).Milliseconds(),
			known(r.cpu*100, "%.0f"), known(r.load, "%.1f"), known(float64(r.udpDrops), "%.0f"))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nmean/L, max/L: cluster-wide grants per aligned 1 s window after the warm-up ÷ L; slide/L: the busiest 1 s window anywhere after the warm-up.")
	fmt.Fprintln(w, "false den.: denials while an exact limiter fed every grant in time order had room (in brackets when it differs: counting only grants made before the decision's clock reading).")
	fmt.Fprintln(w, "conv: a probe hit on a fresh domain until every other node's engine counts it; never: probes some node had not counted 2 sync intervals after the run.")
	fmt.Fprintln(w, "B/s: gossip bytes sent (sync + push/pull) per node per second, mean and busiest node. late: how late the generator issued its requests.")
	fmt.Fprintln(w, "stall: the longest a goroutine sleeping 1 ms overslept (the whole process waiting for a CPU); cpu: this process, % of one CPU; load: 1-min load average; udp drops: the host's UDP receive-buffer drops.")

	// Drift shipping beside the tick-only baseline.
	type key struct {
		n          int
		kind, sprd string
		sync       time.Duration
	}
	tick := map[key]runResult{}
	for _, r := range results {
		if r.spec.mode == "tick" {
			tick[key{r.spec.n, r.spec.kind, r.spec.spread, r.spec.sync}] = r
		}
	}
	if len(tick) > 0 {
		fmt.Fprintln(w, "\nmax window ÷ L, drift shipping beside tick-only:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "n\tsync\tkind\tspread\tdrift\ttick-only\tdrift conv p99 ms\ttick conv p99 ms\tdrift B/s/node\ttick B/s/node\t")
		for _, r := range results {
			t, ok := tick[key{r.spec.n, r.spec.kind, r.spec.spread, r.spec.sync}]
			if r.spec.mode != "drift" || !ok {
				continue
			}
			fmt.Fprintf(tw, "%d\t%v\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t\n", r.spec.n, r.spec.sync, r.spec.kind, r.spec.spread,
				ratio(r.maxL), ratio(t.maxL), ms(r.p99), ms(t.p99), r.bytesMean, t.bytesMean)
		}
		tw.Flush()
	}

	if len(deaths) > 0 {
		fmt.Fprintf(w, "\nnode death (a node holding %d copies shut down without leaving; memberlist DefaultLANConfig: probe interval %v, probe timeout %v, suspicion mult %d, max timeout mult %d):\n",
			deathHolds, ml.probeInterval, ml.probeTimeout, ml.suspicionMult, ml.maxMult)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "n\tsuspicion min s\tsuspicion max s\tconfirmations\texpected detection s\tdetected s\tfreed s\tfreed − detected ms\t")
		for _, d := range deaths {
			fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%d\t%.1f\t%.2f\t%.2f\t%d\t\n", d.n, d.suspMin.Seconds(), d.suspMax.Seconds(), d.confirm,
				d.expected.Seconds(), d.detect.Seconds(), d.free.Seconds(), d.obol.Milliseconds())
		}
		tw.Flush()
		fmt.Fprintln(w, "suspicion min = SuspicionMult × max(1, log10 N) × ProbeInterval (memberlist's suspicionTimeout); when N−2 ≥ SuspicionMult−2 other nodes can confirm, the timer")
		fmt.Fprintln(w, "starts at max = SuspicionMaxTimeoutMult × min and falls to min once SuspicionMult−2 confirmations arrive. expected detection = (N−1)/N × ProbeInterval (until a survivor")
		fmt.Fprintln(w, "first probes the dead node) + ProbeInterval (the failed probe round: ack timeout, then indirect probes) + suspicion min.")
		fmt.Fprintln(w, "detected: the last survivor's NodeGone; freed: the last survivor's holds of the dead node at zero.")
	}

	res := summarize(o, results, deaths)
	if res.n > 0 {
		fmt.Fprintf(w, "\ntargets (drift shipping, n=%d, sync %v):\n", res.n, o.syncs[0])
		for _, t := range res.targets {
			fmt.Fprintln(w, "  "+t)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, res.line)
}

// summary is the RESULT line and the checks behind it.
type summary struct {
	n       int
	line    string
	targets []string
}

// summarize builds the RESULT line from the drift-shipping runs at the first
// sync interval of the largest size run (n=10 by default): overshoot_max is
// the worst window ÷ L over both kinds and spreads, false_denials their sum,
// converge_p99_ms the worst p99, bytes_per_node_s the highest per-node mean,
// free_after_death_s the death measurement at that size.
func summarize(o options, results []runResult, deaths []deathResult) summary {
	var s summary
	sync := o.syncs[0]
	for _, r := range results {
		if r.spec.mode == "drift" && r.spec.sync == sync {
			s.n = max(s.n, r.spec.n)
		}
	}
	if s.n == 0 {
		s.line = "RESULT none (no drift-shipping run at the first sync interval)"
		return s
	}
	over, conv, bytes := math.NaN(), math.NaN(), math.NaN()
	fd := 0
	for _, r := range results {
		if r.spec.mode != "drift" || r.spec.sync != sync || r.spec.n != s.n {
			continue
		}
		if math.IsNaN(over) || r.maxL > over {
			over = r.maxL
		}
		if math.IsNaN(conv) || r.p99 > conv {
			conv = r.p99
		}
		if math.IsNaN(bytes) || r.bytesMean > bytes {
			bytes = r.bytesMean
		}
		fd += r.falseDen
	}
	free := "-"
	var dr *deathResult
	for i := range deaths {
		if deaths[i].n == s.n {
			dr = &deaths[i]
			free = strconv.FormatFloat(dr.free.Seconds(), 'f', 2, 64)
		}
	}
	s.line = fmt.Sprintf("RESULT n=%d drift=%g overshoot_max=%s false_denials=%d converge_p99_ms=%s bytes_per_node_s=%.0f free_after_death_s=%s",
		s.n, o.drift, ratio(over), fd, ms(conv), bytes, free)
	mark := func(ok bool) string {
		if ok {
			return "met "
		}
		return "MISSED"
	}
	s.targets = append(s.targets,
		fmt.Sprintf("%s worst window %s × L ≤ 1.10 × L", mark(over <= 1.10), ratio(over)),
		fmt.Sprintf("%s false denials %d = 0", mark(fd == 0), fd),
		fmt.Sprintf("%s convergence p99 %s ms ≤ 2 × %v", mark(conv <= 2*float64(sync.Milliseconds())), ms(conv), sync))
	if dr != nil {
		s.targets = append(s.targets,
			fmt.Sprintf("%s copies freed %.2f s after the death ≤ detection %.2f s + %v (the formula's expected detection: %.1f s)",
				mark(dr.free <= dr.detect+sync), dr.free.Seconds(), dr.detect.Seconds(), sync, dr.expected.Seconds()))
	}
	if s.n != 10 {
		s.targets = append(s.targets, fmt.Sprintf("(at n=%d: the targets are stated for n=10)", s.n))
	}
	return s
}
