package api

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain serves the simulation children the tests' servers start
// (Options.SimulateInChild): their executable is this test binary.
func TestMain(m *testing.M) {
	if SimulationChild() {
		os.Exit(ServeSimulationChild(os.Stdin, os.Stdout, Options{Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))}))
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
			t.Errorf("case %d: in a child %d %s %q, in the server %d %s %q", i,
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
