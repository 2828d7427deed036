package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// adaptiveConfig is the config of the adaptive handler tests.
const adaptiveConfig = `
namespaces:
  open: {allow_unconfigured: true}
resources:
  t/login: {kind: adaptive, min_window: 1, max_window: 2, grow_every: 1, margin: 1, timeout: 10s}
  t/shadowed: {kind: adaptive, min_window: 1, max_window: 1, shadow: true}
  t/gcra: {kind: gcra, burst: 20, count: 20, period: 1s}
  t/copies: {kind: copies, domain_limit: 5}
`

func adaptiveEngine(t testing.TB) *local.Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(adaptiveConfig))
	if err != nil {
		t.Fatalf("adaptive test config: %v", err)
	}
	return local.New(cfg)
}

func newAdaptiveHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.srv.SetEngine(adaptiveEngine(t))
	return h
}

func TestAdmitComplete(t *testing.T) {
	h := newAdaptiveHarness(t)
	a := h.ok("/v1/admit", `{"resource":"t/login"}`)
	b := h.ok("/v1/admit", `{"resource":"t/login"}`)
	if a["admitted"] != true || num(t, a, "position") != 1 || num(t, a, "window") != 2 || num(t, b, "position") != 2 {
		t.Fatalf("admissions %v %v", a, b)
	}
	ta, tb := str(t, a, "ticket"), str(t, b, "ticket")
	if ta == tb || !strings.HasPrefix(ta, "t/login#") {
		t.Fatalf("tickets %q %q", ta, tb)
	}
	// The window is full: the exact reply of a rejection.
	if r := h.post("/v1/admit", `{"resource":"t/login"}`); r.status != 200 || string(r.body) != `{"admitted":false,"window":2}` {
		t.Fatalf("rejection: %d %s", r.status, r.body)
	}
	// The second backs off at position 2: window 1.
	if r := h.post("/v1/complete", `{"ticket":"`+tb+`","outcome":"backoff"}`); r.status != 200 || string(r.body) != `{"window":1}` {
		t.Fatalf("backoff: %d %s", r.status, r.body)
	}
	// Completing it again: 404 unknown_ticket naming it.
	r := h.post("/v1/complete", `{"ticket":"`+tb+`","outcome":"success"}`)
	if code, msg := errorReply(t, r.body); r.status != 404 || code != codeUnknownTicket || !strings.Contains(msg, tb) {
		t.Fatalf("a completed ticket: %d %s %s", r.status, code, msg)
	}
	// The first succeeds: grow_every 1 → window 2.
	if c := h.ok("/v1/complete", `{"outcome":"success","ticket":"`+ta+`"}`); num(t, c, "window") != 2 {
		t.Fatalf("success: %v", c)
	}
}

func TestAdmitTimesOut(t *testing.T) {
	h := newAdaptiveHarness(t)
	tk := str(t, h.ok("/v1/admit", `{"resource":"t/login"}`), "ticket")
	h.clock.set(t0.Add(10 * time.Second)) // the resource's timeout
	h.srv.Engine().Step(h.clock.now())
	r := h.post("/v1/complete", `{"ticket":"`+tk+`","outcome":"success"}`)
	if code, msg := errorReply(t, r.body); r.status != 404 || code != codeUnknownTicket || !strings.Contains(msg, "expired") {
		t.Fatalf("an expired ticket: %d %s %s", r.status, code, msg)
	}
	if w, o, _ := h.srv.Engine().AdaptiveWindow("t/login"); w != 1 || o != 0 {
		t.Fatalf("window %d outstanding %d after the timeout: want the backoff at position 1 (window 1) and none", w, o)
	}
}

