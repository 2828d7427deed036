package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// options are bench/rls's flags.
type options struct {
	duration, warmup  time.Duration
	concurrency       int
	rounds            int
	conns             int
	genProcs          int
	keys              int
	skipTCP, skipPeer bool
}

func main() {
	if benchkit.IsFloor(os.Args[1:]) {
		if err := floorMain(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var o options
	fs := flag.NewFlagSet("rls", flag.ExitOnError)
	fs.DurationVar(&o.duration, "d", 3*time.Second, "measured time per service, transport and round")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds, each measuring every service and transport once in turn")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "time driven before measuring")
	fs.IntVar(&o.concurrency, "c", 32, "calls in flight (closed loop)")
	fs.IntVar(&o.conns, "conns", 4, "HTTP/2 connections the calls share")
	fs.IntVar(&o.genProcs, "gen-procs", 1, "GOMAXPROCS of the generator (the servers keep every core)")
	fs.IntVar(&o.keys, "keys", 256, "distinct descriptor values in the load")
	fs.BoolVar(&o.skipTCP, "skip-tcp", false, "measure over the Unix sockets only")
	fs.BoolVar(&o.skipPeer, "skip-ratelimit", false, "do not build or run envoyproxy/ratelimit and Redis")
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rls:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// measured is one row of the table.
type measured struct {
	name, transport string
	res             *loadResult
	err             error
}

// run builds and starts the services, drives each and prints the table and
// the RESULT line. It returns false when a service could not be measured.
func run(ctx context.Context, o options, w io.Writer) (bool, error) {
	if runtime.GOOS != "linux" {
		return false, errNoProc
	}
	if o.rounds < 1 || o.concurrency < 1 || o.conns < 1 || o.keys < 1 || o.genProcs < 1 {
		return false, fmt.Errorf("-rounds %d, -c %d, -conns %d, -keys %d, -gen-procs %d: each must be at least 1", o.rounds, o.concurrency, o.conns, o.keys, o.genProcs)
	}
	dir, err := os.MkdirTemp("", "obol-bench-rls-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	runtimeRoot := filepath.Join(dir, "runtime")
	cfgDir, err := writeConfig(runtimeRoot)
	if err != nil {
		return false, err
	}
	requests, err := loadRequests(4096, o.keys)
	if err != nil {
		return false, err
	}

	fmt.Fprintf(w, "building obol's agent and %s@%s …\n", ratelimitModule, ratelimitVersion)
	var services []*service
	defer func() {
		for _, s := range services {
			s.stop()
		}
	}()
	floor, err := startFloor(ctx, dir)
	if err != nil {
		return false, err
	}
	services = append(services, floor)
	var obol, peer *service
	var obolErr, peerErr error
	if bin, err := buildAgent(ctx, dir); err != nil {
		obolErr = err
	} else if obol, obolErr = startObol(ctx, bin, dir, cfgDir); obolErr == nil {
		services = append(services, obol)
	}
	if o.skipPeer {
		peerErr = fmt.Errorf("skipped (-skip-ratelimit)")
	} else if bin, err := buildRatelimit(ctx, dir); err != nil {
		peerErr = err
	} else if peer, peerErr = startRatelimit(ctx, bin, dir, runtimeRoot); peerErr == nil {
		services = append(services, peer)
	}

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.genProcs))
	fmt.Fprintf(w, "load: closed loop, %d calls in flight over %d HTTP/2 connections, %d keys; %d rounds of %v warmup + %v per service; generator GOMAXPROCS=%d of %d cores, servers unrestricted\n",
		o.concurrency, o.conns, o.keys, o.rounds, o.warmup, o.duration, o.genProcs, runtime.NumCPU())
	type job struct {
		name, transport, target string
		svc                     *service
		err                     error
	}
	jobs := []job{
		{"floor", "unix", "unix://" + floor.socket, floor, nil},
		{"obol", "unix", "", obol, obolErr},
		{"ratelimit+redis", "unix", "", peer, peerErr},
	}
	if obol != nil {
		jobs[1].target = "unix://" + obol.socket
	}
	if peer != nil {
		jobs[2].target = "unix://" + peer.socket
	}
	if !o.skipTCP {
		jobs = append(jobs, job{"floor", "tcp", "passthrough:///" + floor.tcp, floor, nil})
		j := job{"obol", "tcp", "", obol, obolErr}
		if obol != nil {
			j.target = "passthrough:///" + obol.tcp
		}
		jobs = append(jobs, j)
	}
	// The rounds interleave the services, so that a change in what else
	// runs on the machine weighs on each alike.
	rows := make([]measured, len(jobs))
	for i, j := range jobs {
		rows[i] = measured{name: j.name, transport: j.transport, err: j.err}
	}
	for range o.rounds {
		for i, j := range jobs {
			if rows[i].err != nil {
				continue
			}
			res, err := runLoad(ctx, loadSpec{
				target: j.target, conns: o.conns, concurrency: o.concurrency,
				warmup: o.warmup, duration: o.duration, requests: requests,
			}, j.svc.pids)
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if err != nil {
				rows[i].err = err
				continue
			}
			rows[i].res = rows[i].res.add(res)
		}
	}
	return report(w, rows), nil
}

// report prints the table, the ratios and the RESULT line, and returns
// whether every row was measured.
func report(w io.Writer, rows []measured) bool {
	fmt.Fprintf(w, "\n%-16s %-5s %10s %8s %8s %8s %9s %9s %7s %7s\n", "service", "via", "req/s", "p50 µs", "p99 µs", "p999 µs", "cpu µs/op", "gen µs/op", "over%", "errors")
	all := true
	find := func(name, transport string) *loadResult {
		for _, r := range rows {
			if r.name == name && r.transport == transport && r.res != nil {
				return r.res
			}
		}
		return nil
	}
	for _, r := range rows {
		if r.err != nil {
			all = false
			fmt.Fprintf(w, "%-16s %-5s not measured: %s\n", r.name, r.transport, firstLine(r.err.Error()))
			continue
		}
		x := r.res
		over := 0.0
		if x.calls > 0 {
			over = 100 * float64(x.overLimit) / float64(x.calls)
		}
		fmt.Fprintf(w, "%-16s %-5s %10.0f %8d %8d %8d %9.1f %9.1f %6.1f%% %7d\n", r.name, r.transport, x.rps(),
			x.hist.ValueAtQuantile(50), x.hist.ValueAtQuantile(99), x.hist.ValueAtQuantile(99.9), x.cpuPerCall(), x.genCPUPerCall(), over, x.errors)
		if x.firstErr != nil {
			fmt.Fprintf(w, "    first error: %v\n", x.firstErr)
		}
	}
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(w, "\n%s (%s):\n%v\n", r.name, r.transport, r.err)
		}
	}
	obol, floor, peer := find("obol", "unix"), find("floor", "unix"), find("ratelimit+redis", "unix")
	val := func(r *loadResult, f func(*loadResult) float64, format string) string {
		if r == nil {
			return "NA"
		}
		return fmt.Sprintf(format, f(r))
	}
	ratio := func(a, b *loadResult, f func(*loadResult) float64) string {
		if a == nil || b == nil || f(b) == 0 {
			return "NA"
		}
		return fmt.Sprintf("%.2f", f(a)/f(b))
	}
	rps := (*loadResult).rps
	cpu := (*loadResult).cpuPerCall
	fmt.Fprintf(w, "\nover the Unix socket: obol/floor req/s %s (target ≥ 0.75), obol/ratelimit req/s %s (target ≥ 2), obol/ratelimit+redis CPU per call %s (target ≤ 0.25)\n",
		ratio(obol, floor, rps), ratio(obol, peer, rps), ratio(obol, peer, cpu))
	fmt.Fprintf(w, "RESULT rls_rps=%s floor_rps=%s ratelimit_rps=%s cpu_us=%s ratelimit_cpu_us=%s\n",
		val(obol, rps, "%.0f"), val(floor, rps, "%.0f"), val(peer, rps, "%.0f"), val(obol, cpu, "%.2f"), val(peer, cpu, "%.2f"))
	return all
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
