package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/sim/cluster"
)

// validate.go runs bench/cluster's scenarios on the simulator, to compare
// with what bench/cluster measures over real memberlist: one key limited
// to L = 1000 per second (gcra burst L, count L, period 1 s; tiers
// "L,1,1,0"), drift 0.05, 5·L requests per second in all, evenly paced
// and spread, a probe hit every 100 ms on a fresh domain, a 2 s warm-up;
// bytes as gossip.Node counts them (payload: no memberlist framing, no
// key, no label, as bench/cluster runs).

func validate(ns []int, d time.Duration, seed uint64, flushGap time.Duration, out io.Writer) error {
	const limit = 1000
	fmt.Fprintf(out, "bench/cluster's scenarios on the simulator: L=%d/s, offered 5·L/s evenly, drift 0.05, sync 250ms, delay 0.2ms, probes every 100ms, %s measured after a 2s warm-up, seed %d\n",
		limit, d, seed)
	fmt.Fprintf(out, "%5s %6s %8s %7s %7s %10s %12s %12s %10s\n", "n", "kind", "shipping", "mean/L", "max/L", "false den", "conv p50 ms", "conv p99 ms", "B/s/node")
	for _, n := range ns {
		for _, tick := range []bool{false, true} {
			for _, kind := range []string{"gcra", "tiers"} {
				js := fmt.Sprintf(`{"kind":"gcra","burst":%d,"count":%d,"period":"1s","drift":0.05}`, limit, limit)
				if kind == "tiers" {
					js = fmt.Sprintf(`{"kind":"tiers","tiers":"%d,1,1,0","drift":0.05}`, limit)
				}
				rc, err := config.ParseResource([]byte(js))
				if err != nil {
					return err
				}
				ship := "drift"
				if tick {
					ship = "tick"
				}
				r, err := cluster.Run(context.Background(), cluster.Scenario{
					Resource: rc, Nodes: n, TickOnly: tick, FlushGap: flushGap, Delay: 200 * time.Microsecond,
					Rate: 5 * limit / float64(n), Duration: 2*time.Second + d, Warmup: 2 * time.Second,
					ProbeEvery: 100 * time.Millisecond, Seed: seed, MaxEvents: 1 << 40,
					// bench/cluster's names, whose lengths count in the bytes
					ResourceName: "bench/" + kind, KeyPrefix: "load-", NamePrefix: fmt.Sprintf("n%d-%s-250ms-", n, ship),
				})
				if err != nil {
					return fmt.Errorf("n=%d %s: %w", n, kind, err)
				}
				fmt.Fprintf(out, "%5d %6s %8s %7.3f %7.3f %10d %12.0f %12.0f %10.0f\n", n, kind, ship, r.MeanWindowRatio, r.WorstWindowRatio,
					r.FalseDenials, float64(r.ConvergenceP50)/1e6, float64(r.ConvergenceP99)/1e6, r.PayloadBytesPerNodeS)
			}
		}
	}
	fmt.Fprintln(out, "conv: sampled load hits (the first of each bucket), not bench/cluster's probes; B/s/node: payload bytes sent per node, as gossip.Node's BytesOut.")
	return nil
}
