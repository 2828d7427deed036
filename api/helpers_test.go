package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/await"
	"github.com/obol-dev/obol/local"
)

// testConfig is the config of the handler tests.
const testConfig = `
namespaces:
  open: {allow_unconfigured: true}
  rq: {request_limits: true, max_request_limits: 4, max_request_keys: 6}
resources:
  t/tiers:
    kind: tiers
    tiers: "5,1,1,0,50,5,5,15"
    hard_limit: 100
  t/gcra: {kind: gcra, burst: 20, count: 20, period: 1s}
  t/thirds: {kind: gcra, burst: 3, count: 3, period: 1s}
  t/shadow: {kind: gcra, burst: 1, count: 1, period: 1s, shadow: true}
  t/none: {kind: tiers, tiers: []}
  t/copies:
    kind: copies
    domain_limit: 5
    global_limit: 100
    groups: [{name: partners, limit: 20, domains: [acme, globex]}]
`

// t0 is the instant the test clock starts at.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is a settable test clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func testEngine(t testing.TB) *local.Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	return local.New(cfg)
}

// logBuffer collects log output, safe for concurrent use; a test waits on
// its writes.
type logBuffer = await.Log

// harness is a Server served on an in-memory listener, with a client.
type harness struct {
	t     testing.TB
	srv   *Server
	clock *clock
	logs  *logBuffer
	http  *http.Client
	dial  func() (net.Conn, error)
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, clock: &clock{t: t0}, logs: &logBuffer{}}
	h.srv = New(testEngine(t), Options{
		Now:      h.clock.now,
		Logger:   slog.New(slog.NewJSONHandler(h.logs, nil)),
		NodeName: "node-a",
	})
	return h.serve()
}

// serve serves h.srv on an in-memory listener until the test ends, with a
// client for it, and returns h.
func (h *harness) serve() *harness {
	h.srv.SetReady(true)
	ln := fasthttputil.NewInmemoryListener()
	hs := h.srv.httpServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	h.dial = ln.Dial
	h.http = &http.Client{
		Transport: &http.Transport{
			DialContext: func(context.Context, string, string) (net.Conn, error) { return ln.Dial() },
		},
		Timeout: 10 * time.Second,
	}
	h.t.Cleanup(func() {
		// Closing the listener stops Serve at once (hs.Shutdown would poll
		// every 100 ms); the client closes its connections.
		_ = ln.Close()
		h.http.CloseIdleConnections()
		<-done
	})
	return h
}

// reply is an HTTP reply as the tests see it.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request, with Content-Type: application/json when it has a
// body; headers are "Name: value" strings (a Content-Type among them wins).
func (h *harness) do(method, path, body string, headers ...string) reply {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://obol"+path, rd)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // unless headers say otherwise
	}
	for _, hv := range headers {
		k, v, _ := strings.Cut(hv, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	var resp *http.Response
	if len(body) > maxBody {
		resp, err = h.overLimit(req)
	} else {
		resp, err = h.http.Do(req)
	}
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading the reply: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (h *harness) post(path, body string) reply {
	h.t.Helper()
	return h.do("POST", path, body)
}

// ok posts body to path, requires a 200 and decodes the reply.
func (h *harness) ok(path, body string) map[string]any {
	h.t.Helper()
	r := h.post(path, body)
	if r.status != 200 {
		h.t.Fatalf("POST %s %s: status %d, body %s", path, body, r.status, r.body)
	}
	return decodeObject(h.t, r.body)
}

func decodeObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("reply is not a JSON object: %v: %s", err, b)
	}
	return m
}

// errorReply decodes an error reply's code and message.
func errorReply(t testing.TB, b []byte) (code, msg string) {
	t.Helper()
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
		t.Fatalf("not a JSON error reply (%v): %s", err, b)
	}
	return e.Error.Code, e.Error.Message
}

// num returns m[k] as an int64.
func num(t testing.TB, m map[string]any, k string) int64 {
	t.Helper()
	v, ok := m[k].(json.Number)
	if !ok {
		t.Fatalf("field %q is %v (%T), want a number; reply %v", k, m[k], m[k], m)
	}
	n, err := v.Int64()
	if err != nil {
		t.Fatalf("field %q: %v", k, err)
	}
	return n
}

func str(t testing.TB, m map[string]any, k string) string {
	t.Helper()
	v, ok := m[k].(string)
	if !ok {
		t.Fatalf("field %q is %v (%T), want a string; reply %v", k, m[k], m[k], m)
	}
	return v
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// overLimit sends req, whose body is over the limit, on a connection of its
// own and reads the reply. The server answers 413 and closes the connection
// without reading the body, which can fail the http.Client's write before
// it reads the reply; here a failed write is ignored.
func (h *harness) overLimit(req *http.Request) (*http.Response, error) {
	conn, err := h.dial()
	if err != nil {
		return nil, err
	}
	h.t.Cleanup(func() { _ = conn.Close() })
	go func() { _ = req.Write(conn) }()
	return http.ReadResponse(bufio.NewReader(conn), req)
}

// errorCase is a request that must be refused, and what the reply says:
// its status, its code ("" for a reply that is no error) and the parts
// its message must name.
type errorCase struct {
	body   string
	status int
	code   string
	names  []string
}

// expectErrors posts each case's body to path and checks its reply.
func (h *harness) expectErrors(t *testing.T, path string, cases []errorCase) {
	t.Helper()
	for _, tc := range cases {
		r := h.post(path, tc.body)
		if r.status != tc.status {
			t.Errorf("%.120s: status %d (%s), want %d", tc.body, r.status, r.body, tc.status)
			continue
		}
		if tc.code == "" {
			continue
		}
		code, msg := errorReply(t, r.body)
		if code != tc.code {
			t.Errorf("%.120s: code %s (%s), want %s", tc.body, code, msg, tc.code)
		}
		for _, n := range tc.names {
			if !strings.Contains(msg, n) {
				t.Errorf("%.120s: message %q does not name %q", tc.body, msg, n)
			}
		}
	}
}
