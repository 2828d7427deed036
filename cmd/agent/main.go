package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/obol-dev/obol/api"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// Exit statuses.
const (
	exitFailure = 1 // the agent could not serve (a listener failed)
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
// (every config problem is printed), 1 when the agent cannot serve.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return &exitError{exitUsage, err}
	}
	e := readEnv(getenv)
	e.hostname, _ = os.Hostname()

	cfg, source := config.Default(), "built-in default"
	path := configPath(f, e)
	if path != "" {
		if cfg, err = config.Load(path); err != nil {
			reportConfig(stderr, path, err)
			return &exitError{exitUsage, err}
		}
		source = path
	}
	st, err := resolve(f, e, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "obol: %v\n", err)
		return &exitError{exitUsage, err}
	}

	log := slog.New(slog.NewJSONHandler(stderr, nil))
	// Decisions, sweeps and the cluster's merges run on one time base: the
	// wall clock at start plus monotonic time, so that a step of the
	// system clock moves none of them.
	base := clock.NewMonotonic()
	opts := api.Options{Logger: log, Base: base}
	if path != "" {
		opts.LoadConfig = func() (*config.Config, string, error) {
			c, err := config.Load(path)
			return c, path, err
		}
	}
	engine := local.New(cfg)
	var clu *clusterRun
	if st.cluster.enabled {
		if clu, err = startCluster(ctx, st.cluster, engine, log, base); err != nil {
			fmt.Fprintf(stderr, "obol: %v\n", err)
			return err
		}
		defer clu.stop(log)
		opts.Cluster = clu
		opts.NodeName = st.cluster.name
		log.Info("obol agent joined the mesh", "node", st.cluster.name, "gossip", clu.node.Addr(),
			"join", st.cluster.join, "sync_interval", st.cluster.sync.String(), "live", clu.node.Live())
	}
	srv := api.New(engine, opts)
	ls, err := api.Listen(api.ListenConfig{Socket: st.socket, HTTP: st.http, AllowPublic: st.httpPublic, DrainTimeout: st.drain})
	if err != nil {
		log.Error("obol agent cannot listen", "err", err)
		return &exitError{exitFailure, err}
	}
	log.Info("obol agent started", "socket", ls.SocketPath(), "http", ls.HTTPAddr(),
		"config", source, "resources", len(cfg.Resources))

	stepCtx, stopStep := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		stepLoop(stepCtx, stepEvery, base.Now, func(t time.Time) { srv.Engine().Step(t) })
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
	err = srv.Serve(ctx, ls)
	stopStep()
	wg.Wait()
	if err != nil {
		log.Error("obol agent stopped on an error", "err", err)
		return &exitError{exitFailure, err}
	}
	log.Info("obol agent stopped", "drain_timeout", st.drain.String())
	return nil
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
