package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/obol-dev/obol/api"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/netguard"
	"github.com/obol-dev/obol/internal/tlsfiles"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
	"github.com/obol-dev/obol/rls"
	simcluster "github.com/obol-dev/obol/sim/cluster"
)

func main() {
	if api.SimulationChild() {
		os.Exit(simulationChild())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var base *clock.Monotonic // the agent's own
	if testBase != nil {
		var err error
		if base, err = testBase(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(exitUsage)
		}
	}
	err := runOn(ctx, base, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// simulationChild serves the one simulation this process was started for
// (api.Options.SimulateInChild) and returns the exit status. Its log is
// its standard error, which the agent logs when the child fails.
func simulationChild() int {
	return api.ServeSimulationChild(os.Stdin, os.Stdout, api.Options{
		Logger:           slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		ClusterSimulator: simcluster.Endpoint{},
	})
}

// testBase, when set (testclock.go, in a build for tests only), returns
// the time base the agent runs on, nil for its own.
var testBase func() (*clock.Monotonic, error)

// Exit statuses.
const (
	exitFailure = 1 // the agent could not serve (a listener or gossip failed)
	exitUsage   = 2 // bad flags, environment or config
)

// exitError ends the agent with a status. run has already reported it on
// stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode returns the process exit status.
func (e *exitError) ExitCode() int { return e.code }

// exitCode returns the exit status for run's error: 0 for nil, the code of an
// exitError, else 1.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// stepEvery is how often the engine drops reset keys and expired sessions.
const stepEvery = time.Second

// run is the agent: it reads flags, environment and config, serves the API
// until ctx is done, then stops gracefully (removing its socket) and returns
// nil. Every error is reported on stderr before it is returned, as an
// exitError carrying the exit status: 2 for bad flags, environment or config
// (every problem is printed), 1 when the agent cannot serve. --version and
// --check-config print on stdout and return without serving. A first
// argument that is not a flag runs an operator command instead
// (command.go), with the exit statuses it documents.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runOn(ctx, nil, args, getenv, stdout, stderr)
}

// runOn is run on the time base given: nil is the agent's own, the wall
// clock's reading as it starts serving plus monotonic time. Tests give
// agents they run together one base of their own, so that windows start
// where the test puts them rather than where the wall clock is.
func runOn(ctx context.Context, base *clock.Monotonic, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	// A first argument that is not a flag names a command (command.go):
	// flags alone, or none, run the agent.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return runCommand(ctx, args, getenv, stdout, stderr)
	}
	f, err := parseFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return &exitError{exitUsage, err} // parseFlags printed it
	}
	if f.version {
		bi, ok := debug.ReadBuildInfo()
		fmt.Fprint(stdout, versionText(version, bi, ok))
		return nil
	}
	e := readEnv(getenv)
	e.hostname, _ = os.Hostname()
	e.nameSuffix = randomSuffix()

	p, err := prepare(f, e, lookupIP)
	if err != nil {
		report(stderr, p.path, err)
		return &exitError{exitUsage, err}
	}
	if f.checkConfig != "" {
		fmt.Fprintln(stdout, summary(p))
		return nil
	}
	return serve(ctx, p, base, stderr)
}

// plan is what the agent runs: the config, the file it came from ("" for
// the built-in default; file records what its loads read) and the resolved
// settings.
type plan struct {
	cfg  *config.Config
	path string
	file *configFile
	st   settings
	rls  *rlsPlan         // nil: the rate limit service is off
	tls  *tlsfiles.Holder // nil: every listener in the clear
}

// source names where the config came from, for the log.
func (p plan) source() string {
	if p.path == "" {
		return "built-in default"
	}
	return p.path
}

// prepare loads the config file, resolves the settings and reads the gossip
// key. Its error joins every problem: the config file's (a *config.Problems
// or a read error) and then each setting's. The settings are resolved on an
// empty config when the file is bad, so that their own problems are listed
// too.
func prepare(f flags, e env, lookup func(string) ([]net.IP, error)) (plan, error) {
	cv := configPath(f, e)
	p := plan{cfg: config.Default(), path: cv.v}
	var errs []error
	if p.path != "" {
		p.file = &configFile{path: p.path}
		c, err := p.file.load()
		var ps *config.Problems
		switch {
		case errors.As(err, &ps):
			errs = append(errs, err)
		case err != nil:
			errs = append(errs, fmt.Errorf("%v: %w", cv, err))
		}
		if err != nil {
			c = &config.Config{}
		}
		p.cfg = c
	}
	st, err := resolve(f, e, p.cfg)
	if err != nil {
		errs = append(errs, unjoin(err)...)
	} else {
		if err := checkHTTPName(st, lookup); err != nil {
			errs = append(errs, err)
		}
		if err := st.cluster.loadKey(); err != nil {
			errs = append(errs, err)
		}
		if err := st.loadToken(); err != nil {
			errs = append(errs, err)
		}
	}
	p.st = st
	rp, err := prepareRLS(f, e)
	if err != nil {
		errs = append(errs, unjoin(err)...)
	}
	p.rls = rp
	th, err := prepareTLS(f, e, p.st, rp)
	if err != nil {
		errs = append(errs, unjoin(err)...)
	}
	p.tls = th
	return p, errors.Join(errs...)
}

