// This file has one job: the program's entry, its flags and the run of its
// phases (the default table, a single phase, a soak) with their report and
// exit code; the load, the floor and the measures live in their own files.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
	"github.com/obol-dev/obol/internal/sock"
)

func main() {
	if benchkit.IsFloor(os.Args[1:]) {
		if err := floorMain(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError is a bad flag: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// exitCode reports err on stderr and returns the exit status: 0 without an
// error, 2 for bad flags, else 1 (a failure, errors under load, an endpoint
// not served, a failed soak).
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "load: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// options are the flags.
type options struct {
	conns       int
	tcp         bool
	encName     string
	enc         encoding
	batch       int
	domains     int
	dur         time.Duration
	warmup      time.Duration
	rounds      int
	rate        float64
	agentSocket string
	agentPID    int
	agentHTTP   string
	resources   []string
	rssResource string
	rssKeys     int
	soak        time.Duration
	soakEvery   time.Duration
	printConfig bool
	seed        uint64
	cpuProfile  string
	set         map[string]bool // the flags given on the command line
}

// single reports whether the flags ask for one scenario rather than the
// default sequence.
func (o *options) single() bool { return o.set["enc"] || o.set["batch"] || o.set["rate"] }

// attached reports whether the generator loads an agent it did not start.
func (o *options) attached() bool { return o.agentSocket != "" }

// parseFlags parses args; getenv gives the default socket of -agent-pid
// alone.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{set: map[string]bool{}}
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.conns, "c", 64, "persistent HTTP/1.1 connections, all driven by one event loop")
	fs.BoolVar(&o.tcp, "tcp", false, "connect over loopback TCP instead of the Unix socket")
	fs.StringVar(&o.encName, "enc", "json", "body and reply encoding: json or msgpack (setting it runs that one scenario)")
	fs.IntVar(&o.batch, "batch", 0, "send /v1/batch with this many items instead of /v1/request (setting it runs that one scenario)")
	fs.IntVar(&o.domains, "domains", 10000, "distinct domains, one chosen uniformly at random per request (per item of a batch)")
	fs.DurationVar(&o.dur, "d", 10*time.Second, "measured duration of each phase")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up before each phase's measurement")
	fs.IntVar(&o.rounds, "rounds", 1, "one-scenario runs: measure the floor and the agent this many times, alternating which goes first; the RESULT ratios are the medians of the rounds' ratios")
	fs.Float64Var(&o.rate, "rate", 0, "open loop at this many requests/s in total (0: closed loop; setting it runs that one scenario; with -soak, the soak's rate)")
	fs.StringVar(&o.agentSocket, "agent-socket", "", "attach to the agent serving this Unix socket instead of starting one (needs -agent-pid)")
	fs.IntVar(&o.agentPID, "agent-pid", 0, "process id of the attached agent, for its CPU time and RSS; alone, attaches on the agent's default socket ($OBOL_SOCKET, else "+sock.DefaultRule+")")
	fs.StringVar(&o.agentHTTP, "agent-http", "", "loopback TCP address of the attached agent (for -tcp)")
	resources := fs.String("resources", defaultResources, "comma-separated rate resources the domains are spread over")
	fs.StringVar(&o.rssResource, "rss-resource", defaultRSSResource, "gcra resource the RSS measurement fills with keys")
	fs.IntVar(&o.rssKeys, "rss-keys", 1_000_000, "distinct gcra keys to drive before reading the agent's RSS (0 skips it)")
	fs.DurationVar(&o.soak, "soak", 0, "soak: run /v1/request JSON at 80% of the measured max for this long, watching RSS and errors")
	fs.DurationVar(&o.soakEvery, "soak-every", time.Minute, "how often the soak reports")
	fs.BoolVar(&o.printConfig, "print-config", false, "print the agent config the generator uses, and exit")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the random choices")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the generator process (not the agent or the floor) to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./bench/load [flags]\n\n"+
			"Measures the agent against the floor (a bare fasthttp handler) under the same load.\n"+
			"With no scenario flag (-enc, -batch, -rate) it runs the default sequence; see bench/README.md.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.set = benchkit.SetFlags(fs)
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.agentSocket == "" && o.agentPID != 0 {
		if o.agentSocket, err = sock.ClientPath(getenv); err != nil {
			return nil, fmt.Errorf("-agent-pid without -agent-socket: %w", err)
		}
	}
	if o.enc, err = parseEncoding(o.encName); err != nil {
		return nil, err
	}
	for r := range strings.SplitSeq(*resources, ",") {
		if r = strings.TrimSpace(r); r != "" {
			o.resources = append(o.resources, r)
		}
	}
	switch {
	case o.conns < 1:
		return nil, fmt.Errorf("-c %d: want at least 1", o.conns)
	case o.batch < 0 || o.batch > 1000:
		return nil, fmt.Errorf("-batch %d: want 0 (/v1/request) to 1000 (the agent's limit)", o.batch)
	case o.domains < 1:
		return nil, fmt.Errorf("-domains %d: want at least 1", o.domains)
	case o.dur <= 0:
		return nil, fmt.Errorf("-d %s: want more than 0", o.dur)
	case o.warmup < 0:
		return nil, fmt.Errorf("-warmup %s: want 0 or more", o.warmup)
	case o.rounds < 1 || o.rounds > 100:
		return nil, fmt.Errorf("-rounds %d: want 1 to 100", o.rounds)
	case o.rounds > 1 && (!o.single() || o.soak > 0):
		return nil, errors.New("-rounds applies to one-scenario runs: add -enc, -batch or -rate (and no -soak)")
	case o.rate < 0:
		return nil, fmt.Errorf("-rate %g: want 0 (closed loop) or more", o.rate)
	case o.soak < 0 || o.soakEvery <= 0:
		return nil, errors.New("-soak and -soak-every must be positive")
	case o.rssKeys < 0:
		return nil, fmt.Errorf("-rss-keys %d: want 0 or more", o.rssKeys)
	case len(o.resources) == 0:
		return nil, errors.New("-resources: name at least one resource")
	case o.agentSocket != "" && o.agentPID == 0:
		return nil, errors.New("-agent-socket needs -agent-pid: the process to measure")
	case o.tcp && o.attached() && o.agentHTTP == "":
		return nil, errors.New("-tcp with an attached agent needs its address: -agent-http 127.0.0.1:PORT")
	case o.soak > 0 && (o.set["enc"] || o.set["batch"]):
		return nil, errors.New("-soak runs /v1/request JSON: drop -enc and -batch")
	}
	return o, nil
}

// runReport is what a run measured, for tests.
type runReport struct {
	rows   []*phaseResult
	result result
	rss    *rssResult
	soak   *soakResult
}

// bench is the state of one run.
type bench struct {
	o              *options
	agent          *server
	hz             int64
	dir            string
	stdout, stderr io.Writer
}

// timing is the warm-up and duration of a phase.
func (b *bench) timing() phaseTiming { return phaseTiming{warmup: b.o.warmup, dur: b.o.dur, hz: b.hz} }

// run runs the generator with args (without the program name) and prints
// the table on stdout; progress and problems go to stderr. Its error is nil
// when everything was measured without an error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (*runReport, error) {
	o, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil, nil
	}
	if err != nil {
		return nil, &usageError{err}
	}
	if o.printConfig {
		fmt.Fprint(stdout, agentConfig(o.rssKeys))
		return nil, nil
	}
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("the load generator reads /proc: it runs on Linux only, not %s", runtime.GOOS)
	}
	if o.cpuProfile != "" {
		stopProfile, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return nil, err
		}
		defer stopProfile()
	}
	hz, hzRead := benchkit.ClockTicks()
	dir, err := os.MkdirTemp("", "obol-load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	b := &bench{o: o, hz: hz, dir: dir, stdout: stdout, stderr: stderr}
	how := "attached"
	if o.attached() {
		b.agent = &server{name: "agent", socket: o.agentSocket, http: o.agentHTTP, pid: o.agentPID}
		if _, err := benchkit.ReadStat(o.agentPID); err != nil {
			return nil, fmt.Errorf("-agent-pid %d: %w", o.agentPID, err)
		}
		if err := waitReady(ctx, b.agent, 5*time.Second); err != nil {
			return nil, err
		}
	} else {
		fmt.Fprintf(stderr, "building the agent (go build %s)…\n", benchkit.AgentPackage)
		bin, err := buildAgent(ctx, dir)
		if err != nil {
			return nil, err
		}
		cfg := filepath.Join(dir, "agent.yaml")
		if err := os.WriteFile(cfg, []byte(agentConfig(o.rssKeys)), 0o600); err != nil {
			return nil, err
		}
		a, err := startAgent(ctx, bin, dir, cfg)
		if err != nil {
			return nil, err
		}
		defer a.stop()
		b.agent, how = &a.server, "started by the generator"
	}

	clock := "read from the auxiliary vector, as sysconf(_SC_CLK_TCK)"
	if !hzRead {
		clock = "ASSUMED: could not read it"
	}
	transport := "Unix socket"
	if o.tcp {
		transport = "loopback TCP"
	}
	fmt.Fprintf(stdout, "obol load: agent pid %d (%s), %s, c=%d, %d domains", b.agent.pid, how, transport, o.conns, o.domains)
	if o.soak == 0 {
		fmt.Fprintf(stdout, ", warm-up %s + %s measured per phase", o.warmup, o.dur)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "machine: %d CPUs shared by generator, agent and floor; CPU times in clock ticks of 1/%d s (%s)\n",
		runtime.NumCPU(), hz, clock)

	switch {
	case o.soak > 0:
		return b.runSoak(ctx)
	case o.single():
		return b.runSingle(ctx)
	}
	return b.runDefault(ctx)
}

