// Command scale measures what obol's gossip costs as the cluster grows, on
// the virtual-time simulator (sim/cluster): the real engine,
// reconcile and packet codec of N nodes on one virtual clock, for N in
// 10, 50, 100, 200 and 1000 and K = 1 (one hot key), 1,000 and 100,000
// keys. See README.md.
//
//	go run ./bench/scale            # the whole table
//	go run ./bench/scale -quick     # N ≤ 100, K ≤ 1000, shorter runs
//
// The last line is machine-readable:
//
//	RESULT n=1000 bytes_per_hit_per_peer=… bytes_per_node_s_ratio_1000_vs_10=… overshoot_max=… false_denials=… converge_p99_ticks=…
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/sim/cluster"
)

type options struct {
	ns, ks        []int
	rate          float64
	budget        float64
	d, warm, sync time.Duration
	drift         float64
	delay         time.Duration
	loss          float64
	encrypt       bool
	detail        bool
	flatHB        bool
	tickOnly      bool
	unsequenced   bool
	tresends      bool
	flushGap      time.Duration
	ownerFrom     int
	limit         int
	skew          string
	killOwner     time.Duration
	seed          uint64
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a list of positive integers", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func run(args []string, out, log io.Writer) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(log)
	n := fs.String("n", "10,50,100,200,1000", "cluster sizes")
	k := fs.String("k", "1,1000,100000", "key counts (1 = one hot key)")
	var o options
	fs.Float64Var(&o.rate, "rate", 10_000, "offered hits per second per node (capped by -budget)")
	fs.Float64Var(&o.budget, "budget", 3_000_000, "most hit deliveries (hits × peers) one run offers: the rate per node is min(-rate, budget/(N·(N−1)·d))")
	fs.DurationVar(&o.d, "d", 1750*time.Millisecond, "simulated time per run (at least one 1 s window after the warm-up)")
	fs.DurationVar(&o.warm, "warmup", 750*time.Millisecond, "simulated time before the measured span")
	fs.DurationVar(&o.sync, "sync", 250*time.Millisecond, "sync interval")
	fs.Float64Var(&o.drift, "drift", 0.05, "drift tolerance")
	fs.DurationVar(&o.delay, "delay", time.Millisecond, "one-way network delay")
	fs.Float64Var(&o.loss, "loss", 0, "datagram loss probability")
	fs.BoolVar(&o.encrypt, "encrypt", true, "count AES-GCM's 29 bytes per datagram")
	fs.BoolVar(&o.tickOnly, "tick-only", false, "ship on the tick only")
	fs.BoolVar(&o.unsequenced, "unsequenced", false, "ship as without sequenced streams: unsequenced messages, changes resent on a schedule (the mode before repair)")
	fs.BoolVar(&o.flatHB, "flat-heartbeat", false, "an idle node's heartbeat to every peer every fourth tick whatever N (the mode before stretched heartbeats)")
	fs.BoolVar(&o.tresends, "targeted-resends", false, "owner mode's messages to one node unnumbered, resent on the schedule (the mode before numbered targeted streams)")
	fs.DurationVar(&o.flushGap, "flush-gap", 0, "least time between two drift flushes of a node (0: reconcile's default, negative: none)")
	fs.IntVar(&o.ownerFrom, "owner-from", 0, "least cluster size in owner mode (0: reconcile's default, negative: never)")
	fs.IntVar(&o.limit, "limit", 0, "every key's limit per second (0: a quarter of what a key is offered, at least 10)")
	fs.StringVar(&o.skew, "skew", cluster.SkewEven, "the load's spread over the nodes: even, hot (node 0 takes 80%) or zipf")
	fs.DurationVar(&o.killOwner, "kill-owner", 0, "kill the owner of the first key this long into each run (0: none); survivors learn of it after 5.5 s")
	fs.Uint64Var(&o.seed, "seed", 1, "seed")
	quick := fs.Bool("quick", false, "N 10,50,100, K 1,1000, 1.25 s runs")
	prof := fs.String("cpuprofile", "", "write a CPU profile here")
	fs.BoolVar(&o.detail, "detail", false, "after each row, where its datagrams went: to every peer, to one node (counts, sums), and drift flushes")
	memprof := fs.String("memprofile", "", "write a heap profile here when the runs end")
	val := fs.Bool("validate", false, "run bench/cluster's scenarios (N from -n, default 3,10) instead of the table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if *val && !benchkit.SetFlags(fs)["n"] {
		*n = "3,10"
	}
	if o.ns, err = ints(*n); err != nil {
		return fmt.Errorf("-n: %w", err)
	}
	if o.ks, err = ints(*k); err != nil {
		return fmt.Errorf("-k: %w", err)
	}
	if *quick {
		o.ns, o.ks, o.d, o.warm = []int{10, 50, 100}, []int{1, 1000}, 1250*time.Millisecond, 250*time.Millisecond
	}
	if o.killOwner < 0 || (o.killOwner > 0 && o.killOwner >= o.d) {
		return fmt.Errorf("-kill-owner %s: want 0 (none) or a time within -d %s", o.killOwner, o.d)
	}
	if o.limit < 0 {
		return fmt.Errorf("-limit %d: want 0 (a quarter of the offered rate) or a positive limit per second", o.limit)
	}
	if o.rate <= 0 || o.budget <= 0 || o.d <= o.warm {
		return errors.New("-rate and -budget must be > 0 and -d longer than -warmup")
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *memprof != "" {
		defer writeHeap(*memprof, log)
	}
	if *val {
		return validate(o.ns, o.d, o.seed, o.flushGap, out)
	}
	return table(o, out, log)
}

// writeHeap writes the heap profile of what the last run left live.
func writeHeap(path string, log io.Writer) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(log, "-memprofile:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		fmt.Fprintln(log, "-memprofile:", err)
	}
}