// lookupIP resolves a host name, for checkHTTPName.
func lookupIP(host string) ([]net.IP, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupIP(ctx, "ip", host)
}

// serve runs the agent on p until ctx is done, on the time base given (nil:
// its own).
func serve(ctx context.Context, p plan, base *clock.Monotonic, stderr io.Writer) error {
	st := p.st
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: st.logLevel}))
	// Decisions, sweeps and the cluster's merges run on one time base: the
	// wall clock at start plus monotonic time, so that a step of the
	// system clock moves none of them.
	if base == nil {
		base = clock.NewMonotonic()
	}
	opts := api.Options{Logger: log, Base: base, AuthToken: st.authToken, AuthEverywhere: st.authEverywhere,
		CheckDomainHeader: st.domainHeader, LogRejections: st.logRejections, ClusterSimulator: simcluster.Endpoint{},
		SimulateInChild: true}
	if p.file != nil {
		opts.LoadConfig = func() (*config.Config, string, error) {
			c, err := p.file.load()
			return c, p.file.path, err
		}
	}
	// Every listener is guarded (netguard): capped, riding out temporary
	// accept errors, its figures in /metrics.
	guards := netguard.NewSet(log)
	guards.Hook = listenerHook
	opts.Collectors = append(opts.Collectors, guards)
	if p.tls != nil {
		opts.Collectors = append(opts.Collectors, p.tls)
		log.Info("obol agent serves TLS off loopback", "cert", p.tls.CertPath(), "subject", p.tls.Subject(),
			"not_after", p.tls.NotAfter().UTC().Format(time.RFC3339), "mutual", p.tls.MutualTLS(),
			"http", st.httpPublic, "rls", p.rls != nil && p.rls.public)
	}
	engine := local.New(p.cfg)
	// A name conflict seen in the first minute means this agent took a name
	// in use: it stops (the other one was there first). Later, the conflict
	// is only logged, loudly (reconcile does).
	outer := ctx
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	started := time.Now()
	opts.Started, opts.ConfigSource = started, p.source()
	bi, ok := debug.ReadBuildInfo()
	opts.Version, opts.Revision = buildOf(version, bi, ok)
	onConflict := func(other uint64) {
		if time.Since(started) < conflictGrace {
			refuse(fmt.Errorf("%v: another live agent uses this node name (incarnation %d); give each agent a unique --node-name", value{st.cluster.name, "--node-name"}, other))
		}
	}
	// One record of the counts serves the mesh and the state file; the
	// rate limit service joins it before the state is restored and the
	// mesh joined, so that their counts of its keys reach it too.
	var rec *reconcile.Cluster
	if st.cluster.enabled || st.stateFile.v != "" {
		rec = newRecorder(st.cluster, engine, log, base, onConflict)
	}
	var svc *rls.Service
	if p.rls != nil {
		svc = newRLS(p.rls, rec)
	}
	var keeper *stateKeeper
	if st.stateFile.v != "" {
		if err := checkStateWritable(st.stateFile.v); err != nil {
			log.Error("obol agent cannot keep its state file", "err", err)
			return &exitError{exitFailure, err}
		}
		keeper = &stateKeeper{path: st.stateFile.v, interval: st.stateEvery, rec: rec, log: log}
		keeper.restore()
	}
	var clu *clusterRun
	// stopMesh ships the last counts, leaves the mesh and releases the
	// gossip port, then writes the state file one last time.
	stopMesh := func() {
		if clu != nil {
			clu.stop(log, base.Now)
		}
		if keeper != nil {
			if err := keeper.write(); err == nil {
				log.Info("obol state file written on stop", "state_file", keeper.path)
			}
		}
	}
	defer stopMesh()
	if st.cluster.enabled {
		var err error
		clu, err = startCluster(ctx, st.cluster, rec, log, onConflict)
		if err != nil {
			log.Error("obol agent cannot start gossip", "err", err)
			return err
		}
		opts.Cluster = clu
		opts.NodeName = st.cluster.name
		// Whether the join reached anyone is logged by the gossip layer
		// ("gossip: joined", or "gossip: join failed" and the retries).
		log.Info("obol agent gossip started", "node", st.cluster.name, "gossip", clu.node.Addr(),
			"join", st.cluster.join, "sync_interval", st.cluster.sync.String(), "live", clu.node.Live(),
			"encrypted", len(st.cluster.key) > 0)
	} else if rec != nil { // alone with a state file: the record's sweeps still run
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { rec.Run(rctx); close(done) }()
		defer func() { cancel(); <-done }()
	}
	if keeper != nil {
		kctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { keeper.run(kctx); close(done) }()
		defer func() { cancel(); <-done }()
	}
	// A listener of the rate limit service that fails for good stops the
	// whole agent: the cause cancels ctx, the API drains and the stop
	// sequence below runs as for a signal, then run returns the cause
	// (exit 1). Never a half-alive agent.
	fail := func(err error) {
		log.Error("obol agent stopping: a listener failed", "err", err)
		refuse(err)
	}
	var rlsSrv *rlsRun
	if p.rls != nil {
		var err error
		sv := rlsServing{drain: st.drain, limits: st.limits, guards: guards, fail: fail}
		if p.rls.public {
			sv.tls = p.tls
		}
		rlsSrv, err = startRLS(ctx, p.rls, svc, base.Now, sv, log)
		if err != nil {
			log.Error("obol agent cannot start the rate limit service", "err", err)
			return err
		}
		// On an early return the service is stopped before it is waited
		// for (it stops when ctx is done).
		defer func() { refuse(nil); rlsSrv.wait() }()
		opts.Collectors = append(opts.Collectors, rlsSrv.srv.Service().Stats())
	}
	srv := api.New(engine, opts)
	lc := api.ListenConfig{Socket: st.socket, HTTP: st.http, AllowPublic: st.httpPublic, Status: st.status,
		DrainTimeout: st.drain, Limits: st.limits, Guards: guards}
	if st.httpPublic && p.tls != nil {
		lc.TLS = p.tls.ServerConfig("http/1.1")
	}
	ls, err := api.Listen(lc)
	if err != nil {
		log.Error("obol agent cannot listen", "err", err)
		return &exitError{exitFailure, err}
	}
	watch := p.file != nil && st.watchConfig
	log.Info("obol agent started", "socket", orOff(ls.SocketPath()), "http", orOff(ls.HTTPAddr()),
		"status_http", orOff(ls.StatusAddr()), "config", p.source(), "watch_config", watch,
		"resources", len(p.cfg.Resources), "log_level", st.logLevel.String(),
		"max_conns", maxConnsLog(st.limits.MaxConns), "read_timeout", st.limits.ReadTimeout.String(),
		"write_timeout", st.limits.WriteTimeout.String(), "idle_timeout", st.limits.IdleTimeout.String())

	stepCtx, stopStep := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		var offset time.Duration // the wall clock's offset last logged
		stepLoop(stepCtx, stepEvery, base.Now, func(t time.Time) {
			srv.Engine().Step(t)
			if off := base.WallOffset(); (off - offset).Abs() > time.Second {
				offset = off
				log.Warn("the system clock was stepped: decisions keep the time base the agent started on", "wall_clock_offset", off.String())
			}
		})
	})
	// SIGHUP re-reads the config file, as POST /v1/config/reload does; the
	// outcome (or every problem of a refused file) is logged by Reload.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	wg.Go(func() {
		for {
			select {
			case <-stepCtx.Done():
				return
			case <-hup:
				_, _ = srv.Reload()
			}
		}
	})
	if watch {
		// The config file is re-read when its content changes (watch.go),
		// through the same Reload.
		w := &watcher{path: p.file.path, quiet: watchQuiet, known: p.file.known,
			reload: func() { _, _ = srv.Reload() }, log: log}
		wg.Go(func() { w.run(stepCtx, watchEvery) })
	}
	if p.tls != nil {
		// The TLS files likewise (tls.go): a new pair serves the next
		// handshakes.
		wg.Go(func() { watchTLS(stepCtx, p.tls, p.tls.CertPath(), log) })
	}
	err = srv.Serve(ctx, ls)
	if err != nil {
		log.Error("obol agent stopping: a listener failed", "err", err)
	}
	stopStep()
	wg.Wait()
	// Only a cause of this function's own (refuse) is an error: a stop
	// from outside is clean, and signal.NotifyContext cancels with a cause
	// naming the signal, which the inner context inherits.
	if cause := context.Cause(ctx); err == nil && cause != nil && cause != context.Canceled && cause != context.Cause(outer) {
		err = cause
	}
	refuse(nil) // every loop on ctx stops now, the rate limit service's among them
	if rlsSrv != nil {
		rlsSrv.wait()
	}
	stopMesh() // before the last line: a new agent may take the gossip port once it is logged
	if err != nil {
		log.Error("obol agent stopped on an error", "err", err)
		return &exitError{exitFailure, err}
	}
	log.Info("obol agent stopped", "drain_timeout", st.drain.String())
	return nil
}

