// Command rls measures obol as Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit over gRPC)
// against the floor, a bare grpc-go handler that answers OK at once, and
// against envoyproxy/ratelimit with Redis, the service obol replaces, in one
// run, under the identical load:
//
//	go run ./bench/rls                 # about a minute and a half
//	go run ./bench/rls -d 5s -rounds 5 -c 64
//
// It builds obol's agent (go build ./cmd/agent) and envoyproxy/ratelimit
// (from the Go module proxy, at a pinned version, into a temporary
// directory: never vendored) and starts each as a child process: obol with
// --rls-socket, --rls-grpc and --rls-config; envoyproxy/ratelimit on its
// own redis-server (Debian's, on a temporary Unix socket, no persistence);
// the floor as this binary with a hidden -serve-floor flag. All three read
// one config directory in envoyproxy/ratelimit's format. The load is a
// closed loop of unary calls over a few HTTP/2 connections, in -rounds
// rounds that interleave the services, the requests
// encoded once beforehand and the replies read no further than their
// overall_code, the generator held to -gen-procs cores (GOMAXPROCS). For
// each service it measures calls per second, latency quantiles (HDR
// histogram, µs) and the server's CPU time per call from /proc/PID/stat
// (envoyproxy/ratelimit's is its own plus redis-server's), and prints a
// table, the obol/floor and obol/ratelimit ratios and a last line:
//
//	RESULT rls_rps=… floor_rps=… ratelimit_rps=… cpu_us=… ratelimit_cpu_us=…
//
// (rls_rps and cpu_us are obol's, over the Unix socket.)
//
// The package's tests hold the differential: the same seeded request trace
// sent to obol and envoyproxy/ratelimit in lockstep, aligned to the wall
// clock's seconds and minutes, every decision and limit_remaining compared
// (TestDifferential), with envoyproxy/ratelimit against a second instance of
// itself as the control (TestRatelimitControl). They skip, saying how to run
// them, where redis-server or the module proxy is missing, and under -short.
// Its benchmarks count what grpc-go itself allocates per call.
//
// Linux only (it reads /proc). Everything it connects to is on this machine.
// bench/rls/README.md describes the flags and how to read the table.
package main
