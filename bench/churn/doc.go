// Command churn measures what agents coming and going cost obol's counts,
// on the virtual-time cluster simulator (sim/cluster): rolling
// restarts of 10 and 100 nodes (new names), a 1,000-node mesh in owner
// mode rolled 10% at a time, scale-out 3 → 30 and scale-in 30 → 3 under
// load, and a mesh that restarts one node every simulated minute. Each
// runs on a tiers resource with a one-hour window (so that lost counts
// are judged exactly) and on a gcra one. See README.md.
//
//	go run ./bench/churn            # every scenario, under about 3 minutes on 2 cores
//	go run ./bench/churn -quick     # smaller meshes
//
// The last line is machine-readable:
//
//	RESULT churn worst_window_ratio=… lost_hits=… false_denials=… join_sync_p99_ms=…
package main
