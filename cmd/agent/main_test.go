package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/await"
	"github.com/obol-dev/obol/internal/sock"
)

// syncBuffer is an agent's log: safe for concurrent use, and a test waits
// on its writes for a line to appear.
type syncBuffer = await.Log

// tempDir returns a short temp dir (socket paths are limited to 108 bytes).
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "obol")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// agent is a run in progress.
type agent struct {
	cancel context.CancelFunc
	done   chan error
	stderr *syncBuffer
	socket string
}

func startAgent(t *testing.T, args []string, getenv func(string) string, socket string) *agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{cancel: cancel, done: make(chan error, 1), stderr: &syncBuffer{}, socket: socket}
	go func() { a.done <- run(ctx, args, getenv, io.Discard, a.stderr) }()
	t.Cleanup(func() {
		cancel()
		<-a.done
	})
	a.waitReady(t)
	return a
}

// waitReady returns once the agent answers GET /readyz with 200 on its
// socket, and fails t if run returns first.
func (a *agent) waitReady(t *testing.T) {
	t.Helper()
	exited := func() bool {
		select {
		case err := <-a.done:
			a.done <- err
			return true
		default:
			return false
		}
	}
	// Readiness shows only on /readyz (the start line, which comes just
	// before it, is not logged at every log level): no event reaches the
	// test, so it is polled.
	client := unixClient(a.socket)
	ready := await.PollOK(10*time.Second, func() bool {
		if exited() {
			return true
		}
		resp, err := client.Get("http://obol/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if exited() {
		err := <-a.done
		a.done <- err
		t.Fatalf("run returned early: %v; stderr:\n%s", err, a.stderr)
	}
	if !ready {
		t.Fatalf("the agent never got ready; stderr:\n%s", a.stderr)
	}
}

// stop cancels the run and returns its error.
func (a *agent) stop(t *testing.T) error {
	t.Helper()
	a.cancel()
	select {
	case err := <-a.done:
		a.done <- err // for the cleanup
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after cancel")
		return nil
	}
}

func unixClient(path string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
		Timeout: 5 * time.Second,
	}
}

// logLines decodes the JSON log lines of stderr.
func logLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestRunServesAndStops(t *testing.T) {
	sock := filepath.Join(tempDir(t), "obol.sock")
	a := startAgent(t, []string{"--socket", sock, "--http", "127.0.0.1:0"}, noEnv, sock)

	resp, err := unixClient(sock).Post("http://obol/v1/request", "application/json",
		strings.NewReader(`{"resource":"demo/search","domain":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"granted":1`) {
		t.Errorf("request on the default config: %d %s", resp.StatusCode, body)
	}
	started := logLines(t, a.stderr.String())[0]
	addr, _ := started["http"].(string)
	if started["msg"] != "obol agent started" || started["socket"] != sock || started["config"] != "built-in default" ||
		started["resources"] != float64(len(config.Default().Resources)) || !strings.HasPrefix(addr, "127.0.0.1:") || addr == "127.0.0.1:0" {
		t.Errorf("start line %v", started)
	}
	hresp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("healthz over TCP: %v", err)
	}
	hresp.Body.Close()

	if err := a.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is still there after stop: %v", err)
	}
	lines := logLines(t, a.stderr.String())
	if len(lines) != 2 || lines[1]["msg"] != "obol agent stopped" {
		t.Errorf("want a start and a stop line, got %v", lines)
	}
}

