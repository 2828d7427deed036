package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/obol-dev/obol/bench/internal/benchkit"
	"github.com/obol-dev/obol/internal/sock"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the floor, as the real binary does:
// the generator starts os.Executable() with -serve-floor.
func TestMain(m *testing.M) {
	if benchkit.IsFloor(os.Args[1:]) {
		if err := floorMain(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// needAgentBuild skips the test where the pipeline cannot run.
func needAgentBuild(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the end-to-end run builds and starts the agent")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the load generator reads /proc: Linux only")
	}
	if _, err := goTool(); err != nil {
		t.Skip(err)
	}
}

// skipOnBuildError skips the test when err is a failed `go build` of the
// agent: someone may be editing it right now.
func skipOnBuildError(t *testing.T, err error) {
	t.Helper()
	var be *benchkit.BuildError
	if errors.As(err, &be) {
		t.Skipf("go build of the agent failed, perhaps because of a concurrent edit; not a failure of the load generator:\n%v", be)
	}
}

// checkRows checks that every measured row answered requests without an
// error. A row may be unavailable only because the agent does not serve that
// endpoint or encoding yet.
func checkRows(t *testing.T, rows []*phaseResult) {
	t.Helper()
	for _, r := range rows {
		if r.unavailable != "" {
			if !strings.Contains(r.unavailable, "not served by the agent yet") &&
				!strings.Contains(r.unavailable, "MessagePack") {
				t.Errorf("%s on the %s: unavailable: %s", r.label(), r.server, r.unavailable)
			}
			t.Logf("%s on the %s not measured: %s", r.label(), r.server, r.unavailable)
			continue
		}
		if r.requests == 0 || !(r.rps() > 0) || r.errors != 0 {
			t.Errorf("%s on the %s: %d requests, %.0f/s, %d errors (%s)", r.label(), r.server, r.requests, r.rps(), r.errors, r.firstErr)
		}
		if !r.cpuOK {
			t.Errorf("%s on the %s: its CPU time was not read", r.label(), r.server)
		}
	}
}

// resultFields parses the RESULT line.
func resultFields(t *testing.T, line string) map[string]float64 {
	t.Helper()
	m := resultPattern.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the last line is not a RESULT line: %q", line)
	}
	keys := []string{"agent_rps", "floor_rps", "rps_ratio", "cpu_ratio", "p99_us", "batch_json_dps", "batch_msgpack_dps"}
	out := map[string]float64{}
	for i, k := range keys {
		v, err := strconv.ParseFloat(m[i+1], 64)
		if err != nil {
			t.Fatalf("RESULT %s=%q: %v", k, m[i+1], err)
		}
		out[k] = v
	}
	return out
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// TestEndToEnd runs the default sequence, shortened, against a freshly built
// agent and the floor.
func TestEndToEnd(t *testing.T) {
	needAgentBuild(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	rep, err := run(ctx, []string{"-c", "4", "-d", "400ms", "-warmup", "100ms", "-domains", "1000", "-rss-keys", "5000"}, noEnv, &stdout, &stderr)
	skipOnBuildError(t, err)
	t.Logf("stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	checkRows(t, rep.rows)
	if len(rep.rows) != 7 {
		t.Errorf("%d rows, want 7 (floor, 4 agent scenarios, 2 at half max)", len(rep.rows))
	}
	out := stdout.String()
	for _, want := range []string{"phase  ", "req/s", "decisions/s", "p99.9 µs", "CPU µs/dec", "agent/floor, /v1/request json", "RSS: agent "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output", want)
		}
	}
	r := resultFields(t, lastLine(out))
	for _, k := range []string{"agent_rps", "floor_rps", "rps_ratio", "cpu_ratio", "p99_us"} {
		if !(r[k] > 0) {
			t.Errorf("RESULT %s=%v, want > 0", k, r[k])
		}
	}
	if rep.rss == nil || rep.rss.errors != 0 || rep.rss.driven != 5000 || rep.rss.after.RSSKiB <= 0 {
		t.Errorf("RSS: %+v", rep.rss)
	}
	// err is nil unless something was not measured, which checkRows allowed.
	if err != nil && !strings.Contains(err.Error(), "not measured") {
		t.Errorf("run: %v", err)
	}
}

// TestAttachSingleAndSoak attaches to an agent started here, measures one
// scenario, then soaks briefly.
func TestAttachSingleAndSoak(t *testing.T) {
	needAgentBuild(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "obol-load-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin, err := buildAgent(ctx, dir)
	skipOnBuildError(t, err)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfg, []byte(agentConfig(1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := startAgent(ctx, bin, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.stop()
	attach := []string{"-agent-socket", a.socket, "-agent-pid", strconv.Itoa(a.pid), "-agent-http", a.http}

	var stdout, stderr bytes.Buffer
	rep, err := run(ctx, append(attach, "-tcp", "-c", "2", "-d", "300ms", "-warmup", "100ms", "-rate", "500", "-rounds", "2"), noEnv, &stdout, &stderr)
	t.Logf("single, open loop over TCP, two rounds:\n%s\n%s", &stdout, &stderr)
	if err != nil {
		t.Errorf("run: %v", err)
	}
	if rep != nil {
		checkRows(t, rep.rows)
	}
	r := resultFields(t, lastLine(stdout.String()))
	if !(r["agent_rps"] > 0) || !(r["p99_us"] > 0) || !strings.Contains(stdout.String(), "open 500/s") {
		t.Errorf("single scenario: %v", r)
	}
	if !strings.Contains(stdout.String(), "agent/floor by round: CPU per request ") {
		t.Errorf("two rounds: no per-round ratios")
	}
	if rep != nil && len(rep.rows) == 2 && !(rep.rows[1].elapsed > 500*time.Millisecond) {
		t.Errorf("two rounds of 300ms: the agent's row covers %s", rep.rows[1].elapsed)
	}

	stdout.Reset()
	stderr.Reset()
	rep, err = run(ctx, append(attach, "-c", "2", "-soak", "1s", "-soak-every", "400ms", "-rate", "300"), noEnv, &stdout, &stderr)
	t.Logf("soak:\n%s\n%s", &stdout, &stderr)
	if err != nil {
		t.Errorf("soak: %v", err)
	}
	if rep == nil || rep.soak == nil || !rep.soak.pass || rep.soak.requests == 0 || len(rep.soak.samples) < 3 {
		t.Fatalf("soak report: %+v", rep)
	}
	if last := lastLine(stdout.String()); !strings.HasPrefix(last, "SOAK PASS rate=300 ") {
		t.Errorf("last soak line %q", last)
	}
}

func noEnv(string) string { return "" }

// TestAttachDefaultSocket: -agent-pid alone attaches on the agent's default
// socket, the one rule the agent and the client use.
func TestAttachDefaultSocket(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // "": an error naming OBOL_SOCKET
	}{
		{name: "XDG_RUNTIME_DIR", env: map[string]string{"XDG_RUNTIME_DIR": "/run/user/7", "TMPDIR": "/var/tmp"}, want: "/run/user/7/obol.sock"},
		{name: "fallback", env: map[string]string{"TMPDIR": "/var/tmp"}, want: sock.DefaultPath(func(string) string { return "" })},
		{name: "OBOL_SOCKET", env: map[string]string{"OBOL_SOCKET": "/run/obol/obol.sock", "XDG_RUNTIME_DIR": "/run/user/7"}, want: "/run/obol/obol.sock"},
		{name: "OBOL_SOCKET off", env: map[string]string{"OBOL_SOCKET": "off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags([]string{"-agent-pid", "1"}, func(k string) string { return tc.env[k] }, &bytes.Buffer{})
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "OBOL_SOCKET") {
					t.Fatalf("parseFlags = %v, want an error naming OBOL_SOCKET", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !o.attached() || o.agentSocket != tc.want {
				t.Errorf("attached %v on %q, want %q", o.attached(), o.agentSocket, tc.want)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	for _, bad := range [][]string{
		{"-c", "0"},
		{"-enc", "xml"},
		{"-batch", "1001"},
		{"-agent-socket", "/x.sock"},
		{"-tcp", "-agent-socket", "/x.sock", "-agent-pid", "1"},
		{"-soak", "1m", "-batch", "10"},
		{"-resources", ","},
		{"-rounds", "0", "-enc", "json"},
		{"-rounds", "101", "-enc", "json"},
		{"-rounds", "2"}, // the default sequence
		{"extra"},
	} {
		if _, err := parseFlags(bad, noEnv, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	o, err := parseFlags(nil, noEnv, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.conns != 64 || o.domains != 10000 || o.dur != 10*time.Second || o.warmup != 2*time.Second || o.single() || o.tcp {
		t.Errorf("defaults: %+v", o)
	}
	if o, _ := parseFlags([]string{"-batch", "10"}, noEnv, &bytes.Buffer{}); !o.single() {
		t.Error("-batch does not select a single scenario")
	}
	var out bytes.Buffer
	if _, err := run(context.Background(), []string{"-print-config", "-rss-keys", "10"}, noEnv, &out, &bytes.Buffer{}); err != nil || !strings.Contains(out.String(), "bench/keys:") {
		t.Errorf("-print-config: %v\n%s", err, &out)
	}
}