// listenerHook, when set, wraps each listener before it is guarded: a seam
// for tests that make a listener fail.
var listenerHook func(name string, ln net.Listener) net.Listener

// orOff returns addr, or "off" for a listener that is off.
func orOff(addr string) string {
	if addr == "" {
		return off
	}
	return addr
}

// unjoin returns the errors joined in err (errors.Join), or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// report prints every problem of prepare's error: the config file's, one
// per line as "file:line: path: message", then each setting's.
func report(w io.Writer, path string, err error) {
	for _, e := range unjoin(err) {
		var ps *config.Problems
		if errors.As(e, &ps) {
			reportConfig(w, path, e)
			continue
		}
		fmt.Fprintf(w, "obol: %v\n", e)
	}
}

// stepLoop calls step(now()) every interval until ctx is done.
func stepLoop(ctx context.Context, every time.Duration, now func() time.Time, step func(time.Time)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			step(now())
		}
	}
}

// reportConfig prints why the config file at path cannot be used: every
// problem, one per line, "file:line: path: message".
func reportConfig(w io.Writer, path string, err error) {
	var ps *config.Problems
	if !errors.As(err, &ps) {
		fmt.Fprintf(w, "obol: %v\n", err)
		return
	}
	n := len(*ps)
	plural := "s"
	if n == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "obol: config file %s has %d problem%s:\n", path, n, plural)
	for _, p := range *ps {
		if p.Line > 0 {
			fmt.Fprintf(w, "%s:%d: %s\n", path, p.Line, p)
		} else {
			fmt.Fprintf(w, "%s: %s\n", path, p)
		}
	}
}

