package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunReloadsOnSIGHUP: SIGHUP re-reads the config file; the counts of an
// unchanged kind survive; a bad file is refused and logged, and the config in
// force stays.
func TestRunReloadsOnSIGHUP(t *testing.T) {
	dir := tempDir(t)
	file := filepath.Join(dir, "obol.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("resources:\n  a/b: {kind: gcra, burst: 3, count: 1, period: 1h}\n")
	sock := filepath.Join(dir, "s.sock")
	a := startAgent(t, []string{"--config", file, "--socket", sock, "--http", "127.0.0.1:0"}, noEnv, sock)
	c := unixClient(sock)
	post := func(body string) map[string]any {
		t.Helper()
		resp, err := c.Post("http://obol/v1/request", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	version := func() float64 {
		resp, err := c.Get("http://obol/v1/config")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		v, _ := m["version"].(float64)
		return v
	}
	// A reload is logged once the new config is in force.
	waitVersion := func(want float64) {
		t.Helper()
		if line := a.stderr.WaitJSON(t, 10*time.Second, "config reloaded"); line["version"] != want {
			t.Fatalf("reload logged as version %v, want %v", line["version"], want)
		}
		if v := version(); v != want {
			t.Fatalf("config version %v, want %v; stderr:\n%s", v, want, a.stderr)
		}
	}
	if m := post(`{"resource":"a/b","domain":"d","copies":3}`); m["granted"] != 3.0 {
		t.Fatalf("setup: %v", m)
	}
	write("resources:\n  a/b: {kind: gcra, burst: 4, count: 1, period: 1h}\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitVersion(2)
	if m := post(`{"resource":"a/b","domain":"d","copies":2,"min_copies":1}`); m["granted"] != 1.0 {
		t.Fatalf("after reload: %v, want 1 granted (3 of a bigger bucket of 4 still spent)", m)
	}
	write("resources:\n  a/b: {kind: gcra, burst: 0}\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	a.stderr.Wait(t, 10*time.Second, "config reload refused")
	if v := version(); v != 2 {
		t.Fatalf("a refused reload changed the version to %v", v)
	}
	if err := a.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, l := range logLines(t, a.stderr.String()) {
		if l["msg"] == "obol agent stopped" {
			return
		}
	}
	t.Fatalf("no stop line logged:\n%s", a.stderr)
}
