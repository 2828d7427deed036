package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/obol-dev/obol/api"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
)

// pacerResources are added to the agent config of the pacer tests.
const pacerResources = `
  t/pacer: {kind: pacer, quota: 4500, period: 1h, jitter: 0}
`

// startPacerAgent serves an agent on testConfig plus pacerResources whose
// clock is clk, until the test ends, and returns its socket.
func startPacerAgent(t *testing.T, clk *clock.Fake) (*api.Server, string) {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig + pacerResources))
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	srv := api.New(local.New(cfg), api.Options{Now: clk.Now, Logger: slog.New(slog.DiscardHandler), NodeName: "test"})
	srv.SetReady(true)
	sock := filepath.Join(shortTempDir(t), "p.sock")
	serve(t, sock, srv.Handler)
	return srv, sock
}

// remaining returns what the agent's pacer of t/pacer last saw.
func remaining(t *testing.T, srv *api.Server, now time.Time) int {
	t.Helper()
	p, ok := srv.Engine().PacerStatus(now, "t/pacer")
	if !ok {
		t.Fatal("t/pacer has no pacer")
	}
	return p.Remaining
}

func TestPaceObserve(t *testing.T) {
	clk := fakeClock()
	srv, sock := startPacerAgent(t, clk)
	c, _ := newClient(t, Config{Socket: sock, Clock: clk})
	ctx := context.Background()
	if d, err := c.Pace(ctx, "t/pacer"); err != nil || d != 0 {
		t.Fatalf("first pace: %v %v", d, err)
	}
	// +100 ms: a 429 with the draft-11 field. The agent paces at
	// 1.25·exp(−22.5/20)/s at an empty quota: the next call one interval
	// (2.464171 s) after the first, 2.364171 s from now, rounded up.
	clk.Advance(100 * time.Millisecond)
	h := http.Header{}
	h.Set("RateLimit", `"hour";r=0;t=3600`)
	if err := c.Observe(ctx, "t/pacer", 429, h); err != nil {
		t.Fatal(err)
	}
	if got := remaining(t, srv, clk.Now()); got != 0 {
		t.Fatalf("the agent saw remaining %d, want 0", got)
	}
	if d, err := c.Pace(ctx, "t/pacer"); err != nil || d != 2365*time.Millisecond {
		t.Fatalf("pace after the 429: %v %v, want 2.365s", d, err)
	}
	// A plenty of quota left (RateLimit-Remaining): no pacing.
	h = http.Header{}
	h.Set("RateLimit-Remaining", "4000")
	if err := c.Observe(ctx, "t/pacer", 200, h); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Pace(ctx, "t/pacer"); d != 0 || remaining(t, srv, clk.Now()) != 4000 {
		t.Fatalf("pace with 4000 left: %v (remaining %d)", d, remaining(t, srv, clk.Now()))
	}
	// A malformed header and no header: no count sent, the last one stays.
	h = http.Header{}
	h.Set("RateLimit", "lots")
	for _, hdr := range []http.Header{h, nil} {
		if err := c.Observe(ctx, "t/pacer", 200, hdr); err != nil {
			t.Fatal(err)
		}
	}
	if got := remaining(t, srv, clk.Now()); got != 4000 {
		t.Fatalf("remaining %d after replies without a count, want 4000", got)
	}
}