// summary is what --check-config prints for a good file: one line with the
// resources by kind, the namespaces, the listeners and gossip.
func summary(p plan) string {
	kinds := map[config.Kind]int{}
	for _, r := range p.cfg.Resources {
		kinds[r.Kind]++
	}
	var ks []string
	for _, k := range config.Kinds {
		if kinds[k] > 0 {
			ks = append(ks, fmt.Sprintf("%s %d", k, kinds[k]))
		}
	}
	res := plural(len(p.cfg.Resources), "resource")
	if len(ks) > 0 {
		res += " (" + strings.Join(ks, ", ") + ")"
	}
	gossip := "gossip off (the agent runs alone)"
	if c := p.st.cluster; c.enabled {
		gossip = fmt.Sprintf("gossip on %s as %s", c.bind, c.name)
		if len(c.join) > 0 {
			gossip += ", joining " + strings.Join(c.join, ",")
		}
		if len(c.key) > 0 {
			gossip += ", encrypted"
		} else {
			gossip += ", not encrypted"
		}
	}
	return fmt.Sprintf("obol: %s is valid: %s, %s; socket %s, http %s; %s%s%s",
		p.source(), res, plural(len(p.cfg.Namespaces), "namespace"), orOff(p.st.socket), orOff(p.st.http), gossip, rlsSummary(p.rls), tlsSummary(p))
}

// plural returns "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// conflictGrace is how long after start a node-name conflict stops the
// agent rather than only being logged.
const conflictGrace = time.Minute

// randomSuffix returns 6 random hex digits: the default node name is the
// hostname and this suffix, unique per process.
func randomSuffix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// maxConnsLog is the cap of each listener as the start line shows it: the
// one given, else each kind of listener's default.
func maxConnsLog(n int) string {
	if n > 0 {
		return strconv.Itoa(n)
	}
	return fmt.Sprintf("Unix sockets %d, TCP listeners %d (defaults)", netguard.DefaultMaxConns(), min(netguard.DefaultMaxConns(), netguard.DefaultTCPConns))
}
