package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/sim/cluster"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
		os.Exit(1)
	}
}

// scenario is one row's shape before its resource is set.
type scenario struct {
	name      string
	sc        cluster.Scenario
	tiersOnly bool // too large to run twice in the time budget
}

type options struct {
	quick    bool
	only     string
	seed     uint64
	sync     time.Duration
	drift    float64
	pushPull time.Duration
	owner    int
	profile  string
	still    bool
}

func run(args []string, out, log io.Writer) error {
	fs := flag.NewFlagSet("churn", flag.ContinueOnError)
	fs.SetOutput(log)
	var o options
	fs.BoolVar(&o.quick, "quick", false, "smaller meshes and shorter runs (the 1,000-node roll on 300 nodes)")
	fs.StringVar(&o.only, "only", "", "run only the scenarios whose name contains this")
	fs.Uint64Var(&o.seed, "seed", 1, "seed")
	fs.DurationVar(&o.sync, "sync", 250*time.Millisecond, "sync interval")
	fs.Float64Var(&o.drift, "drift", 0.05, "drift tolerance of both resources")
	fs.DurationVar(&o.pushPull, "push-pull", 0, "model memberlist's periodic push/pull at this interval (0: not modelled; memberlist's default is 30s)")
	fs.IntVar(&o.owner, "owner-nodes", 0, "members of the owner-mode roll (0: 1,000, or 300 with -quick; at least 100, owner mode's threshold)")
	fs.BoolVar(&o.still, "no-churn", false, "run each scenario's mesh with nothing joining, leaving or restarting (what the churn adds, for the tiers rows too)")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the run to this file (also on interrupt)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.drift < 0 || o.drift > 1 || o.sync < time.Millisecond || o.pushPull < 0 {
		return fmt.Errorf("-drift must be in [0, 1], -sync at least 1ms, -push-pull ≥ 0")
	}
	if o.owner != 0 && (o.owner < 100 || o.owner > 10000) {
		return fmt.Errorf("-owner-nodes %d: want 0 (the default) or 100 to 10000 members", o.owner)
	}
	if o.profile != "" {
		stop, err := startProfile(o.profile, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	hourJS := fmt.Sprintf(`{"kind":"tiers","tiers":"L,3600,3600,0","drift":%g}`, o.drift)
	fmt.Fprintf(out, "sync %s, drift %g, push/pull %s, seed %d; tiers: one window of 3600 s (LostHits judged), gcra: period 1 s\n", o.sync, o.drift, pp(o.pushPull), o.seed)
	fmt.Fprintf(out, "%-24s %-5s %6s %6s %8s %10s %8s %8s %6s %6s %7s %9s %9s %8s %8s %9s %8s %9s %9s %7s\n",
		"scenario", "kind", "nodes", "joins", "grants", "worst/L", "still/L", "solo/L", "lost", "extra", "falseD", "sync p50", "sync p99", "unsynced", "heldOrig", "heldKeys", "resyncs", "state MB", "all MB", "wall")
	var worst, added, overSolo float64
	var lost, fd int
	var syncP99 time.Duration
	var lostRows []string
	for _, s := range scenarios(o.quick, o.owner) {
		if o.only != "" && !strings.Contains(s.name, o.only) {
			continue
		}
		for _, kind := range []string{"tiers", "gcra"} {
			if kind == "gcra" && s.tiersOnly {
				continue
			}
			sc := s.sc
			if o.still {
				sc.Restarts, sc.Starts, sc.Leaves = nil, nil, nil
			}
			sc.Seed, sc.SyncInterval, sc.PushPullEvery, sc.MaxEvents = o.seed, o.sync, o.pushPull, 2_000_000_000
			sc.Encrypt, sc.Label = true, "obol"
			// Each key's limit is half of what it is offered, over the
			// hour (tiers: reached about halfway through the run) or per
			// second (gcra: the key is limited throughout).
			perKey := sc.Rate * float64(sc.Nodes) / float64(max(sc.Keys, 1))
			var js string
			if kind == "tiers" {
				js = strings.Replace(hourJS, "L", fmt.Sprint(max(10, int(perKey*sc.Duration.Seconds()/2))), 1)
				// The tiers figures are over the whole run (one instance,
				// the joins, the end): measure the bytes from 1 s on, not
				// from the default warm-up (half the run for an hour).
				sc.Warmup = time.Second
			} else {
				l := max(5, int(math.Ceil(perKey/2)))
				js = fmt.Sprintf(`{"kind":"gcra","burst":%d,"count":%d,"period":"1s","drift":%g}`, l, l, o.drift)
			}
			rc, err := config.ParseResource([]byte(js))
			if err != nil {
				return err
			}
			sc.Resource = rc
			fmt.Fprintf(log, "%s %s ...\n", s.name, kind)
			start := time.Now()
			r, err := cluster.Run(context.Background(), sc)
			if err != nil {
				return fmt.Errorf("%s %s: %w", s.name, kind, err)
			}
			ratio := r.WorstWindowRatio
			if kind == "tiers" {
				ratio = r.WorstInstanceRatio // one hour: no aligned window fits the run
			}
			worst = max(worst, ratio)
			still, solo := "-", "-"
			if kind == "gcra" {
				solo = fmt.Sprintf("%.3f", r.SoloWorstWindowRatio)
				overSolo = max(overSolo, ratio/max(r.SoloWorstWindowRatio, 1e-9))
				// The same mesh with nothing joining, leaving or
				// restarting: what of worst/L the churn adds.
				b := sc
				b.Restarts, b.Starts, b.Leaves = nil, nil, nil
				br, err := cluster.Run(context.Background(), b)
				if err != nil {
					return fmt.Errorf("%s %s without churn: %w", s.name, kind, err)
				}
				still = fmt.Sprintf("%.3f", br.WorstWindowRatio)
				added = max(added, ratio-br.WorstWindowRatio)
			}
			fd += r.FalseDenials
			syncP99 = max(syncP99, r.JoinSyncP99)
			if r.LostHits > 0 {
				lost = max(lost, r.LostHits)
				lostRows = append(lostRows, fmt.Sprintf("%s (%s): %d granted hits lost by one node", s.name, kind, r.LostHits))
			}
			fmt.Fprintf(out, "%-24s %-5s %6d %6d %8d %10.3f %8s %8s %6s %6s %7d %9s %9s %8d %8d %9d %8d %9.2f %9.2f %7s\n",
				s.name, kind, sc.Nodes, r.Joins, r.Grants, ratio, still, solo, judged(r.LostHits), judged(r.ExtraHits), r.FalseDenials,
				ms(r.JoinSyncP50), ms(r.JoinSyncP99), r.JoinsUnsynced, r.HeldOriginsMax, r.HeldKeysMax,
				r.Resyncs, float64(r.StateBytes)/1e6, float64(r.Bytes)/1e6, time.Since(start).Round(100*time.Millisecond))
		}
	}
	fmt.Fprintln(out, "worst/L: tiers, the most one key granted in its hour ÷ the limit; gcra, the worst 1 s window ÷ the limit. lost/extra: granted hits a node")
	fmt.Fprintln(out, "does not count / counts twice at the end (tiers only; '-' for gcra). sync: from a join until the node's view agrees with the oracle.")
	fmt.Fprintln(out, "resyncs: push/pulls a node asked for (Resync, ResyncNow); state MB: bytes of push/pull states (joins, resyncs); all MB: every byte sent; from 1 s (tiers) or 2 s (gcra) to the end of the load.")
	fmt.Fprintln(out, "still/L: gcra, worst/L of the same mesh (every node it reaches, all the run) with nothing joining, leaving or restarting.")
	fmt.Fprintln(out, "solo/L: gcra, worst/L of one exact bucket per key fed every request of the row (a bucket may grant its burst plus a period's refill in a window).")
	fmt.Fprintf(out, "gcra: churn adds at most %.3f × L to the worst 1 s window of the same mesh without churn; the mesh's worst window is at most %.3f × one exact bucket's\n", added, overSolo)
	for _, l := range lostRows {
		fmt.Fprintln(out, "LOST", l)
	}
	fmt.Fprintf(out, "RESULT churn worst_window_ratio=%.3f lost_hits=%d false_denials=%d join_sync_p99_ms=%.0f gcra_worst_over_solo=%.3f\n", worst, lost, fd, float64(syncP99)/1e6, overSolo)
	return nil
}

// startProfile starts a CPU profile into path; the returned stop ends
// it. An interrupt ends it too, and the process, so a run too long to
// wait for still shows where its time went.
func startProfile(path string, log io.Writer) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile %s: %w", path, err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	done := make(chan struct{})
	stop = func() {
		close(done)
		signal.Stop(sig)
		pprof.StopCPUProfile()
		f.Close()
	}
	go func() {
		select {
		case <-sig:
			pprof.StopCPUProfile()
			f.Close()
			fmt.Fprintf(log, "interrupted: CPU profile written to %s\n", path)
			os.Exit(130)
		case <-done:
		}
	}()
	return stop, nil
}

func judged(n int) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/1e6) }