func TestRunConfigFromEnvAndFile(t *testing.T) {
	dir := tempDir(t)
	sock := filepath.Join(dir, "from-config.sock")
	cfgPath := filepath.Join(dir, "obol.yaml")
	err := os.WriteFile(cfgPath, []byte("agent:\n  socket: "+sock+"\n  http: 127.0.0.1:0\nresources:\n  x/y: {kind: gcra, burst: 1, count: 1, period: 1s}\n"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, nil, envOf(map[string]string{"OBOL_CONFIG": cfgPath}), sock)
	started := logLines(t, a.stderr.String())[0]
	if started["config"] != cfgPath || started["resources"] != float64(1) {
		t.Errorf("start line %v", started)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestRunBadConfigPrintsEveryProblem(t *testing.T) {
	path := filepath.Join(tempDir(t), "bad.yaml")
	err := os.WriteFile(path, []byte(`resources:
  api/a: {kind: gcra, burst: 0, count: 1, period: 1s}
  api/b: {kind: nonsense}
  api/c: {kind: tiers, tiers: "5,1,1,0", colour: red}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var ps *config.Problems
	if _, err := config.Load(path); !errors.As(err, &ps) || len(*ps) < 3 {
		t.Fatalf("the test config should have at least 3 problems: %v", err)
	}
	var stderr bytes.Buffer
	err = run(context.Background(), []string{"--config", path}, noEnv, io.Discard, &stderr)
	if code := exitCode(err); code != 2 {
		t.Fatalf("exit code %d (%v), want 2", code, err)
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("run's error %v is not an exitError with code 2", err)
	}
	for _, p := range *ps {
		if !strings.Contains(stderr.String(), p.String()) {
			t.Errorf("problem %q not printed; stderr:\n%s", p, stderr.String())
		}
	}
}

// TestRunBadInput: every bad flag, variable or config value exits 2 before
// anything is bound, with a message naming the flag, variable or key and the
// value.
func TestRunBadInput(t *testing.T) {
	dir := tempDir(t)
	sock := filepath.Join(dir, "s.sock")
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	httpEmpty := file("http-empty.yaml", "agent: {http: \"\"}\n")
	bothOff := file("both-off.yaml", "agent: {http: off, socket: off}\n")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string // each must appear on stderr
	}{
		{name: "missing config file", args: []string{"--config", filepath.Join(dir, "none.yaml")}, want: []string{`--config "` + filepath.Join(dir, "none.yaml") + `"`}},
		{name: "missing config file from env", env: map[string]string{"OBOL_CONFIG": filepath.Join(dir, "env.yaml")}, want: []string{`OBOL_CONFIG "` + filepath.Join(dir, "env.yaml") + `"`}},
		{name: "unknown flag", args: []string{"--colour"}, want: []string{"colour"}},
		{name: "stray argument", args: []string{"serve"}, want: []string{"serve"}},
		{name: "empty --http", args: []string{"--http", ""}, want: []string{`--http "": empty`, "off"}},
		{name: "empty --socket", args: []string{"--socket="}, want: []string{`--socket "": empty`, "off"}},
		{name: "empty --config", args: []string{"--config", ""}, want: []string{`--config "": empty`}},
		{name: "empty agent.http in the config file", args: []string{"--config", httpEmpty}, want: []string{"agent.http: must not be empty", `"off"`}},
		{name: "both listeners off", args: []string{"--socket", "off", "--http", "off"}, want: []string{`--socket "off" and --http "off": at least one listener`}},
		{name: "both listeners off, env and config", args: []string{"--config", bothOff}, env: map[string]string{"OBOL_SOCKET": "off"},
			want: []string{`OBOL_SOCKET "off" and config agent.http "off"`}},
		{name: "public address without --http-public", args: []string{"--socket", sock, "--http", "0.0.0.0:0"}, want: []string{`--http "0.0.0.0:0": not a loopback address`, "--http-public"}},
		{name: "every interface without --http-public", args: []string{"--socket", sock, "--http", ":7070"}, want: []string{`--http ":7070"`, "every interface"}},
		{name: "public address from env", args: []string{"--socket", sock}, env: map[string]string{"OBOL_HTTP": "192.0.2.1:7070"}, want: []string{`OBOL_HTTP "192.0.2.1:7070": not a loopback`}},
		{name: "http not host:port", args: []string{"--socket", sock, "--http", "7070"}, want: []string{`--http "7070": want host:port`}},
		{name: "http port out of range", args: []string{"--socket", sock, "--http", "127.0.0.1:70000"}, want: []string{`--http "127.0.0.1:70000": port "70000"`}},
		{name: "socket path too long", args: []string{"--socket", "/" + strings.Repeat("s", 200)}, want: []string{"--socket", "want at most"}},
		{name: "bad drain timeout", args: []string{"--socket", sock, "--drain-timeout", "soon"}, want: []string{`--drain-timeout "soon"`}},
		{name: "negative drain timeout from env", args: []string{"--socket", sock}, env: map[string]string{"OBOL_DRAIN_TIMEOUT": "-1s"}, want: []string{`OBOL_DRAIN_TIMEOUT "-1s"`}},
		{name: "bad OBOL_HTTP_PUBLIC", args: []string{"--socket", sock}, env: map[string]string{"OBOL_HTTP_PUBLIC": "maybe"}, want: []string{`OBOL_HTTP_PUBLIC "maybe": want true or false`}},
		{name: "bad --log-level", args: []string{"--log-level", "loud"}, want: []string{`--log-level "loud": want debug, info, warn or error`}},
		{name: "bad OBOL_LOG_LEVEL", env: map[string]string{"OBOL_LOG_LEVEL": "verbose"}, want: []string{`OBOL_LOG_LEVEL "verbose"`}},
		{name: "gossip bind by name", args: []string{"--gossip-bind", "localhost:7946", "--node-name", "n"}, want: []string{`--gossip-bind "localhost:7946": host "localhost" is not an IP address`}},
		{name: "bad sync interval", args: []string{"--join", "127.0.0.1:1", "--node-name", "n", "--sync-interval", "often"}, want: []string{`--sync-interval "often"`}},
		{name: "missing gossip secret file", args: []string{"--gossip-bind", "127.0.0.1:0", "--node-name", "n", "--gossip-secret-file", filepath.Join(dir, "no.key")},
			want: []string{`--gossip-secret-file "` + filepath.Join(dir, "no.key") + `"`}},
		{name: "bad gossip secret", args: []string{"--gossip-bind", "127.0.0.1:0", "--node-name", "n"}, env: map[string]string{"OBOL_GOSSIP_SECRET_FILE": file("short.key", "abc\n")},
			want: []string{"OBOL_GOSSIP_SECRET_FILE", "want 16, 24 or 32 bytes"}},
		{name: "every problem at once", args: []string{"--log-level", "loud", "--drain-timeout", "soon", "--socket", "off", "--http", "off"},
			want: []string{"--log-level", "--drain-timeout", "at least one listener"}},
		{name: "--check-config with --config", args: []string{"--check-config", bothOff, "--config", bothOff}, want: []string{"--check-config and --config"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, envOf(tc.env), &stdout, &stderr)
			if code := exitCode(err); code != 2 {
				t.Errorf("exit code %d (%v), want 2", code, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), `"msg"`) {
				t.Errorf("a bad input got as far as logging:\n%s", stderr.String())
			}
			if _, err := os.Lstat(sock); err == nil {
				t.Errorf("a socket was bound")
			}
		})
	}
}

// TestRunRuntimeFailure: a listener that cannot be bound exits 1.
func TestRunRuntimeFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stderr bytes.Buffer
	err = run(context.Background(), []string{"--socket", "off", "--http", ln.Addr().String()}, noEnv, io.Discard, &stderr)
	if code := exitCode(err); code != 1 {
		t.Fatalf("exit code %d (%v), want 1", code, err)
	}
	if !strings.Contains(stderr.String(), "obol agent cannot listen") || !strings.Contains(stderr.String(), ln.Addr().String()) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

func TestCheckHTTPName(t *testing.T) {
	lookup := func(host string) ([]net.IP, error) {
		switch host {
		case "me.internal":
			return []net.IP{net.ParseIP("127.0.0.2")}, nil
		case "pod.internal":
			return []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.1.2.3")}, nil
		}
		return nil, errors.New("no such host")
	}
	from := value{from: "--http"}
	cases := []struct {
		name string
		st   settings
		err  string
	}{
		{name: "loopback name", st: settings{http: "me.internal:7070"}},
		{name: "literal left to checkHTTP", st: settings{http: "10.0.0.1:7070"}},
		{name: "localhost", st: settings{http: "localhost:7070"}},
		{name: "off", st: settings{}},
		{name: "public allowed", st: settings{http: "pod.internal:7070", httpPublic: true}},
		{name: "resolves off loopback", st: settings{http: "pod.internal:7070"}, err: `--http "pod.internal:7070": pod.internal resolves to 10.1.2.3, not a loopback address`},
		{name: "does not resolve", st: settings{http: "nowhere.internal:7070"}, err: `--http "nowhere.internal:7070": cannot resolve nowhere.internal`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.st.httpFrom = value{tc.st.http, from.from}
			err := checkHTTPName(tc.st, lookup)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
		})
	}
}

// TestRunListenerOff: with one listener off the agent serves on the other.
func TestRunListenerOff(t *testing.T) {
	t.Run("socket off", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		stderr := &syncBuffer{}
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"--socket", "off", "--http", "127.0.0.1:0"}, noEnv, io.Discard, stderr)
		}()
		m := stderr.WaitJSON(t, 10*time.Second, "obol agent started")
		addr, _ := m["http"].(string)
		if m["socket"] != "off" {
			t.Errorf("start line %v, want socket off", m)
		}
		// The start line comes just before the server marks itself ready.
		waitFor(t, 10*time.Second, "readyz 200 over TCP", func() bool {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("http off from the config file", func(t *testing.T) {
		dir := tempDir(t)
		sock := filepath.Join(dir, "obol.sock")
		cfg := filepath.Join(dir, "obol.yaml")
		if err := os.WriteFile(cfg, []byte("agent: {http: off}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		a := startAgent(t, []string{"--config", cfg, "--socket", sock}, noEnv, sock)
		started := logLines(t, a.stderr.String())[0]
		if started["http"] != "off" || started["socket"] != sock {
			t.Errorf("start line %v", started)
		}
		if err := a.stop(t); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRunLogLevel: --log-level drops the records below it; OBOL_LOG_LEVEL
// works the same, and the flag wins.
func TestRunLogLevel(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		lines int // log lines of a start and a stop
	}{
		{name: "default info", lines: 2},
		{name: "warn drops info", args: []string{"--log-level", "warn"}, lines: 0},
		{name: "env error", env: map[string]string{"OBOL_LOG_LEVEL": "ERROR"}, lines: 0},
		{name: "flag over env", args: []string{"--log-level", "debug"}, env: map[string]string{"OBOL_LOG_LEVEL": "error"}, lines: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(tempDir(t), "obol.sock")
			a := startAgent(t, append([]string{"--socket", sock, "--http", "127.0.0.1:0"}, tc.args...), envOf(tc.env), sock)
			if err := a.stop(t); err != nil {
				t.Fatal(err)
			}
			out := strings.TrimSpace(a.stderr.String())
			n := 0
			if out != "" {
				n = len(logLines(t, out))
			}
			if n != tc.lines {
				t.Errorf("%d log lines, want %d:\n%s", n, tc.lines, out)
			}
		})
	}
}

// TestRunCheckConfig: --check-config prints every problem and exits 2, or a
// summary and exits 0, and never serves.
func TestRunCheckConfig(t *testing.T) {
	dir := tempDir(t)
	sock := filepath.Join(dir, "never.sock")
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.yaml", "agent: {socket: "+sock+", http: off}\nresources:\n  a/t: {kind: tiers, tiers: \"5,1,1,0\"}\n  a/g: {kind: gcra, burst: 1, count: 1, period: 1s}\n  a/h: {kind: gcra, burst: 1, count: 1, period: 1s}\n")
	// Every kind is counted: the pacer was once left out of the summary.
	every := file("every.yaml", "agent: {socket: "+sock+", http: off}\nresources:\n  a/t: {kind: tiers, tiers: \"5,1,1,0\"}\n  a/g: {kind: gcra, burst: 1, count: 1, period: 1s}\n  a/c: {kind: copies, global_limit: 3}\n  a/a: {kind: adaptive, min_window: 1, max_window: 4}\n  a/p: {kind: pacer, quota: 100, period: 1h}\n")
	bad := file("bad.yaml", "agent: {http: \"0.0.0.0:1\", socket: \"\"}\nresources:\n  a/g: {kind: gcra, burst: 0, count: 1, period: 1s}\n  a/x: {kind: nonsense}\n")
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stdout []string
		stderr []string
	}{
		{name: "good", args: []string{"--check-config", good}, code: 0,
			stdout: []string{good + " is valid: 3 resources (tiers 1, gcra 2), 0 namespaces; socket " + sock + ", http off; gossip off"}},
		{name: "every kind", args: []string{"--check-config", every}, code: 0,
			stdout: []string{every + " is valid: 5 resources (tiers 1, gcra 1, copies 1, adaptive 1, pacer 1)"}},
		{name: "good, over OBOL_CONFIG", args: []string{"--check-config", good}, env: map[string]string{"OBOL_CONFIG": bad}, code: 0,
			stdout: []string{good + " is valid"}},
		{name: "good with gossip", args: []string{"--check-config", good, "--gossip-bind", "127.0.0.1:7946", "--join", "127.0.0.1:7947", "--node-name", "n1"}, code: 0,
			stdout: []string{"gossip on 127.0.0.1:7946 as n1, joining 127.0.0.1:7947, not encrypted"}},
		{name: "gossip off loopback without a key", args: []string{"--check-config", good, "--gossip-bind", "0.0.0.0:7946", "--join", "127.0.0.1:7947"}, code: 2,
			stderr: []string{`--gossip-bind "0.0.0.0:7946": gossip reachable from other hosts needs a key`}},
		{name: "public HTTP without a token", args: []string{"--check-config", good, "--http", "0.0.0.0:1", "--http-public"}, code: 2,
			stderr: []string{`--http "0.0.0.0:1" with --http-public: a listener reachable from the network needs --auth-token-file`}},
		{name: "bad file: every problem", args: []string{"--check-config", bad}, code: 2,
			stderr: []string{"agent.socket: must not be empty", "burst", "nonsense"}},
		{name: "good file, bad flags", args: []string{"--check-config", good, "--http", "0.0.0.0:1", "--log-level", "loud"}, code: 2,
			stderr: []string{`--http "0.0.0.0:1": not a loopback address`, `--log-level "loud"`}},
		{name: "bad file and bad env", args: []string{"--check-config", bad}, env: map[string]string{"OBOL_DRAIN_TIMEOUT": "soon"}, code: 2,
			stderr: []string{"nonsense", `OBOL_DRAIN_TIMEOUT "soon"`}},
		{name: "missing file", args: []string{"--check-config", filepath.Join(dir, "none.yaml")}, code: 2,
			stderr: []string{"none.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, envOf(tc.env), &stdout, &stderr)
			if code := exitCode(err); code != tc.code {
				t.Errorf("exit code %d (%v), want %d; stderr:\n%s", code, err, tc.code, stderr.String())
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout does not say %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr.String())
				}
			}
			if tc.code == 0 && stderr.Len() > 0 {
				t.Errorf("a good check wrote to stderr:\n%s", stderr.String())
			}
			if _, err := os.Lstat(sock); err == nil {
				t.Errorf("--check-config bound the socket")
			}
		})
	}
}

func TestRunVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, noEnv, &stdout, &stderr); err != nil {
		t.Fatalf("--version: %v", err)
	}
	out := stdout.String()
	for _, w := range []string{"obol agent ", "module:   github.com/obol-dev/obol", "revision: ", "modified: ", "go:       go"} {
		if !strings.Contains(out, w) {
			t.Errorf("--version lacks %q:\n%s", w, out)
		}
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
}

func TestVersionText(t *testing.T) {
	full := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/obol-dev/obol", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2030-01-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	cases := []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		ok      bool
		want    string
	}{
		{name: "full", bi: full, ok: true, want: "obol agent v1.2.3\nmodule:   github.com/obol-dev/obol\nrevision: abc123\ntime:     2030-01-01T00:00:00Z\nmodified: true\ngo:       go1.26.0\n"},
		{name: "no vcs", bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/obol-dev/obol", Version: "(devel)"}}, ok: true,
			want: "obol agent (devel)\nmodule:   github.com/obol-dev/obol\nrevision: unknown\ntime:     unknown\nmodified: unknown\ngo:       go1.26.0\n"},
		{name: "no build info", ok: false, want: "obol agent: no build information in this binary\n"},
		{name: "stamped", stamped: "v0.5.0-3-gabc123", bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/obol-dev/obol", Version: "(devel)"}}, ok: true,
			want: "obol agent v0.5.0-3-gabc123\nmodule:   github.com/obol-dev/obol\nrevision: unknown\ntime:     unknown\nmodified: unknown\ngo:       go1.26.0\n"},
		{name: "stamped, no build info", stamped: "v0.5.0", ok: false, want: "obol agent v0.5.0\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionText(tc.stamped, tc.bi, tc.ok); got != tc.want {
				t.Errorf("versionText =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, noEnv, &stdout, &stderr); err != nil {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"--config", "-http-public", "OBOL_SOCKET"} {
		if !strings.Contains(stdout.String(), strings.TrimLeft(want, "-")) {
			t.Errorf("usage lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestResolve(t *testing.T) {
	file := &config.Config{Agent: config.Agent{Socket: "/cfg.sock", HTTP: "127.0.0.1:3"}}
	none := &config.Config{}
	type want struct {
		socket, http string
		public       bool
		drain        time.Duration
		level        slog.Level
	}
	defaultSock := sock.DefaultPath(func(string) string { return "" }) // no XDG_RUNTIME_DIR
	cases := []struct {
		name string
		f    flags
		e    env
		cfg  *config.Config
		want want
	}{
		{"defaults with XDG", flags{}, env{runtimeDir: "/run/user/7"}, none, want{socket: "/run/user/7/obol.sock", http: "127.0.0.1:7070"}},
		{"defaults without XDG", flags{}, env{}, none, want{socket: defaultSock, http: "127.0.0.1:7070"}},
		{"config file over defaults", flags{}, env{runtimeDir: "/x"}, file, want{socket: "/cfg.sock", http: "127.0.0.1:3"}},
		{"env over config file", flags{}, env{socket: "/env.sock", http: "127.0.0.1:2"}, file, want{socket: "/env.sock", http: "127.0.0.1:2"}},
		{"flags over env", flags{socket: "/flag.sock", http: "127.0.0.1:1"}, env{socket: "/env.sock", http: "127.0.0.1:2"}, file, want{socket: "/flag.sock", http: "127.0.0.1:1"}},
		{"socket off", flags{socket: "off"}, env{}, file, want{http: "127.0.0.1:3"}},
		{"http off from env", flags{}, env{http: "off"}, file, want{socket: "/cfg.sock"}},
		{"http off in the file, on by flag", flags{http: "127.0.0.1:4"}, env{}, &config.Config{Agent: config.Agent{HTTP: "off"}}, want{socket: defaultSock, http: "127.0.0.1:4"}},
		{"public from env", flags{}, env{httpPublic: "true", http: "0.0.0.0:1", authTokenFile: "/t"}, none, want{socket: defaultSock, http: "0.0.0.0:1", public: true}},
		{"public flag over env", flags{httpPublic: false, set: map[string]bool{"http-public": true}}, env{httpPublic: "true"}, none, want{socket: defaultSock, http: "127.0.0.1:7070"}},
		{"drain from env", flags{}, env{drain: "2s"}, none, want{socket: defaultSock, http: "127.0.0.1:7070", drain: 2 * time.Second}},
		{"drain flag over env", flags{drain: "250ms"}, env{drain: "2s"}, none, want{socket: defaultSock, http: "127.0.0.1:7070", drain: 250 * time.Millisecond}},
		{"log level from env", flags{}, env{logLevel: "Warn"}, none, want{socket: defaultSock, http: "127.0.0.1:7070", level: slog.LevelWarn}},
		{"log level flag over env", flags{logLevel: "debug"}, env{logLevel: "error"}, none, want{socket: defaultSock, http: "127.0.0.1:7070", level: slog.LevelDebug}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want.drain == 0 {
				tc.want.drain = defaultDrain
			}
			got, err := resolve(tc.f, tc.e, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got.cluster.enabled {
				t.Errorf("the cluster is on with no gossip setting")
			}
			g := want{socket: got.socket, http: got.http, public: got.httpPublic, drain: got.drain, level: got.logLevel}
			if g != tc.want {
				t.Errorf("resolve = %+v, want %+v", g, tc.want)
			}
		})
	}
	if got := configPath(flags{config: "/f.yaml"}, env{config: "/e.yaml"}); got != (value{"/f.yaml", "--config"}) {
		t.Errorf("configPath: flag should win, got %q", got)
	}
	if got := configPath(flags{}, env{config: "/e.yaml"}); got != (value{"/e.yaml", "OBOL_CONFIG"}) {
		t.Errorf("configPath from env: %q", got)
	}
	if got := configPath(flags{checkConfig: "/c.yaml"}, env{config: "/e.yaml"}); got != (value{"/c.yaml", "--check-config"}) {
		t.Errorf("configPath with --check-config: %q", got)
	}
}

func TestStepLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		stepLoop(ctx, time.Millisecond, func() time.Time { return at }, func(t time.Time) {
			select {
			case steps <- t:
			case <-ctx.Done():
			}
		})
	}()
	for range 2 {
		if got := <-steps; !got.Equal(at) {
			t.Errorf("step at %v, want the clock's %v", got, at)
		}
	}
	cancel()
	<-done
}

// TestRunStopsCleanlyOnASignal: main's signal.NotifyContext cancels with a
// cause naming the signal; that is a clean stop (exit 0), not an error.
func TestRunStopsCleanlyOnASignal(t *testing.T) {
	sock := filepath.Join(tempDir(t), "obol.sock")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--socket", sock, "--http", "off"}, noEnv, io.Discard, stderr) }()
	waitFor(t, 10*time.Second, "the agent to serve", func() bool {
		resp, err := unixClient(sock).Get("http://obol/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	cancel(errors.New("terminated signal received"))
	select {
	case err := <-done:
		if code := exitCode(err); err != nil || code != 0 {
			t.Fatalf("run on a signal: %v (exit %d); stderr:\n%s", err, code, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after the signal")
	}
	if lines := logLines(t, stderr.String()); lines[len(lines)-1]["msg"] != "obol agent stopped" {
		t.Errorf("last log line %v, want the clean stop", lines[len(lines)-1])
	}
}
