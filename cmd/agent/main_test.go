package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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
	client := unixClient(socket)
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case err := <-a.done:
			t.Fatalf("run returned early: %v; stderr:\n%s", err, a.stderr)
		default:
		}
		if resp, err := client.Get("http://obol/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never got ready; stderr:\n%s", a.stderr)
		}
		time.Sleep(5 * time.Millisecond)
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

func TestRunUsageErrors(t *testing.T) {
	dir := tempDir(t)
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stderr string
	}{
		{"missing config file", []string{"--config", filepath.Join(dir, "none.yaml")}, nil, 2, "none.yaml"},
		{"missing config file from env", nil, map[string]string{"OBOL_CONFIG": filepath.Join(dir, "env.yaml")}, 2, "env.yaml"},
		{"unknown flag", []string{"--colour"}, nil, 2, "colour"},
		{"stray argument", []string{"serve"}, nil, 2, "serve"},
		{"bad drain timeout", []string{"--socket", filepath.Join(dir, "d.sock"), "--drain-timeout", "soon"}, nil, 2, "drain-timeout"},
		{"bad OBOL_HTTP_PUBLIC", []string{"--socket", filepath.Join(dir, "s.sock")}, map[string]string{"OBOL_HTTP_PUBLIC": "maybe"}, 2, "OBOL_HTTP_PUBLIC"},
		{"public address", []string{"--socket", filepath.Join(dir, "p.sock"), "--http", "0.0.0.0:0"}, nil, 1, "0.0.0.0:0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := run(context.Background(), tc.args, envOf(tc.env), io.Discard, &stderr)
			if code := exitCode(err); code != tc.code {
				t.Errorf("exit code %d (%v), want %d", code, err, tc.code)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr does not name %q:\n%s", tc.stderr, stderr.String())
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
	cases := []struct {
		name string
		f    flags
		e    env
		cfg  *config.Config
		want settings
	}{
		{"defaults with XDG", flags{}, env{runtimeDir: "/run/user/7"}, none, settings{socket: "/run/user/7/obol.sock", http: "127.0.0.1:7070"}},
		{"defaults without XDG", flags{}, env{}, none, settings{socket: "/tmp/obol.sock", http: "127.0.0.1:7070"}},
		{"config file over defaults", flags{}, env{runtimeDir: "/x"}, file, settings{socket: "/cfg.sock", http: "127.0.0.1:3"}},
		{"env over config file", flags{}, env{socket: "/env.sock", http: "127.0.0.1:2"}, file, settings{socket: "/env.sock", http: "127.0.0.1:2"}},
		{"flags over env", flags{socket: "/flag.sock", http: "127.0.0.1:1"}, env{socket: "/env.sock", http: "127.0.0.1:2"}, file, settings{socket: "/flag.sock", http: "127.0.0.1:1"}},
		{"public from env", flags{}, env{httpPublic: "true"}, none, settings{socket: "/tmp/obol.sock", http: "127.0.0.1:7070", httpPublic: true}},
		{"public flag over env", flags{httpPublic: false, httpPublicSet: true}, env{httpPublic: "true"}, none, settings{socket: "/tmp/obol.sock", http: "127.0.0.1:7070"}},
		{"drain from env", flags{}, env{drain: "2s"}, none, settings{socket: "/tmp/obol.sock", http: "127.0.0.1:7070", drain: 2 * time.Second}},
		{"drain flag over env", flags{drain: "250ms"}, env{drain: "2s"}, none, settings{socket: "/tmp/obol.sock", http: "127.0.0.1:7070", drain: 250 * time.Millisecond}},
	}
	for _, tc := range cases {
		if tc.want.drain == 0 {
			tc.want.drain = defaultDrain
		}
		got, err := resolve(tc.f, tc.e, tc.cfg)
		if got.cluster.enabled {
			t.Errorf("%s: the cluster is on with no gossip setting", tc.name)
		}
		got.cluster, tc.want.cluster = clusterSettings{}, clusterSettings{}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: resolve = %+v, %v, want %+v", tc.name, got, err, tc.want)
		}
	}
	if got := configPath(flags{config: "/f.yaml"}, env{config: "/e.yaml"}); got != "/f.yaml" {
		t.Errorf("configPath: flag should win, got %q", got)
	}
	if got := configPath(flags{}, env{config: "/e.yaml"}); got != "/e.yaml" {
		t.Errorf("configPath from env: %q", got)
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