func TestAdmitShadowAndLenient(t *testing.T) {
	h := newAdaptiveHarness(t)
	h.ok("/v1/admit", `{"resource":"t/shadowed"}`)
	r := h.post("/v1/admit", `{"resource":"t/shadowed"}`)
	if r.status != 200 || string(r.body) != `{"admitted":true,"ticket":"t/shadowed#s","position":2,"window":1,"shadow":true}` {
		t.Fatalf("shadow: %d %s", r.status, r.body)
	}
	r = h.post("/v1/admit", `{"resource":"open/any"}`)
	if r.status != 200 || string(r.body) != `{"admitted":true,"ticket":"open/any#l","position":0,"window":0,"lenient":true}` {
		t.Fatalf("lenient: %d %s", r.status, r.body)
	}
	for _, tk := range []string{"t/shadowed#s", "open/any#l"} {
		if r := h.post("/v1/complete", `{"ticket":"`+tk+`","outcome":"backoff"}`); r.status != 200 {
			t.Fatalf("completing %s: %d %s", tk, r.status, r.body)
		}
	}
}

func TestAdmitCompleteMsgpack(t *testing.T) {
	h := newAdaptiveHarness(t)
	mp := []string{"Content-Type: application/msgpack", "Accept: application/msgpack"}
	r := h.do("POST", "/v1/admit", mpBody(t, map[string]any{"resource": "t/login"}), mp...)
	if r.status != 200 || r.header.Get("Content-Type") != contentTypeMsgpack {
		t.Fatalf("admit: %d %s %q", r.status, r.header.Get("Content-Type"), r.body)
	}
	var a map[string]any
	if err := msgpack.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	tk, _ := a["ticket"].(string)
	if a["admitted"] != true || tk == "" || a["position"] != int8(1) || a["window"] != int8(2) {
		t.Fatalf("admit reply %#v", a)
	}
	r = h.do("POST", "/v1/complete", mpBody(t, map[string]any{"ticket": tk, "outcome": "success"}), mp...)
	var c map[string]any
	if err := msgpack.Unmarshal(r.body, &c); err != nil || r.status != 200 || c["window"] != int8(2) {
		t.Fatalf("complete: %d %#v %v", r.status, c, err)
	}
	// Errors come back in MessagePack too.
	r = h.do("POST", "/v1/complete", mpBody(t, map[string]any{"ticket": tk, "outcome": "success"}), mp...)
	var e map[string]map[string]string
	if err := msgpack.Unmarshal(r.body, &e); err != nil || r.status != 404 || e["error"]["code"] != codeUnknownTicket {
		t.Fatalf("unknown ticket: %d %#v %v", r.status, e, err)
	}
}