// Scenarios of the default sequence.
var (
	requestJSON    = scenario{enc: encJSON}
	requestMsgpack = scenario{enc: encMsgpack}
	batchJSON      = scenario{enc: encJSON, batch: 100}
	batchMsgpack   = scenario{enc: encMsgpack, batch: 100}
)

// floorSample is how many agent replies the floor's body is chosen from.
const floorSample = 16

// startFloorFor samples a typical agent reply of sc and starts the floor
// serving it.
func (b *bench) startFloorFor(ctx context.Context, sc scenario, bodies [][]byte) (*child, error) {
	body, ctype, err := sampleReply(b.agent, b.o.tcp, sc, bodies, floorSample)
	if err != nil {
		return nil, fmt.Errorf("sampling the agent's replies for the floor: %w", err)
	}
	fl, err := startFloor(ctx, b.dir, body, ctype)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.stdout, "floor: pid %d, answers every request with the same %d-byte %s body (the median of %d agent replies to %s)\n",
		fl.pid, len(body), ctype, floorSample, sc)
	return fl, nil
}

// measure runs one phase of sc on srv (open loop at rate when rate > 0).
// When probeFirst is set, it first checks that srv serves sc, and marks the
// row unavailable if it does not.
func (b *bench) measure(ctx context.Context, srv *server, sc scenario, bodies [][]byte, rate float64, note string, probeFirst bool) (*phaseResult, error) {
	row := &phaseResult{server: srv.name, sc: sc, rate: rate, note: note}
	if probeFirst {
		u, err := probe(srv, b.o.tcp, sc, bodies[0])
		if u != "" {
			row.unavailable = u
			fmt.Fprintf(b.stderr, "skipping %s on the %s: %s\n", sc, srv.name, u)
			return row, nil
		}
		if err != nil {
			fmt.Fprintf(b.stderr, "warning: the first %s request to the %s failed (%v); measuring anyway\n", sc, srv.name, err)
		}
	}
	load := "closed loop"
	if rate > 0 {
		load = fmt.Sprintf("open loop at %.0f/s", rate)
	}
	fmt.Fprintf(b.stderr, "measuring the %s: %s, %s, %s + %s…\n", srv.name, row.label(), load, b.o.warmup, b.o.dur)
	res, err := runPhase(ctx, loadSpec{srv: srv, tcp: b.o.tcp, sc: sc, bodies: bodies, conns: b.o.conns, rate: rate, seed: b.o.seed}, b.timing())
	res.note = note
	return &res, err
}

