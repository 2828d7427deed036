package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/obol-dev/obol/internal/lowprio"
	"github.com/obol-dev/obol/internal/netguard"
	"github.com/obol-dev/obol/internal/sock"
	"github.com/obol-dev/obol/internal/tlsfiles"
	"github.com/obol-dev/obol/reconcile"
	"github.com/obol-dev/obol/rls"
	"google.golang.org/grpc"
)

// rls.go wires Envoy's rate limit service (package rls) into the agent:
// its flags and environment, its config directory (loaded at the start,
// checked by --check-config, watched for changes like --config), its
// listeners (a Unix socket and a TCP port for gRPC, a TCP port for the
// HTTP /json and /healthcheck), its counters joined to the gossip, and its
// stop: on SIGTERM /healthcheck and the gRPC health service turn unhealthy
// first, then the servers drain (within --drain-timeout).

// rlsFlags are the service's flags.
type rlsFlags struct {
	config, socket, grpc, http, headers string
	public, shadow, stopIncrement       bool
	watch                               bool
}

func (f *rlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "rls-config", "", "directory of envoyproxy/ratelimit YAML files (*.yaml, *.yml): turns Envoy's rate limit service on (env OBOL_RLS_CONFIG)")
	fs.StringVar(&f.socket, "rls-socket", "", "Unix socket the rate limit service's gRPC listens on (env OBOL_RLS_SOCKET)")
	fs.StringVar(&f.grpc, "rls-grpc", "", "TCP address the rate limit service's gRPC listens on, loopback unless --rls-public (env OBOL_RLS_GRPC)")
	fs.StringVar(&f.http, "rls-http", "", "TCP address of the rate limit service's HTTP POST /json and GET /healthcheck, loopback unless --rls-public (env OBOL_RLS_HTTP)")
	fs.BoolVar(&f.public, "rls-public", false, "allow non-loopback --rls-grpc and --rls-http addresses; they carry no token (env OBOL_RLS_PUBLIC)")
	fs.BoolVar(&f.shadow, "rls-shadow-mode", false, "global shadow mode: never answer OVER_LIMIT overall (env OBOL_RLS_SHADOW_MODE; their SHADOW_MODE)")
	fs.BoolVar(&f.stopIncrement, "rls-stop-increment-over-limit", false, "when a descriptor of a request would go over, grow only the counters that go over (env OBOL_RLS_STOP_INCREMENT_OVER_LIMIT; their STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT)")
	fs.StringVar(&f.headers, "rls-headers", "", "response_headers_to_add: off, ratelimit (RateLimit-Limit/-Remaining/-Reset), draft03 (X-RateLimit-*) or draft11 (RateLimit, RateLimit-Policy) (env OBOL_RLS_HEADERS; default off)")
	fs.BoolVar(&f.watch, "rls-watch", true, "re-read --rls-config when a file in it changes (env OBOL_RLS_WATCH)")
}

// rlsEnv is the service's environment.
type rlsEnv struct {
	config, socket, grpc, http, headers string
	public, shadow, stopIncrement       string
	watch                               string
}

func readRLSEnv(getenv func(string) string) rlsEnv {
	return rlsEnv{
		config: getenv("OBOL_RLS_CONFIG"), socket: getenv("OBOL_RLS_SOCKET"), grpc: getenv("OBOL_RLS_GRPC"),
		http: getenv("OBOL_RLS_HTTP"), headers: getenv("OBOL_RLS_HEADERS"), public: getenv("OBOL_RLS_PUBLIC"),
		shadow: getenv("OBOL_RLS_SHADOW_MODE"), stopIncrement: getenv("OBOL_RLS_STOP_INCREMENT_OVER_LIMIT"),
		watch: getenv("OBOL_RLS_WATCH"),
	}
}

// rlsPlan is the service as the flags and environment set it up; nil when
// it is off.
type rlsPlan struct {
	dir, socket, grpc, http string
	public                  bool // --rls-public: --rls-grpc and --rls-http may be off loopback
	opt                     rls.Options
	watch                   bool
	cfg                     *rls.Config
	digest                  [sha256.Size]byte
	size                    int // the config files' bytes in all, when digest was taken
}

