// Command load is obol's load generator. It measures the agent against the
// floor, a bare fasthttp handler that answers every request with one fixed
// reply of the agent's size, under the identical load, and reports for both
// requests and decisions per second, latency quantiles (HDR histogram, µs),
// errors and the server's CPU time per request and per decision, read from
// /proc/PID/stat; then the agent/floor ratios.
//
//	go run ./bench/load             # the default sequence, under two minutes
//	go run ./bench/load -d 2s       # the same, shorter
//	go run ./bench/load -enc msgpack -batch 100 -c 16
//	go run ./bench/load -enc json -rounds 8 -d 5s   # one scenario, eight alternating rounds
//	go run ./bench/load -soak 10m   # 80% of the max for ten minutes, watching RSS
//
// By default it builds ./cmd/agent with `go build` into a temporary
// directory and runs it on a config it writes (see -print-config), on a
// temporary Unix socket and a free loopback port; -agent-socket and
// -agent-pid attach it to an agent already running instead (-agent-pid
// alone: on the agent's default socket, $OBOL_SOCKET, else
// $XDG_RUNTIME_DIR/obol.sock, else /run/obol/obol.sock, else
// /tmp/obol-UID/obol.sock). The floor runs
// as a child process of its own (this binary with a hidden -serve-floor
// flag), so that its CPU time is read exactly as the agent's is.
//
// The -c persistent HTTP/1.1 connections (keep-alive, no pipelining), over
// the Unix socket or, with -tcp, loopback TCP, are all driven by one event
// loop on an OS thread of its own (epoll, non-blocking sockets), so that the
// generator takes as little as it can from the cores it shares with the
// server. Requests are encoded before a phase starts; a request picks one
// uniformly at random, and a reply is parsed no further than its status line
// and three headers. The load is closed loop (the next request leaves when
// the reply arrives) or, with -rate, open loop at a fixed total rate, where a
// request that leaves late has its latency measured from the instant it was
// scheduled (the coordinated-omission correction). -cpuprofile profiles the
// generator itself.
//
// The last line of the default run is machine-readable:
//
//	RESULT agent_rps=… floor_rps=… rps_ratio=… cpu_ratio=… p99_us=… batch_json_dps=… batch_msgpack_dps=…
//
// Everything it connects to is on this machine (Unix sockets and 127.0.0.1),
// and every loop stops by itself at the end of its phase. It runs on Linux
// only. bench/README.md describes every flag and how to read the table.
package main