func TestPaceErrors(t *testing.T) {
	clk := fakeClock()
	_, sock := startPacerAgent(t, clk)
	c, _ := newClient(t, Config{Socket: sock, Clock: clk})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
		want error
		says string
	}{
		{name: "pace on gcra", err: errOf(c.Pace(ctx, "t/gcra")), want: ErrWrongKind, says: "pace is for pacer resources"},
		{name: "pace unknown", err: errOf(c.Pace(ctx, "zz/x")), want: ErrUnknownResource, says: "zz/x"},
		{name: "pace no resource", err: errOf(c.Pace(ctx, "")), want: ErrBadRequest, says: "resource: required"},
		{name: "observe on tiers", err: c.Observe(ctx, "t/tiers", 200, nil), want: ErrWrongKind, says: "observe is for pacer resources"},
		{name: "observe status", err: c.Observe(ctx, "t/pacer", 42, nil), want: ErrBadRequest, says: "status: must be an HTTP status code in [100, 599], got 42"},
	} {
		if !errors.Is(tc.err, tc.want) || !strings.Contains(tc.err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, tc.err, tc.want, tc.says)
		}
	}
	if st := c.Stats(); st.Errors != 5 || st.Degraded != 0 {
		t.Errorf("stats %+v, want 5 errors", st)
	}
	_ = c.Close()
	if _, err := c.Pace(ctx, "t/pacer"); !errors.Is(err, ErrClosed) {
		t.Errorf("pace after Close: %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }

func TestPaceFailsOpen(t *testing.T) {
	c, logs := newClient(t, Config{Socket: filepath.Join(shortTempDir(t), "gone.sock")})
	ctx := context.Background()
	if d, err := c.Pace(ctx, "t/pacer"); err != nil || d != 0 {
		t.Fatalf("pace with no agent: %v %v, want 0 and no error", d, err)
	}
	if err := c.Observe(ctx, "t/pacer", 429, nil); err != nil {
		t.Fatalf("observe with no agent: %v", err)
	}
	if st := c.Stats(); st.Degraded != 1 || st.Errors != 0 {
		t.Fatalf("stats %+v, want one degraded pace", st)
	}
	if logs.lines("not pacing") != 1 {
		t.Fatalf("want one log line about pacing off")
	}
}

// fakeAPI is a fake rate-limited API: a RoundTripper that answers each request
// with the next canned reply and records when it was sent.
type fakeAPI struct {
	mu      sync.Mutex
	clk     *clock.Fake
	replies []*http.Response
	sent    []time.Time
}

func (f *fakeAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, f.clk.Now())
	r := f.replies[0]
	f.replies = f.replies[1:]
	r.Request = req
	r.Body = io.NopCloser(strings.NewReader(""))
	return r, nil
}

func (f *fakeAPI) calls() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.sent...)
}

func reply(status int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Header: h}
}

// TestPacedTransport sends two requests through the transport: the first
// goes at once and meets a 429; the second waits the agent's 2.465 s on
// the fake clock (not a moment less), then meets plenty of quota.
func TestPacedTransport(t *testing.T) {
	clk := fakeClock()
	srv, sock := startPacerAgent(t, clk)
	c, _ := newClient(t, Config{Socket: sock, Clock: clk})
	remote := &fakeAPI{clk: clk, replies: []*http.Response{
		reply(429, "RateLimit", `"hour";r=0;t=3600`),
		reply(200, "RateLimit-Remaining", "4000"),
	}}
	hc := &http.Client{Transport: c.PacedTransport("t/pacer", remote)}
	get := func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://api.example/items", nil)
		return hc.Do(req)
	}
	resp, err := get()
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("first: %v %v", resp, err)
	}
	resp.Body.Close()
	if remaining(t, srv, clk.Now()) != 0 {
		t.Fatal("the 429 was not observed")
	}
	done := make(chan error, 1)
	go func() {
		resp, err := get()
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	if err := clk.BlockUntil(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2464 * time.Millisecond)
	if n := len(remote.calls()); n != 1 {
		t.Fatalf("the second request was sent after 2.464s of a 2.465s wait (%d calls)", n)
	}
	clk.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	calls := remote.calls()
	if len(calls) != 2 || calls[1].Sub(calls[0]) != 2465*time.Millisecond {
		t.Fatalf("calls at %v, want two 2.465s apart", calls)
	}
	if got := remaining(t, srv, clk.Now()); got != 4000 {
		t.Fatalf("remaining %d after the second reply, want 4000", got)
	}
}

func TestPacedTransportRefusesAWrongResource(t *testing.T) {
	clk := fakeClock()
	_, sock := startPacerAgent(t, clk)
	c, _ := newClient(t, Config{Socket: sock, Clock: clk})
	remote := &fakeAPI{clk: clk}
	hc := &http.Client{Transport: c.PacedTransport("t/gcra", remote)}
	_, err := hc.Get("http://api.example/items")
	if !errors.Is(err, ErrWrongKind) {
		t.Fatalf("a transport on a gcra resource: %v, want ErrWrongKind", err)
	}
	if len(remote.calls()) != 0 {
		t.Fatal("the request was sent anyway")
	}
}