// TestAdaptiveMalformed sends adaptive requests that must be refused and
// checks the status, the code and that the message names what is wrong;
// the server keeps serving after each.
func TestAdaptiveMalformed(t *testing.T) {
	h := newAdaptiveHarness(t)
	msgp := []string{"Content-Type: application/msgpack"}
	long := strings.Repeat("x", maxTicket+1)
	cases := []struct {
		name    string
		method  string
		path    string
		body    string
		headers []string
		status  int
		code    string
		names   []string
	}{
		{name: "truncated JSON", path: "/v1/admit", body: `{"resource":`, status: 400, code: "bad_request", names: []string{"resource", "invalid JSON"}},
		{name: "not an object", path: "/v1/admit", body: `["t/login"]`, status: 400, code: "bad_request", names: []string{"body", "object"}},
		{name: "empty body", path: "/v1/admit", body: ``, status: 400, code: "bad_request", names: []string{"resource", "missing"}},
		{name: "unknown field", path: "/v1/admit", body: `{"resource":"t/login","domain":"d"}`, status: 400, code: "bad_request", names: []string{"domain", "unknown field", "resource"}},
		{name: "resource twice", path: "/v1/admit", body: `{"resource":"t/login","resource":"t/login"}`, status: 400, code: "bad_request", names: []string{"resource", "twice"}},
		{name: "resource as number", path: "/v1/admit", body: `{"resource":7}`, status: 400, code: "bad_request", names: []string{"resource", "string", "7"}},
		{name: "empty resource", path: "/v1/admit", body: `{"resource":""}`, status: 400, code: "bad_request", names: []string{"resource", "empty"}},
		{name: "trailing data", path: "/v1/admit", body: `{"resource":"t/login"}{}`, status: 400, code: "bad_request", names: []string{"body", "after"}},
		{name: "invalid UTF-8", path: "/v1/admit", body: "{\"resource\":\"t/\xff\"}", status: 400, code: "bad_request", names: []string{"resource", "UTF-8"}},
		{name: "complete without outcome", path: "/v1/complete", body: `{"ticket":"t/login#1.1"}`, status: 400, code: "bad_request", names: []string{"outcome", "missing"}},
		{name: "complete without ticket", path: "/v1/complete", body: `{"outcome":"success"}`, status: 400, code: "bad_request", names: []string{"ticket", "missing"}},
		{name: "outcome unknown", path: "/v1/complete", body: `{"ticket":"t/login#1.1","outcome":"timeout"}`, status: 400, code: "bad_request", names: []string{"outcome", `"timeout"`, "success", "backoff"}},
		{name: "outcome as bool", path: "/v1/complete", body: `{"ticket":"t/login#1.1","outcome":true}`, status: 400, code: "bad_request", names: []string{"outcome", "string", "true"}},
		{name: "ticket empty", path: "/v1/complete", body: `{"ticket":"","outcome":"success"}`, status: 400, code: "bad_request", names: []string{"ticket", "empty"}},
		{name: "ticket too long", path: "/v1/complete", body: `{"ticket":"` + long + `","outcome":"success"}`, status: 400, code: "bad_request", names: []string{"ticket", "320"}},
		{name: "resource on complete", path: "/v1/complete", body: `{"ticket":"x#1.1","outcome":"success","resource":"t/login"}`, status: 400, code: "bad_request", names: []string{"resource", "unknown field", "ticket, outcome"}},
		{name: "msgpack truncated", path: "/v1/admit", body: "\x81\xa8resource", headers: msgp, status: 400, code: "bad_request", names: []string{"resource", "MessagePack"}},
		{name: "msgpack binary resource", path: "/v1/admit", body: "\x81\xa8resource\xc4\x07t/login", headers: msgp, status: 400, code: "bad_request", names: []string{"resource", "string", "binary"}},
		{name: "msgpack JSON body", path: "/v1/admit", body: `{"resource":"t/login"}`, headers: msgp, status: 400, code: "bad_request", names: []string{"body", "map", "JSON"}},
		{name: "msgpack outcome unknown", path: "/v1/complete", body: "\x82\xa6ticket\xa3x#1\xa7outcome\xa2ok", headers: msgp, status: 400, code: "bad_request", names: []string{"outcome", `"ok"`}},
		{name: "admit unknown resource", path: "/v1/admit", body: `{"resource":"nope/x"}`, status: 404, code: "unknown_resource", names: []string{"nope/x"}},
		{name: "admit on gcra", path: "/v1/admit", body: `{"resource":"t/gcra"}`, status: 409, code: "wrong_kind", names: []string{"t/gcra", "adaptive"}},
		{name: "admit on copies", path: "/v1/admit", body: `{"resource":"t/copies"}`, status: 409, code: "wrong_kind", names: []string{"t/copies"}},
		{name: "request on adaptive", path: "/v1/request", body: `{"resource":"t/login","domain":"d"}`, status: 409, code: "wrong_kind", names: []string{"t/login", "an adaptive resource"}},
		{name: "refund on adaptive", path: "/v1/refund", body: `{"resource":"t/login","domain":"d"}`, status: 409, code: "wrong_kind", names: []string{"t/login"}},
		{name: "check on adaptive", method: "GET", path: "/v1/check?resource=t/login&domain=d", status: 409, code: "wrong_kind", names: []string{"t/login"}},
		{name: "unknown ticket", path: "/v1/complete", body: `{"ticket":"t/login#1.1","outcome":"success"}`, status: 404, code: "unknown_ticket", names: []string{"t/login#1.1"}},
		{name: "not a ticket", path: "/v1/complete", body: `{"ticket":"hello","outcome":"backoff"}`, status: 404, code: "unknown_ticket", names: []string{"hello"}},
		{name: "wrong method", method: "GET", path: "/v1/admit", status: 405, code: "bad_request", names: []string{"GET", "POST"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "POST"
			}
			r := h.do(method, tc.path, tc.body, tc.headers...)
			if r.status != tc.status {
				t.Errorf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			code, msg := errorReply(t, r.body)
			if code != tc.code {
				t.Errorf("code %q, want %q (message %q)", code, tc.code, msg)
			}
			for _, n := range tc.names {
				if !strings.Contains(msg, n) {
					t.Errorf("message %q does not name %q", msg, n)
				}
			}
			if r := h.post("/v1/admit", `{"resource":"open/after"}`); r.status != 200 {
				t.Fatalf("after the bad request, /v1/admit is %d %s", r.status, r.body)
			}
		})
	}
	if strings.Contains(h.logs.String(), "internal") {
		t.Errorf("a client error was logged as internal: %s", h.logs.String())
	}
}