// bodies builds the bodies of sc, or fails the run.
func (b *bench) bodies(sc scenario) ([][]byte, error) {
	return buildBodies(sc, b.o.resources, b.o.domains, b.o.seed)
}

// runDefault is the default sequence: the floor, /v1/request JSON and
// MessagePack, /v1/batch of 100 JSON and MessagePack, both at half the
// /v1/request JSON max (open loop), then the RSS after rss-keys gcra keys.
func (b *bench) runDefault(ctx context.Context) (*runReport, error) {
	rep := &runReport{}
	reqJSON, err := b.bodies(requestJSON)
	if err != nil {
		return nil, err
	}
	fl, err := b.startFloorFor(ctx, requestJSON, reqJSON)
	if err != nil {
		return nil, err
	}
	defer fl.stop()

	add := func(r *phaseResult, err error) (*phaseResult, error) {
		if r != nil {
			rep.rows = append(rep.rows, r)
		}
		return r, err
	}
	floorRow, err := add(b.measure(ctx, &fl.server, requestJSON, reqJSON, 0, "", false))
	if err != nil {
		return rep, err
	}
	agentRow, err := add(b.measure(ctx, b.agent, requestJSON, reqJSON, 0, "", false))
	if err != nil {
		return rep, err
	}
	var batchRows [2]*phaseResult
	for i, sc := range []scenario{requestMsgpack, batchJSON, batchMsgpack} {
		bodies, err := b.bodies(sc)
		if err != nil {
			return rep, err
		}
		r, err := add(b.measure(ctx, b.agent, sc, bodies, 0, "", true))
		if err != nil {
			return rep, err
		}
		if i > 0 {
			batchRows[i-1] = r
		}
	}
	var halfRow, halfFloorRow *phaseResult
	if rate := agentRow.rps() / 2; agentRow.requests > 0 && rate >= 1 {
		if halfRow, err = add(b.measure(ctx, b.agent, requestJSON, reqJSON, rate, "@50% max", false)); err != nil {
			return rep, err
		}
		if halfFloorRow, err = add(b.measure(ctx, &fl.server, requestJSON, reqJSON, rate, "@50% max", false)); err != nil {
			return rep, err
		}
	} else {
		fmt.Fprintln(b.stderr, "skipping the open-loop phase: /v1/request json has no measured max")
	}
	if b.o.rssKeys > 0 {
		useBatch := batchRows[0].unavailable == ""
		fmt.Fprintf(b.stderr, "driving %d distinct gcra keys into %s…\n", b.o.rssKeys, b.o.rssResource)
		r := driveKeys(ctx, b.agent, b.o.tcp, b.o.conns, b.o.rssKeys, b.o.rssResource, useBatch)
		rep.rss = &r
	}

	fmt.Fprintln(b.stdout)
	writeTable(b.stdout, rep.rows)
	fmt.Fprintln(b.stdout)
	writeRatios(b.stdout, "/v1/request json, closed loop", agentRow, floorRow)
	if halfRow != nil {
		writeRatios(b.stdout, "/v1/request json, open loop at 50% of the agent's max", halfRow, halfFloorRow)
	}
	if rep.rss != nil {
		rep.rss.write(b.stdout)
	}
	rep.result = summarize(agentRow, floorRow, halfRow, batchRows[0], batchRows[1])
	fmt.Fprintln(b.stdout, rep.result)
	return rep, rep.failure(ctx)
}

