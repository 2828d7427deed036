// Command adaptive runs OpenZiti's synthetic workload for its adaptive rate
// limiter on virtual time, with OpenZiti's rules and with obol's
// Predictive rules side by side. See doc.go.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/bench/internal/benchkit"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "adaptive:", err)
		}
		os.Exit(2)
	}
}

// The figures OpenZiti published for this workload (the blog post "Fun with
// Adaptive Rate Limiting", synthetic test, v0.32.0).
const (
	publishedCompleted = 4481
	publishedTimedOut  = 147
	publishedWindowLo  = 190
	publishedWindowHi  = 220
)

func run(args []string, out io.Writer) error {
	wl := workload{}
	var warmup time.Duration
	fs := flag.NewFlagSet("adaptive", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&wl.callers, "callers", 300, "callers, each retrying at once when rejected")
	fs.DurationVar(&wl.work, "work", 25*time.Millisecond, "the work of one call on the one worker")
	fs.DurationVar(&wl.overrun, "overrun", 0, "extra work time per call, uniform in [0, overrun): a real sleep's overshoot")
	fs.DurationVar(&wl.giveUp, "give-up", 5*time.Second, "a caller whose call took longer backs off")
	fs.DurationVar(&wl.duration, "duration", 116*time.Second, "virtual time simulated (OpenZiti's snapshot: 4628 calls of 25 ms ≈ 116 s)")
	fs.IntVar(&wl.min, "min", 5, "the window's floor")
	fs.IntVar(&wl.max, "max", 250, "the window's ceiling and start")
	fs.DurationVar(&wl.slowAt, "slow-at", 0, "from this instant on the work takes -slow-work (0 = never)")
	fs.DurationVar(&wl.slowWork, "slow-work", 50*time.Millisecond, "the work after -slow-at")
	fs.Uint64Var(&wl.seed, "seed", 1, "seed of -overrun (the run is deterministic for a seed)")
	fs.DurationVar(&wl.sample, "sample", 100*time.Millisecond, "how often the window is sampled")
	fs.DurationVar(&warmup, "warmup", 10*time.Second, "window samples before this are left out of the percentiles")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case wl.callers < 1 || wl.min < 1 || wl.max < wl.min:
		return fmt.Errorf("need -callers ≥ 1 and 1 ≤ -min ≤ -max")
	case wl.work <= 0 || wl.giveUp <= 0 || wl.duration <= 0 || wl.sample <= 0 || wl.overrun < 0 || wl.slowWork <= 0:
		return fmt.Errorf("-work, -give-up, -duration, -sample and -slow-work must be > 0, -overrun ≥ 0")
	}
	fmt.Fprintf(out, "%d callers retrying at once when rejected, one worker, %v of work per call", wl.callers, wl.work)
	if wl.overrun > 0 {
		fmt.Fprintf(out, " (+ up to %v)", wl.overrun)
	}
	if wl.slowAt > 0 {
		fmt.Fprintf(out, ", %v from %v on", wl.slowWork, wl.slowAt)
	}
	fmt.Fprintf(out, ";\na caller backs off when its call took over %v; window in [%d, %d]; %v of virtual time.\n\n", wl.giveUp, wl.min, wl.max, wl.duration)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rules\tsource\tcompleted\ttimed out\ttimed out ÷ processed\tdropped at head\twindow p5 / p50 / p95\twindow min–max")
	fmt.Fprintf(tw, "openziti\tpublished\t%d\t%d\t%.2f%%\t\t\t%d–%d (\"bouncing between\")\n",
		publishedCompleted, publishedTimedOut, 100*float64(publishedTimedOut)/float64(publishedCompleted+publishedTimedOut), publishedWindowLo, publishedWindowHi)
	res := map[adaptive.Rules]outcome{}
	skip := int(warmup / wl.sample)
	for _, r := range []adaptive.Rules{adaptive.OpenZiti, adaptive.Predictive} {
		o := simulate(wl, r)
		res[r] = o
		ws := o.windows
		if len(ws) > skip {
			ws = ws[skip:]
		}
		fmt.Fprintf(tw, "%s\tthis run\t%d\t%d\t%.2f%%\t%d\t%d / %d / %d\t%d–%d\n", r, o.completed, o.timedOut, 100*o.ratio(), o.dropped,
			benchkit.Percentile(ws, 0.05), benchkit.Percentile(ws, 0.5), benchkit.Percentile(ws, 0.95), benchkit.Percentile(ws, 0), benchkit.Percentile(ws, 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	oz, ours := res[adaptive.OpenZiti], res[adaptive.Predictive]
	ws := ours.windows
	if len(ws) > skip {
		ws = ws[skip:]
	}
	fmt.Fprintf(out, "\nRESULT ours_timedout_ratio=%.4f ours_completed=%d openziti_timedout_ratio=%.4f openziti_completed=%d ours_window_p50=%d\n",
		ours.ratio(), ours.completed, oz.ratio(), oz.completed, benchkit.Percentile(ws, 0.5))
	return nil
}
