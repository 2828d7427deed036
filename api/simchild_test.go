package api

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/obol-dev/obol/internal/await"
)

// TestMain serves the simulation children the tests' servers start
// (Options.SimulateInChild): their executable is this test binary.
func TestMain(m *testing.M) {
	if SimulationChild() {
		os.Exit(ServeSimulationChild(os.Stdin, os.Stdout, Options{Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))}))
	}
	if os.Getenv("OBOL_TEST_SPIN") == "1" { // TestSimulateChildCPUCap's child
		childSetup(time.Millisecond)
		for {
		}
	}
	os.Exit(m.Run())
}

// childHarness is a harness whose server runs simulations in children:
// exe, when set, stands for the executable; slack for childSlack.
func childHarness(t *testing.T, exe string, limit, slack time.Duration) *harness {
	t.Helper()
	h := &harness{t: t, clock: &clock{t: t0}, logs: &logBuffer{}}
	h.srv = New(testEngine(t), Options{Now: h.clock.now, Logger: slog.New(slog.NewJSONHandler(h.logs, nil)),
		NodeName: "node-a", SimulateInChild: true, SimulateTimeLimit: limit})
	if exe != "" {
		h.srv.sim.child.exe = exe
	}
	h.srv.sim.child.slackSet = slack
	return h.serve()
}

// script writes an executable shell script of body and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in children are shell scripts")
	}
	p := filepath.Join(t.TempDir(), "child")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// A simulation run in a child answers exactly what it answers in the
// server (status, type, Retry-After, body), in both formats and for the
// bodies it refuses; each ran in a child.
func TestSimulateInChildSameReplies(t *testing.T) {
	in, child := newHarness(t), childHarness(t, "", 0, 0)
	cases := []struct {
		body    string
		headers []string
	}{
		{body: `{"resource":{"kind":"gcra","burst":20,"count":20,"period":"1s"},"requests":[
			{"at_ms":0,"domain":"ip"},{"at_ms":5,"domain":"ip","copies":18},{"at_ms":50,"domain":"ip","op":"refund","copies":2}]}`},
		{body: `{"resource":{"kind":"tiers","tiers":"2,1,1,0"},"requests":[{"at_ms":0,"domain":"d"},{"at_ms":0,"domain":"d","copies":2,"min_copies":1}]}`},
		{body: `{"resource":{"kind":"gcra","burst":2,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"d","copies":3}]}`,
			headers: []string{"Accept: application/msgpack"}},
		{body: `{"resource":{"kind":"gcra","burst":0,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"d"}]}`},
		{body: `{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[{"at_ms":-1,"domain":"d"}]}`},
		{body: `{"resource":`},
		{body: manyRequests(maxSimRequests + 1)}, // 3 MB through the pipe, refused in the child
		{body: manyRequests(20_000)},             // a reply of 1.4 MB
	}
	for i, c := range cases {
		want := in.do("POST", "/v1/simulate", c.body, c.headers...)
		got := child.do("POST", "/v1/simulate", c.body, c.headers...)
		if got.status != want.status || string(got.body) != string(want.body) ||
			got.header.Get("Content-Type") != want.header.Get("Content-Type") ||
			got.header.Get("Retry-After") != want.header.Get("Retry-After") {
			t.Errorf("case %d: in a child %d %s %.300q, in the server %d %s %.300q", i,
				got.status, got.header.Get("Content-Type"), got.body, want.status, want.header.Get("Content-Type"), want.body)
		}
	}
	if n := child.srv.sim.child.started.Load(); n != int64(len(cases)) {
		t.Errorf("%d children started, want %d", n, len(cases))
	}
	if n := in.srv.sim.child.started.Load(); n != 0 {
		t.Errorf("%d children started without SimulateInChild", n)
	}
}

const oneSim = `{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"d"}]}`

