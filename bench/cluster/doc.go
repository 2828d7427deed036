// Command cluster measures obol's cluster model end to end: N in-process
// agents (engine, reconcile, gossip) over real memberlist on 127.0.0.1, one
// key limited to L per second, offered 5·L per second. For each size, key
// kind (gcra, tiers "L,1,1,0"), load spread (even, 80% on one node),
// shipping (at the drift threshold, or tick-only) and sync interval it
// reports the cluster's grants per 1 s window ÷ L, false denials against an
// exact limiter replayed from every grant, the convergence lag of single
// hits, and gossip bytes per node; then it kills a node holding copies and
// times how long the others keep counting them. With -keys K it measures
// instead what the mesh carries when each request hits one of K sparse keys
// (datagrams sent and received, where the others were lost, bytes, CPU per
// hit against an N = 1 floor, merge lag). See README.md.
//
//	go run ./bench/cluster                 # everything, 30 s per run (about half an hour)
//	go run ./bench/cluster -quick          # 3 s per run
//	go run ./bench/cluster -n 10 -kind tiers -mode drift -sync 250ms
//	go run ./bench/cluster -keys 10000 -rate 2000 -n 10,20 -d 10s
//
// The last line is machine-readable:
//
//	RESULT n=10 drift=0.05 overshoot_max=… false_denials=… converge_p99_ms=… bytes_per_node_s=… free_after_death_s=…
package main