// row is one run's figures.
type row struct {
	n, k  int
	rate  float64 // per node
	limit int
	r     cluster.Result
	wall  time.Duration
}

// limitFor is the key's limit per second: a quarter of what each key is
// offered (so that a hot key is really limited, and its burst is spent
// within the warm-up: it drains at 3·L per second), and at least 10.
func limitFor(n, k int, rate float64) int {
	return max(10, int(math.Ceil(rate*float64(n)/float64(k)/4)))
}

func table(o options, out, log io.Writer) error {
	fmt.Fprintf(out, "sync %s, drift %g, delay %s, loss %g, encrypt %v, tick-only %v, unsequenced %v, targeted resends %v, flat heartbeat %v, %s per run (%s measured), seed %d\n",
		o.sync, o.drift, o.delay, o.loss, o.encrypt, o.tickOnly, o.unsequenced, o.tresends, o.flatHB, o.d, o.d-o.warm, o.seed)
	fmt.Fprintf(out, "%5s %7s %8s %7s %9s %9s %8s %8s %9s %9s %9s %10s %9s %9s %10s %7s\n",
		"n", "keys", "hits/s", "limit", "B/hit/pr", "B/node/s", "dgram/s", "merge/s", "decB/s", "worst/L", "mean/L", "false den", "conv p50", "conv p99", "unconverged", "wall")
	var rows []row
	for _, n := range o.ns {
		for _, k := range o.ks {
			rate := min(o.rate, o.budget/(float64(n)*float64(max(n-1, 1))*o.d.Seconds()))
			limit := limitFor(n, k, rate)
			if o.limit > 0 {
				limit = o.limit
			}
			rc, err := config.ParseResource(fmt.Appendf(nil, `{"kind":"gcra","burst":%d,"count":%d,"period":"1s","drift":%g}`, limit, limit, o.drift))
			if err != nil {
				return err
			}
			delay := o.delay
			if delay == 0 {
				delay = cluster.NoDelay
			}
			sc := cluster.Scenario{
				Resource: rc, Nodes: n, Keys: k, Rate: rate, SyncInterval: o.sync, Delay: delay, Loss: o.loss,
				Encrypt: o.encrypt, Label: "obol", TickOnly: o.tickOnly, Unsequenced: o.unsequenced, TargetedResends: o.tresends, FlatHeartbeat: o.flatHB, FlushGap: o.flushGap, OwnerFrom: o.ownerFrom, Duration: o.d, Warmup: o.warm, Seed: o.seed,
				MaxEvents: 2_000_000_000, Skew: o.skew,
			}
			if o.killOwner > 0 {
				owner, _ := sc.Owners(0)
				sc.Deaths = []cluster.Death{{Node: owner, At: o.killOwner}}
			}
			fmt.Fprintf(log, "n=%d keys=%d rate=%.0f/s per node ...\n", n, k, rate)
			start := time.Now()
			r, err := cluster.Run(context.Background(), sc)
			if err != nil {
				return fmt.Errorf("n=%d keys=%d: %w", n, k, err)
			}
			w := row{n: n, k: k, rate: rate, limit: limit, r: r, wall: time.Since(start)}
			rows = append(rows, w)
			fmt.Fprintf(out, "%5d %7d %8.0f %7d %9.1f %9.0f %8.0f %8.0f %9.0f %9.3f %9.3f %10d %9s %9s %10d %7s\n",
				n, k, rate, limit, r.BytesPerHitPerPeer, r.BytesPerNodeS, r.DatagramsPerNodeS, r.MergesPerNodeS, r.DecodeBytesPerNodeS,
				r.WorstWindowRatio, r.MeanWindowRatio, r.FalseDenials, ms(r.ConvergenceP50), ms(r.ConvergenceP99), r.Unconverged, w.wall.Round(100*time.Millisecond))
			if o.detail {
				fmt.Fprintln(out, detail(r, n, o.d))
			}
		}
	}
	fmt.Fprintln(out, "B/hit/pr: wire bytes (payload + memberlist's 1+5 bytes, AES-GCM's 29, the label's 6) per granted hit per peer; B/node/s, dgram/s: sent per node;")
	fmt.Fprintln(out, "merge/s, decB/s: datagrams merged and bytes decoded per node; worst/L, mean/L: grants per key per 1 s window ÷ limit; conv: sampled hits until every peer's engine counts them.")
	fmt.Fprintln(out, result(o, rows))
	return nil
}