// A child that fails, or replies garbage, is a 500 internal whose request
// id the log carries with what the child wrote on its standard error.
func TestSimulateChildFails(t *testing.T) {
	for _, c := range []struct{ name, body, logged string }{
		{"exits", "echo 'boom in the child' >&2; exit 3", "boom in the child"},
		{"short reply", `printf 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort'`, "simulation child"},
		{"not HTTP", "echo hello", "simulation child"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := childHarness(t, script(t, c.body), 0, 0)
			r := h.post("/v1/simulate", oneSim)
			if code, msg := errorReply(t, r.body); r.status != 500 || code != "internal" || !strings.Contains(msg, "request id") {
				t.Fatalf("%d %s %q, want 500 internal with a request id", r.status, code, msg)
			}
			if !strings.Contains(h.logs.String(), c.logged) {
				t.Errorf("log %q does not say %q", h.logs.String(), c.logged)
			}
		})
	}
}

// A child that does not answer within fifteen times the time limit and
// the slack is killed and answered 413 too_large, as a simulation past its
// time is.
func TestSimulateChildStuck(t *testing.T) {
	h := childHarness(t, script(t, "exec sleep 30"), time.Millisecond, 100*time.Millisecond)
	start := time.Now()
	r := h.post("/v1/simulate", oneSim)
	if code, msg := errorReply(t, r.body); r.status != 413 || code != "too_large" || !strings.Contains(msg, "on the clock") {
		t.Fatalf("%d %s %q, want 413 too_large naming the time on the clock", r.status, code, msg)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("answered after %s", took)
	}
}

// When no child can start, the server runs the simulation itself and logs
// it once.
func TestSimulateChildMissing(t *testing.T) {
	h := childHarness(t, filepath.Join(t.TempDir(), "gone"), 0, 0)
	want := newHarness(t).post("/v1/simulate", oneSim)
	for range 2 {
		if r := h.post("/v1/simulate", oneSim); r.status != 200 || string(r.body) != string(want.body) {
			t.Fatalf("%d %s, want %d %s", r.status, r.body, want.status, want.body)
		}
	}
	if n := strings.Count(h.logs.String(), "could not start"); n != 1 {
		t.Errorf("logged %d times, want once: %s", n, h.logs.String())
	}
}

// A child is born at the lowest priority (Linux): it is started from the
// simulation's low-priority thread, whose priority it inherits, so that
// not even its start and the Go runtime's set-up in it run beside the
// decisions at theirs.
func TestSimulateChildBornLow(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread priorities are Linux's")
	}
	// Field 19 of /proc/self/stat is the nice value; the script's own
	// process reads it and fails, so that the log shows it.
	h := childHarness(t, script(t, `echo "nice=$(cut -d' ' -f19 /proc/$$/stat)" >&2; exit 3`), 0, 0)
	if r := h.post("/v1/simulate", oneSim); r.status != 500 {
		t.Fatalf("status %d, want 500 from the failing stand-in", r.status)
	}
	if !strings.Contains(h.logs.String(), "nice=19") {
		t.Errorf("the child was not born at nice 19: %s", h.logs.String())
	}
}

