package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// TestRunStatusListener: --status-http serves the probes and the metrics on
// an address of its own, without the token the API asks for, and nothing
// else.
func TestRunStatusListener(t *testing.T) {
	dir := tempDir(t)
	sock := filepath.Join(dir, "s.sock")
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, []string{"--socket", sock, "--http", "off", "--status-http", "127.0.0.1:0",
		"--auth-token-file", token, "--auth-everywhere"}, noEnv, sock)
	var addr string
	for _, l := range logLines(t, a.stderr.String()) {
		if l["msg"] == "obol agent started" {
			addr, _ = l["status_http"].(string)
		}
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("no status_http address in the start line:\n%s", a.stderr)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(p); code != 200 {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "obol_decisions_total{") {
		t.Errorf("/metrics: %d %.300s", code, body)
	}
	if code, _ := get("/v1/config"); code != 404 {
		t.Errorf("/v1/config on the status listener: %d, want 404", code)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestResolveStatusAndWatch: --status-http and --watch-config, from flags
// and the environment, and their bad values.
func TestResolveStatusAndWatch(t *testing.T) {
	cases := []struct {
		name   string
		f      flags
		e      env
		status string
		watch  bool
		bad    string
	}{
		{name: "defaults", watch: true},
		{name: "status from the flag", f: flags{statusHTTP: ":7071"}, status: ":7071", watch: true},
		{name: "status from env", e: env{statusHTTP: "10.1.2.3:7071"}, status: "10.1.2.3:7071", watch: true},
		{name: "status off", f: flags{statusHTTP: "off"}, e: env{statusHTTP: ":1"}, watch: true},
		{name: "status not host:port", f: flags{statusHTTP: "7071"}, bad: `--status-http "7071": want host:port`},
		{name: "status port from env", e: env{statusHTTP: ":http"}, bad: `OBOL_STATUS_HTTP ":http": port "http"`},
		{name: "watch off by env", e: env{watchConfig: "false"}, watch: false},
		{name: "watch flag over env", f: flags{watchConfig: true, set: map[string]bool{"watch-config": true}}, e: env{watchConfig: "false"}, watch: true},
		{name: "watch off by flag", f: flags{watchConfig: false, set: map[string]bool{"watch-config": true}}, watch: false},
		{name: "bad OBOL_WATCH_CONFIG", e: env{watchConfig: "sometimes"}, bad: `OBOL_WATCH_CONFIG "sometimes": want true or false`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			if f.set == nil {
				f.set = map[string]bool{}
			}
			s, err := resolve(f, tc.e, &config.Config{})
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("resolve: %v, want %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.status != tc.status || s.watchConfig != tc.watch {
				t.Errorf("status %q, watch %v; want %q, %v", s.status, s.watchConfig, tc.status, tc.watch)
			}
		})
	}
	// The flag as parsed: --watch-config=false.
	f, err := parseFlags([]string{"--watch-config=false"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := resolve(f, env{watchConfig: "true"}, &config.Config{}); err != nil || s.watchConfig {
		t.Errorf("--watch-config=false: watch %v (%v), want off", s.watchConfig, err)
	}
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"--status-http", "nope"}, noEnv, io.Discard, &stderr); exitCode(err) != 2 || !strings.Contains(stderr.String(), `--status-http "nope"`) {
		t.Errorf("run --status-http nope: %v\n%s", err, stderr.String())
	}
}