// prepareRLS resolves the service's settings (a flag wins over its
// variable) and loads its config; nil, nil when --rls-config is not given.
func prepareRLS(f flags, e env) (*rlsPlan, error) {
	rf, re := f.rls, e.rls
	str := func(name, fv, ev string) string {
		if f.set[name] {
			return fv
		}
		return ev
	}
	var errs []error
	bad := func(v value, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%v: %s", v, fmt.Sprintf(format, args...)))
	}
	boolean := func(name string, fv bool, ev, envName string) bool {
		return boolSetting(f, name, fv, ev, envName, bad)
	}
	p := &rlsPlan{
		dir: str("rls-config", rf.config, re.config), socket: str("rls-socket", rf.socket, re.socket),
		grpc: str("rls-grpc", rf.grpc, re.grpc), http: str("rls-http", rf.http, re.http),
	}
	public := boolean("rls-public", rf.public, re.public, "OBOL_RLS_PUBLIC")
	p.public = public
	p.opt.ShadowMode = boolean("rls-shadow-mode", rf.shadow, re.shadow, "OBOL_RLS_SHADOW_MODE")
	p.opt.StopIncrementOverLimit = boolean("rls-stop-increment-over-limit", rf.stopIncrement, re.stopIncrement, "OBOL_RLS_STOP_INCREMENT_OVER_LIMIT")
	p.watch = true
	if f.set["rls-watch"] || re.watch != "" {
		p.watch = boolean("rls-watch", rf.watch, re.watch, "OBOL_RLS_WATCH")
	}
	hm, err := rls.ParseHeaderMode(str("rls-headers", rf.headers, re.headers))
	if err != nil {
		errs = append(errs, err)
	}
	p.opt.Headers = hm
	if p.dir == "" {
		if p.socket != "" || p.grpc != "" || p.http != "" {
			errs = append(errs, errors.New("--rls-socket, --rls-grpc and --rls-http need --rls-config (OBOL_RLS_CONFIG), the directory of the rate limit service's config"))
		}
		return nil, errors.Join(errs...)
	}
	if p.socket == "" && p.grpc == "" {
		errs = append(errs, errors.New("--rls-config: give --rls-socket or --rls-grpc (or both) for Envoy to call the service on"))
	}
	for _, a := range []struct{ name, v string }{{"--rls-grpc", p.grpc}, {"--rls-http", p.http}} {
		if a.v == "" {
			continue
		}
		if err := checkHTTP(a.v, public); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %v (for the rate limit service: --rls-public, OBOL_RLS_PUBLIC=true)", a.name, a.v, err))
		}
	}
	if p.socket != "" {
		if err := sock.CheckPath(p.socket); err != nil {
			errs = append(errs, fmt.Errorf("--rls-socket %q: %w", p.socket, err))
		}
	}
	p.digest, p.size, _ = rlsDigest(p.dir)
	cfg, err := rls.LoadDir(p.dir)
	if err != nil {
		errs = append(errs, fmt.Errorf("--rls-config %s: %w", p.dir, err))
	}
	p.cfg = cfg
	return p, errors.Join(errs...)
}

// rlsSummary is --check-config's word on the service.
func rlsSummary(p *rlsPlan) string {
	if p == nil || p.cfg == nil {
		return ""
	}
	return fmt.Sprintf("; rate limit service: %s (%s, %s), grpc socket %s, grpc %s, http %s",
		p.dir, plural(p.cfg.Domains(), "domain"), plural(len(p.cfg.Limits()), "limit"),
		orOff(p.socket), orOff(p.grpc), orOff(p.http))
}

// rlsDigest is the SHA-256 of the config files of dir: their names and
// contents, read through their symlinks, so that any change (an edit, a
// rename, a ConfigMap's ..data swap) changes it; and their size in all.
func rlsDigest(dir string) ([sha256.Size]byte, int, error) {
	h := sha256.New()
	srcs, err := rls.ReadDir(dir) // regular files under the caps, never blocking
	if err != nil {
		return [sha256.Size]byte{}, 0, err
	}
	n := 0
	for _, src := range srcs {
		fmt.Fprintf(h, "%s\x00%d\x00", src.Name, len(src.Data))
		h.Write(src.Data)
		n += len(src.Data)
	}
	var d [sha256.Size]byte
	copy(d[:], h.Sum(nil))
	return d, n, nil
}

// rlsStamp is what stat says of the config files of a directory, through
// their symlinks: each file's path, and its identity (device and inode),
// size and modification time. A file edited, replaced, added or removed,
// and a ConfigMap's ..data swap, change it; an edit that keeps a file's
// inode, size and modification time (a file system whose timestamps are
// coarser than the edits) does not, which is why the watcher still reads
// the files once every rlsFullLook.
type rlsStamp struct {
	paths []string
	infos []os.FileInfo
}