// checkAdaptive checks what an adaptive decoder accepted against
// encoding/json's or msgpack's reading of the same body.
func checkAdaptive(t *testing.T, b *wireBody, allowed fieldSet, m map[string]any) {
	t.Helper()
	if b.seen != allowed {
		t.Fatalf("accepted with fields %s, want %s", b.seen.list(), allowed.list())
	}
	if allowed&fResource != 0 {
		if len(b.resource) == 0 || len(b.resource) > maxName || !utf8.Valid(b.resource) || m["resource"] != string(b.resource) {
			t.Fatalf("resource %q accepted (decoder reads %v)", b.resource, m["resource"])
		}
	}
	if allowed&fTicket != 0 {
		if len(b.ticket) == 0 || len(b.ticket) > maxTicket || !utf8.Valid(b.ticket) || m["ticket"] != string(b.ticket) {
			t.Fatalf("ticket %q accepted (decoder reads %v)", b.ticket, m["ticket"])
		}
		if m["outcome"] != b.outcome.String() || (b.outcome != adaptive.Success && b.outcome != adaptive.Backoff) {
			t.Fatalf("outcome %v accepted (decoder reads %v)", b.outcome, m["outcome"])
		}
	}
}

func fuzzAdaptive(f *testing.F, allowed fieldSet, mp bool) {
	f.Fuzz(func(t *testing.T, data []byte) {
		c := getCall()
		defer putCall(c)
		b := &c.body
		var err error
		if mp {
			err = b.decodeMsgpack(data, allowed, allowed)
		} else {
			err = b.decode(data, allowed, allowed)
		}
		if err != nil {
			status, code, msg, ok := classify(err)
			if !ok || status != 400 || code != codeBadRequest || msg == "" {
				t.Fatalf("decode error %v classifies as %d %s %v", err, status, code, ok)
			}
			return
		}
		var m map[string]any
		if mp {
			if err := msgpack.Unmarshal(data, &m); err != nil {
				t.Fatalf("accepted a body msgpack.Unmarshal refuses (%v): %q", err, data)
			}
		} else {
			d := json.NewDecoder(bytes.NewReader(data))
			if err := d.Decode(&m); err != nil || d.More() {
				t.Fatalf("accepted a body encoding/json refuses (%v): %q", err, data)
			}
		}
		checkAdaptive(t, b, allowed, m)
	})
}

func FuzzDecodeAdmit(f *testing.F)           { fuzzAdaptive(f, admitFields, false) }
func FuzzDecodeComplete(f *testing.F)        { fuzzAdaptive(f, completeFields, false) }
func FuzzDecodeAdmitMsgpack(f *testing.F)    { fuzzAdaptive(f, admitFields, true) }
func FuzzDecodeCompleteMsgpack(f *testing.F) { fuzzAdaptive(f, completeFields, true) }