// detail splits a row's datagrams sent per node per second: to one node
// (owner mode: counts to an owner or successor, empty follow-ups, and
// sums), the rest (to every peer: ticks, flushes, heartbeats, repair);
// and drift flushes per node per second over the whole run (d).
func detail(r cluster.Result, n int, d time.Duration) string {
	per := func(v int64, span time.Duration) float64 { return float64(v) / span.Seconds() / float64(n) }
	targeted, sums, fu := per(r.Targeted, r.Measured), per(r.Sums, r.Measured), per(r.FollowUps, r.Measured)
	return fmt.Sprintf("      datagrams/s per node: %.0f to one node (%.0f counts, %.0f follow-ups, %.0f sums), %.0f others; drift flushes/s per node %.1f",
		targeted, targeted-sums-fu, fu, sums, r.DatagramsPerNodeS-targeted, per(r.Flushes, d))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/1e6) }

// result is the RESULT line, about the largest N (1000 in the full table):
// the sparsest K's bytes per hit per peer, and its bytes per node per
// second over the smallest N's at the same hit rate per node (B/hit/peer ×
// (N − 1), so that runs whose rate the budget capped still compare); the
// worst window, the false denials and the p99 convergence (in ticks) over
// every K at that N.
func result(o options, rows []row) string {
	bigN, smallN, bigK := slices.Max(o.ns), slices.Min(o.ns), slices.Max(o.ks)
	var sparse, base *row
	worst, fd, conv := 0.0, 0, 0.0
	for i := range rows {
		w := &rows[i]
		if w.n == bigN {
			worst = max(worst, w.r.WorstWindowRatio)
			fd += w.r.FalseDenials
			conv = max(conv, float64(w.r.ConvergenceP99)/float64(o.sync))
			if w.k == bigK {
				sparse = w
			}
		}
		if w.n == smallN && w.k == bigK {
			base = w
		}
	}
	ratio := math.NaN()
	if sparse != nil && base != nil && base.r.BytesPerHitPerPeer > 0 && smallN > 1 {
		ratio = sparse.r.BytesPerHitPerPeer * float64(bigN-1) / (base.r.BytesPerHitPerPeer * float64(smallN-1))
	}
	bhp := math.NaN()
	if sparse != nil {
		bhp = sparse.r.BytesPerHitPerPeer
	}
	return fmt.Sprintf("RESULT n=%d bytes_per_hit_per_peer=%.1f bytes_per_node_s_ratio_%d_vs_%d=%.1f overshoot_max=%.3f false_denials=%d converge_p99_ticks=%.2f",
		bigN, bhp, bigN, smallN, ratio, worst, fd, conv)
}