// statRLS returns the stamp of dir's config files (rls.ConfigFiles).
func statRLS(dir string) (rlsStamp, error) {
	paths, err := rls.ConfigFiles(dir)
	if err != nil {
		return rlsStamp{}, err
	}
	st := rlsStamp{paths: paths, infos: make([]os.FileInfo, len(paths))}
	for i, p := range paths {
		if st.infos[i], err = os.Stat(p); err != nil {
			return rlsStamp{}, err
		}
	}
	return st, nil
}

// same reports whether a and b are stamps of the same files, unchanged.
func (a rlsStamp) same(b rlsStamp) bool {
	if len(a.paths) == 0 || !slices.Equal(a.paths, b.paths) {
		return false
	}
	for i, x := range a.infos {
		y := b.infos[i]
		if !os.SameFile(x, y) || x.Size() != y.Size() || !x.ModTime().Equal(y.ModTime()) {
			return false
		}
	}
	return true
}

// rlsFullLook is how often, in ticks of a second, the watcher reads and
// hashes the config files even when their stamp has not changed.
const rlsFullLook = 60

// rlsLowprioBytes is the size of the rate limit service's config files,
// in all, above which the watcher reads and parses them with lowprio.Run.
// Reading and parsing are work that must not delay decisions: a config of
// 1.8 MB, its files hashed every second and parsed on each change, moved a
// probe's p99 3.8× on an agent with one processor. Below it the work is
// too small to matter, and lowprio.Run's two changes of GOMAXPROCS (each
// stops the world briefly) would cost more.
const rlsLowprioBytes = 64 << 10

// offDecisions runs f, the watcher's work on config files whose size was
// size at the last look, with lowprio.Run when that is over
// rlsLowprioBytes, else at once.
func offDecisions(size int, f func()) {
	if size > rlsLowprioBytes {
		lowprio.Run(f)
		return
	}
	f()
}

// rlsRun is the running service.
type rlsRun struct {
	srv   *rls.Server
	https *http.Server
	wg    sync.WaitGroup
}

// newRLS returns the service of p, its counters joined to rec (nil: the
// service counts alone), not serving yet: the mesh's and the state file's
// counts of its keys reach it from the start.
func newRLS(p *rlsPlan, rec *reconcile.Cluster) *rls.Service {
	svc := rls.New(nil, p.opt)
	if rec != nil {
		svc.Store().Attach(rec)
	}
	svc.SetConfig(p.cfg)
	return svc
}

// rlsServing is how the service's listeners are served: the drain on stop,
// every listener's bounds, the set that guards them, and fail, called with
// the error (naming the listener) when one of them fails for good.
type rlsServing struct {
	drain  time.Duration
	limits netguard.Limits
	guards *netguard.Set
	fail   func(error)
	tls    *tlsfiles.Holder // nil: in the clear; else --rls-grpc and --rls-http serve TLS (not --rls-socket)
}