func pp(d time.Duration) string {
	if d == 0 {
		return "not modelled"
	}
	return d.String()
}

// scenarios are the rows (see README.md).
// owner, when not 0, sets the owner-mode roll's size.
func scenarios(quick bool, owner int) []scenario {
	big, bigEvery, longFor := 1000, 1500*time.Millisecond, 10*time.Minute
	roll100 := 100
	if quick {
		big, roll100, longFor = 300, 30, 4*time.Minute
	}
	if owner != 0 {
		big = owner
	}
	var out []scenario
	roll := func(name string, n int, every, down time.Duration, rate float64, keys int) {
		s := cluster.Scenario{Nodes: n, Keys: keys, Rate: rate, Duration: time.Duration(n)*every + 10*time.Second}
		for i := range n {
			s.Restarts = append(s.Restarts, cluster.Restart{Node: i, At: 5*time.Second + time.Duration(i)*every, Down: down})
		}
		out = append(out, scenario{name, s, false})
	}
	roll("roll-10", 10, 5*time.Second, time.Second, 20, 20)
	roll(fmt.Sprintf("roll-%d", roll100), roll100, time.Second, 500*time.Millisecond, 2, 50)
	// Owner mode (reconcile's default, from 100 nodes): 10% at a time.
	s := cluster.Scenario{Nodes: big, Keys: 100, Rate: 0.25, Duration: 10*bigEvery + 8*time.Second}
	for w := range 10 {
		for i := w * big / 10; i < (w+1)*big/10; i++ {
			s.Restarts = append(s.Restarts, cluster.Restart{Node: i, At: 4*time.Second + time.Duration(w)*bigEvery, Down: 500 * time.Millisecond})
		}
	}
	out = append(out, scenario{fmt.Sprintf("owner-%d-roll-10%%", big), s, true})
	s = cluster.Scenario{Nodes: 30, Keys: 20, Rate: 5, Duration: 45 * time.Second}
	for i := 3; i < 30; i++ {
		s.Starts = append(s.Starts, cluster.Start{Node: i, At: 5*time.Second + time.Duration(i-3)*time.Second})
	}
	out = append(out, scenario{"scale-out-3-30", s, false})
	s = cluster.Scenario{Nodes: 30, Keys: 20, Rate: 5, Duration: 45 * time.Second}
	for i := 3; i < 30; i++ {
		s.Leaves = append(s.Leaves, cluster.Leave{Node: i, At: 5*time.Second + time.Duration(i-3)*time.Second})
	}
	out = append(out, scenario{"scale-in-30-3", s, false})
	// One restart every simulated minute, round-robin, new names.
	s = cluster.Scenario{Nodes: 10, Keys: 20, Rate: 2, Duration: longFor}
	for m := 1; time.Duration(m)*time.Minute < longFor; m++ {
		s.Restarts = append(s.Restarts, cluster.Restart{Node: (m - 1) % 10, At: time.Duration(m) * time.Minute, Down: time.Second})
	}
	out = append(out, scenario{"churn-1-per-min", s, false})
	return out
}