// manyRequests is a simulation body of n requests.
func manyRequests(n int) string {
	var b strings.Builder
	b.WriteString(`{"resource":{"kind":"gcra","burst":5,"count":5,"period":"1s"},"requests":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"at_ms":` + strconv.Itoa(i) + `,"domain":"d"}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// A child is given a request of its own: the method, path and query,
// Content-Type, Accept and the body, never the client's credentials or
// other headers; so 400 headers that fit the agent's buffer, with a
// token among them, are answered as in the server.
func TestSimulateChildRequest(t *testing.T) {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("http://example/v1/simulate?trace=true")
	ctx.Request.Header.SetContentType("application/json")
	ctx.Request.Header.Set("Accept", "application/msgpack")
	ctx.Request.Header.Set("Authorization", "Bearer SECRET")
	ctx.Request.Header.Set("Cookie", "a=b")
	ctx.Request.SetBodyString(oneSim)
	req := childRequest(&ctx)
	defer fasthttp.ReleaseRequest(req)
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := req.Write(w); err != nil || w.Flush() != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"POST /v1/simulate?trace=true HTTP/1.1\r\n", "Content-Type: application/json\r\n", "Accept: application/msgpack\r\n", "\r\n\r\n" + oneSim} {
		if !strings.Contains(got, want) {
			t.Errorf("the child's request lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"SECRET", "Cookie", "example"} {
		if strings.Contains(got, not) {
			t.Errorf("the child's request carries %q:\n%s", not, got)
		}
	}

	in, child := newHarness(t), childHarness(t, "", 0, 0)
	headers := []string{"Authorization: Bearer SECRET"}
	for i := range 400 {
		headers = append(headers, "X"+strconv.Itoa(i)+":v")
	}
	want := in.do("POST", "/v1/simulate", oneSim, headers...)
	if r := child.do("POST", "/v1/simulate", oneSim, headers...); r.status != want.status || string(r.body) != string(want.body) {
		t.Errorf("400 headers: in a child %d %s, in the server %d %s", r.status, r.body, want.status, want.body)
	}
	if strings.Contains(child.logs.String(), "SECRET") {
		t.Errorf("the log shows the token: %s", child.logs.String())
	}
}

// A child running when the agent stops is killed, and its client answered
// 503 not_ready.
func TestSimulateChildStoppedWithAgent(t *testing.T) {
	h := &harness{t: t, clock: &clock{t: t0}, logs: &logBuffer{}}
	h.srv = New(testEngine(t), Options{Now: h.clock.now, Logger: slog.New(slog.NewJSONHandler(h.logs, nil)), SimulateInChild: true})
	h.srv.sim.child.exe = script(t, "exec sleep 30")
	h.srv.SetReady(true)
	ln := fasthttputil.NewInmemoryListener()
	hs := h.srv.httpServer()
	go func() { _ = hs.Serve(ln) }()
	h.http = &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return ln.Dial() }}}
	got := make(chan reply, 1)
	go func() { got <- h.post("/v1/simulate", oneSim) }()
	await.Poll(t, 10*time.Second, "the child to start", func() bool { return h.srv.sim.child.started.Load() == 1 })
	start := time.Now()
	if err := hs.Shutdown(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if code, msg := errorReply(t, r.body); r.status != 503 || code != "not_ready" {
		t.Fatalf("%d %s %q, want 503 not_ready", r.status, code, msg)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stopped after %s", took)
	}
}

// A child's own 5xx reply is relayed as it is, and logged with the start
// of the child's standard error (its own log, with its request id).
func TestSimulateChildServerErrorLogged(t *testing.T) {
	h := childHarness(t, script(t, `echo '{"msg":"internal error","request_id":"child-1"}' >&2
printf 'HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'`), 0, 0)
	if r := h.post("/v1/simulate", oneSim); r.status != 500 || string(r.body) != "{}" {
		t.Fatalf("%d %s, want the child's 500 as it is", r.status, r.body)
	}
	if !strings.Contains(h.logs.String(), "child-1") {
		t.Errorf("the log lacks the child's: %s", h.logs.String())
	}
}

// The variable alone makes no child: the first argument must name the
// mode too, so that an agent started with the variable left in its
// environment runs as an agent.
func TestSimulationChildNeedsBoth(t *testing.T) {
	t.Setenv(SimulationChildEnv, "2s")
	if SimulationChild() {
		t.Fatalf("a child with only %s set (arguments %q)", SimulationChildEnv, os.Args[1:])
	}
}

// A child that spins past its processor time in all is ended by the
// kernel (Linux: RLIMIT_CPU), and overCPU says so; a plain failure is not
// taken for it.
func TestSimulateChildCPUCap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_CPU is set on Linux")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "OBOL_TEST_SPIN=1")
	start := time.Now()
	err := cmd.Run()
	if !overCPU(cmd.ProcessState, time.Second) {
		t.Fatalf("a child spinning past a second of processor time: %v, want it ended for its processor time", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("ended after %s", took)
	}
	f := exec.Command("false")
	_ = f.Run()
	k := exec.Command("sleep", "10")
	_ = k.Start()
	_ = k.Process.Kill()
	_ = k.Wait()
	if overCPU(f.ProcessState, time.Second) || overCPU(k.ProcessState, time.Second) || overCPU(nil, time.Second) {
		t.Error("an exit, or a kill before the limit, taken for the processor-time limit")
	}
}
