package client

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/api"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
)

// testConfig is the agent config of the tests.
const testConfig = `
namespaces:
  open: {allow_unconfigured: true}
  rq: {request_limits: true}
resources:
  t/tiers: {kind: tiers, tiers: "5,1,1,0,50,5,5,15", hard_limit: 100}
  t/gcra: {kind: gcra, burst: 20, count: 20, period: 1s}
  t/one: {kind: gcra, burst: 1, count: 1, period: 1s}
  t/none: {kind: tiers, tiers: []}
  t/shadow: {kind: gcra, burst: 1, count: 1, period: 1s, shadow: true}
  t/copies:
    kind: copies
    domain_limit: 5
    global_limit: 100
    groups: [{name: partners, limit: 20, domains: [acme, globex]}]
  t/two: {kind: copies, domain_limit: 2}
`

// t0 is the instant fake clocks start at.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// shortTempDir returns a temp dir whose socket paths fit the 108-byte limit.
func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "obolc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// agent is a real agent (engine and API server) serving on a Unix socket
// in a temp dir.
type agent struct {
	srv  *api.Server
	sock string
	// fail makes the socket answer 503 not_ready instead of serving.
	fail atomic.Bool
	// calls counts the requests served, by path.
	mu    sync.Mutex
	calls map[string]int
	stop  func()
}

// startAgent serves an agent on testConfig whose clock is now (nil: the
// wall clock) until the test ends (or a.stop).
func startAgent(t testing.TB, now func() time.Time) *agent {
	t.Helper()
	return startAgentAt(t, filepath.Join(shortTempDir(t), "a.sock"), now)
}

// startAgentAt is startAgent on the socket sock.
func startAgentAt(t testing.TB, sock string, now func() time.Time) *agent {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	a := &agent{
		srv:   api.New(local.New(cfg), api.Options{Now: now, Logger: slog.New(slog.DiscardHandler), NodeName: "test"}),
		calls: map[string]int{},
	}
	a.srv.SetReady(true)
	a.sock = sock
	a.stop = serve(t, a.sock, func(ctx *fasthttp.RequestCtx) {
		a.mu.Lock()
		a.calls[string(ctx.Path())]++
		a.mu.Unlock()
		if a.fail.Load() {
			ctx.SetStatusCode(503)
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"error":{"code":"not_ready","message":"stopping"}}`)
			return
		}
		a.srv.Handler(ctx)
	})
	return a
}

func (a *agent) count(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[path]
}

// serve serves h on a Unix socket at sock until the test ends or the
// returned stop is called (which removes the socket).
func serve(t testing.TB, sock string, h fasthttp.RequestHandler) (stop func()) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &fasthttp.Server{Handler: h, NoDefaultServerHeader: true, NoDefaultContentType: true,
		MaxRequestBodySize: 16 << 20}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = ln.Close() // stops Serve at once, and removes the socket
			<-done
			_ = hs.Shutdown()
		})
	}
	t.Cleanup(stop)
	return stop
}

// stub serves canned replies: reply is called per request.
func startStub(t testing.TB, reply func(ctx *fasthttp.RequestCtx)) string {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "s.sock")
	serve(t, sock, reply)
	return sock
}

// logBuffer collects log lines, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) lines(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if line != "" && strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// newClient returns a client of the socket, closed when the test ends.
// Unset fields of cfg get test values: a generous timeout (the race
// detector is slow), a seeded Rand, a log buffer, no environment.
func newClient(t testing.TB, cfg Config) (*Client, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.DialTimeout == 0 {
		// A loaded CI machine (race detector, packages in parallel) can take
		// longer than the production 10 ms to accept a connection.
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(1, 2))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, logs
}

// fakeClock returns a fake clock at t0.
func fakeClock() *clock.Fake { return clock.NewFake(t0) }

// waitCtx is a context for BlockUntil that fails the test instead of
// hanging it.
func waitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