// BenchmarkAdmitCompleteHandlers runs POST /v1/admit then POST
// /v1/complete through the route table and handlers, without the network.
func BenchmarkAdmitCompleteHandlers(b *testing.B) {
	s := New(adaptiveEngine(b), Options{
		Now:    func() time.Time { return t0 },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	var admit, complete fasthttp.RequestCtx
	admit.Request.Header.SetMethod("POST")
	admit.Request.SetRequestURI("/v1/admit")
	admit.Request.Header.SetContentType(contentTypeJSON)
	complete.Request.Header.SetContentType(contentTypeJSON)
	admit.Request.SetBody([]byte(`{"resource":"t/login"}`))
	complete.Request.Header.SetMethod("POST")
	complete.Request.SetRequestURI("/v1/complete")
	body := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		admit.Response.Reset()
		s.Handler(&admit)
		out := admit.Response.Body()
		i := bytes.Index(out, []byte(`"ticket":"`))
		j := bytes.Index(out, []byte(`","position"`))
		if admit.Response.StatusCode() != 200 || i < 0 || j < 0 {
			b.Fatalf("admit: %d %s", admit.Response.StatusCode(), out)
		}
		body = append(body[:0], `{"outcome":"success","ticket":"`...)
		body = append(body, out[i+10:j]...)
		body = append(body, `"}`...)
		complete.Request.SetBody(body)
		complete.Response.Reset()
		s.Handler(&complete)
		if complete.Response.StatusCode() != 200 {
			b.Fatalf("complete: %d %s", complete.Response.StatusCode(), complete.Response.Body())
		}
	}
}

func BenchmarkDecodeComplete(b *testing.B) {
	data := []byte(`{"ticket":"t/login#1a2b3c.4d","outcome":"success"}`)
	c := getCall()
	defer putCall(c)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		c.body.clear()
		if err := c.body.decode(data, completeFields, completeFields); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAdaptiveMetrics(t *testing.T) {
	h := newAdaptiveHarness(t)
	a := h.ok("/v1/admit", `{"resource":"t/login"}`)
	h.ok("/v1/admit", `{"resource":"t/login"}`)
	h.ok("/v1/complete", `{"ticket":"`+str(t, a, "ticket")+`","outcome":"backoff"}`) // position 1 of 2: window 1
	page := string(h.do("GET", "/metrics", "").body)
	for _, want := range []string{
		`obol_adaptive_window{resource="t/login"} 1`,
		`obol_adaptive_outstanding{resource="t/login"} 1`,
		`obol_adaptive_window{resource="t/shadowed"} 1`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestAdmitClientShareOverTheSocket: on the Unix socket a client is the
// process at the other end; with client_share 0.5 of a window of 4, this
// process gets two places and a third admit is refused with client_share.
func TestAdmitClientShareOverTheSocket(t *testing.T) {
	cfg, err := config.Parse([]byte(`resources: {a/w: {kind: adaptive, min_window: 1, max_window: 4, client_share: 0.5}}`))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "obs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv := New(local.New(cfg), Options{Logger: slog.New(slog.DiscardHandler)})
	ls, err := Listen(ListenConfig{Socket: filepath.Join(dir, "s.sock")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ls) }()
	defer func() { stop(); <-done }()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, "s.sock"))
	}}}
	admit := func() map[string]any {
		t.Helper()
		resp, err := hc.Post("http://obol/v1/admit", "application/json", strings.NewReader(`{"resource":"a/w"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return decodeObject(t, b)
	}
	for i := range 2 {
		if m := admit(); m["admitted"] != true {
			t.Fatalf("admit %d: %v", i, m)
		}
	}
	if m := admit(); m["admitted"] != false || m["client_share"] != true {
		t.Errorf("third admit of one process: %v, want refused with client_share", m)
	}
}