// runSingle measures one scenario (from -enc, -batch, -rate) on the floor
// and the agent.
func (b *bench) runSingle(ctx context.Context) (*runReport, error) {
	rep := &runReport{}
	sc := scenario{enc: b.o.enc, batch: b.o.batch}
	bodies, err := b.bodies(sc)
	if err != nil {
		return nil, err
	}
	u, err := probe(b.agent, b.o.tcp, sc, bodies[0])
	if u != "" {
		row := &phaseResult{server: "agent", sc: sc, rate: b.o.rate, unavailable: u}
		rep.rows = append(rep.rows, row)
		writeTable(b.stdout, rep.rows)
		rep.result = nanResult()
		fmt.Fprintln(b.stdout, rep.result)
		return rep, rep.failure(ctx)
	}
	if err != nil {
		return nil, err
	}
	fl, err := b.startFloorFor(ctx, sc, bodies)
	if err != nil {
		return nil, err
	}
	defer fl.stop()
	// Round k measures the floor and the agent, the floor first in even
	// rounds and the agent first in odd ones, so that a machine growing
	// busier or quieter during the run weighs on both alike.
	var floorRow, agentRow *phaseResult
	var cpuRatios, rpsRatios []float64
	for k := range b.o.rounds {
		servers := []*server{&fl.server, b.agent}
		if k%2 == 1 {
			servers[0], servers[1] = servers[1], servers[0]
		}
		var fr, ar *phaseResult
		for _, srv := range servers {
			r, err := b.measure(ctx, srv, sc, bodies, b.o.rate, "", false)
			if err != nil {
				return rep, err
			}
			if srv == b.agent {
				ar = r
			} else {
				fr = r
			}
		}
		cpuRatios = append(cpuRatios, ar.cpuPerRequest()/fr.cpuPerRequest())
		rpsRatios = append(rpsRatios, ar.rps()/fr.rps())
		if k == 0 {
			floorRow, agentRow = fr, ar
		} else {
			floorRow.merge(fr)
			agentRow.merge(ar)
		}
	}
	rep.rows = []*phaseResult{floorRow, agentRow}
	fmt.Fprintln(b.stdout)
	writeTable(b.stdout, rep.rows)
	fmt.Fprintln(b.stdout)
	writeRatios(b.stdout, sc.String(), agentRow, floorRow)
	if b.o.rounds > 1 {
		writeRounds(b.stdout, cpuRatios, rpsRatios)
	}
	var bj, bm *phaseResult
	if sc.batch > 0 && sc.enc == encJSON {
		bj = agentRow
	} else if sc.batch > 0 {
		bm = agentRow
	}
	rep.result = summarize(agentRow, floorRow, agentRow, bj, bm)
	if b.o.rounds > 1 {
		rep.result.cpuRatio, rep.result.rpsRatio = median(cpuRatios), median(rpsRatios)
	}
	fmt.Fprintln(b.stdout, rep.result)
	return rep, rep.failure(ctx)
}

// failure returns why the run did not measure everything cleanly, or nil.
func (rep *runReport) failure(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var problems []string
	for _, r := range rep.rows {
		if r.unavailable != "" {
			problems = append(problems, fmt.Sprintf("%s not measured on the %s", r.label(), r.server))
		}
		if r.errors > 0 {
			problems = append(problems, fmt.Sprintf("%d errors in %s on the %s", r.errors, r.label(), r.server))
		}
	}
	if rep.rss != nil {
		if rep.rss.unavailable != "" || rep.rss.statusErr != nil || int(rep.rss.driven) < rep.rss.keys {
			problems = append(problems, "the RSS was not measured in full")
		}
		if rep.rss.errors > 0 {
			problems = append(problems, fmt.Sprintf("%d errors while driving keys for the RSS", rep.rss.errors))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// startCPUProfile starts profiling the generator's CPU into file and returns
// the function that stops and writes it.
func startCPUProfile(file string) (func(), error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