// startRLS starts the service of p, its counters joined to rec (nil: the
// agent runs alone), reading the time from now. It stops when ctx is done:
// unhealthy first, then a drain of at most sv.drain. Its listeners are
// guarded and bounded by sv.limits; one that fails for good (a temporary
// accept error is waited out) is reported to sv.fail.
func startRLS(ctx context.Context, p *rlsPlan, svc *rls.Service, now func() time.Time, sv rlsServing, log *slog.Logger) (*rlsRun, error) {
	drain := sv.drain
	r := &rlsRun{srv: rls.NewServerWith(svc, now, sv.limits)}
	var ls []net.Listener
	closeAll := func() {
		for _, l := range ls {
			l.Close()
		}
	}
	if p.socket != "" {
		l, err := sock.Listen(p.socket, 0o660)
		if err != nil {
			return nil, &exitError{exitFailure, fmt.Errorf("--rls-socket: %w", err)}
		}
		ls = append(ls, sv.guards.Guard("rls_socket", l, sv.limits.MaxConns).HTTP2())
	}
	if p.grpc != "" {
		l, err := net.Listen("tcp", p.grpc)
		if err != nil {
			closeAll()
			return nil, &exitError{exitFailure, fmt.Errorf("--rls-grpc: %w", err)}
		}
		g := sv.guards.Guard("rls_grpc", l, sv.limits.MaxConns).HTTP2()
		if sv.tls != nil {
			g.TLS(sv.tls.ServerConfig("h2"))
		}
		ls = append(ls, g)
	}
	var hl net.Listener
	if p.http != "" {
		l, err := net.Listen("tcp", p.http)
		if err != nil {
			closeAll()
			return nil, &exitError{exitFailure, fmt.Errorf("--rls-http: %w", err)}
		}
		g := sv.guards.Guard("rls_http", l, sv.limits.MaxConns)
		if sv.tls != nil {
			g.TLS(sv.tls.ServerConfig("http/1.1"))
		}
		hl = g
		r.https = r.srv.HTTPServer(sv.limits)
		// net/http's own messages (a failed TLS handshake, a client gone
		// mid-request) are cut and rate-limited as the API's are.
		r.https.ErrorLog = stdlog.New(netguard.NewConnLog(log, time.Now, "rls http server: connection error"), "", 0)
	}
	for _, l := range ls {
		flag := "--rls-grpc"
		if l.(*netguard.Listener).Name() == "rls_socket" {
			flag = "--rls-socket"
		}
		r.wg.Go(func() {
			// Serve returns nil after Stop and GracefulStop.
			if err := r.srv.GRPC().Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				sv.fail(fmt.Errorf("%s %s stopped: %w", flag, l.Addr(), err))
			}
		})
	}
	if hl != nil {
		r.wg.Go(func() {
			if err := r.https.Serve(hl); !errors.Is(err, http.ErrServerClosed) {
				sv.fail(fmt.Errorf("--rls-http %s stopped: %w", hl.Addr(), err))
			}
		})
	}
	addrs := make([]string, 0, len(ls)+1)
	for _, l := range ls {
		addrs = append(addrs, l.Addr().String())
	}
	if hl != nil {
		addrs = append(addrs, "http "+hl.Addr().String())
	}
	log.Info("rate limit service started", "listeners", addrs, "tls", sv.tls != nil, "config", p.dir, "domains", p.cfg.Domains(), "limits", len(p.cfg.Limits()))

	r.wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last, quiet, size := p.digest, p.digest, p.size
		var stamp rlsStamp // none yet: the first tick reads
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				r.stop(drain, log)
				return
			case <-tick.C:
				svc.Store().Sweep(now())
				if !p.watch {
					continue
				}
				// Files whose stamp has not changed are not read (a
				// config of 1.8 MB was read and hashed every second),
				// unless a change waits to read the same a tick later,
				// or it is the minute's full look.
				if st, err := statRLS(p.dir); err == nil {
					if st.same(stamp) && quiet == last && n%rlsFullLook != 0 {
						continue
					}
					stamp = st
				}
				var d [sha256.Size]byte
				var err error
				offDecisions(size, func() { d, size, err = rlsDigest(p.dir) })
				if err != nil || d == last {
					continue
				}
				if d != quiet { // wait until it reads the same for a tick
					quiet = d
					continue
				}
				last = d
				var cfg *rls.Config
				offDecisions(size, func() { cfg, err = rls.LoadDir(p.dir) })
				if err != nil {
					log.Error("rate limit service config refused; the old one stays in force", "dir", p.dir, "err", err)
					continue
				}
				svc.SetConfig(cfg)
				log.Info("rate limit service config reloaded", "dir", p.dir, "domains", cfg.Domains(), "limits", len(cfg.Limits()))
			}
		}
	})
	return r, nil
}

// stop turns the health unhealthy, serves on for half of drain (at most
// 2 s) so that health checkers see it, then drains the servers.
func (r *rlsRun) stop(drain time.Duration, log *slog.Logger) {
	r.srv.SetHealthy(false)
	// Answer unhealthy for a while, still serving, so that health checks
	// see it before the listeners close.
	time.Sleep(min(drain/2, 2*time.Second))
	done := make(chan struct{})
	go func() {
		r.srv.GRPC().GracefulStop()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if r.https != nil {
		_ = r.https.Shutdown(ctx)
	}
	select {
	case <-done:
	case <-ctx.Done():
		r.srv.GRPC().Stop()
		log.Warn("rate limit service: drain timed out; calls in flight were cut", "drain_timeout", drain.String())
	}
}

// wait returns once the service has stopped.
func (r *rlsRun) wait() {
	if r != nil {
		r.wg.Wait()
	}
}
