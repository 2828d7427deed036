package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/obol-dev/obol/config"
)

// runCmd runs the binary's command line args with the environment env and
// returns its exit status and output.
func runCmd(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	err := run(context.Background(), args, envOf(env), &out, &errw)
	return exitCode(err), out.String(), errw.String()
}

// TestCommandUsage: help, and every bad use of a command, exit as
// documented (0 for help, 2 for bad usage) with a message naming the value
// and what was expected, before anything is asked of an agent; flags alone
// never name a command.
func TestCommandUsage(t *testing.T) {
	dir := tempDir(t)
	nowhere := filepath.Join(dir, "none.sock") // no agent: a command that got this far would exit 3
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stdout []string // each must appear on stdout
		stderr []string // each must appear on stderr
	}{
		{name: "help", args: []string{"help"}, stdout: []string{"status", "top RESOURCE", "peers", "check RESOURCE DOMAIN", "reload", "config", "Exit status", "3 the agent could not be\nreached"}},
		{name: "help of a command", args: []string{"help", "check"}, stdout: []string{"Usage: agent check RESOURCE DOMAIN [flags]", "peek", "-copies", "spends nothing"}},
		{name: "-h of a command", args: []string{"top", "-h"}, stdout: []string{"Usage: agent top RESOURCE", "-by", "-json"}},
		{name: "-h after the arguments", args: []string{"check", "r", "d", "--help"}, stdout: []string{"Usage: agent check"}},
		{name: "help -h", args: []string{"help", "-h"}, stdout: []string{"Commands:", "help [COMMAND]"}},
		{name: "help of no command", args: []string{"help", "nope"}, code: 2, stderr: []string{"help nope", "status, top"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`, "agent help"}},
		{name: "empty command", args: []string{""}, code: 2, stderr: []string{`unknown command ""`}},
		{name: "top without a resource", args: []string{"top", "--socket", nowhere}, code: 2, stderr: []string{"top: missing RESOURCE", "usage: agent top RESOURCE"}},
		{name: "check without a domain", args: []string{"check", "demo/search"}, code: 2, stderr: []string{"check: missing DOMAIN"}},
		{name: "check with neither", args: []string{"check"}, code: 2, stderr: []string{"missing RESOURCE and DOMAIN"}},
		{name: "an argument too many", args: []string{"check", "r", "d", "e"}, code: 2, stderr: []string{`unexpected argument "e"; it takes the arguments RESOURCE DOMAIN`}},
		{name: "status takes none", args: []string{"status", "now"}, code: 2, stderr: []string{`unexpected argument "now"; it takes no arguments`}},
		{name: "empty resource", args: []string{"top", ""}, code: 2, stderr: []string{"RESOURCE is empty"}},
		{name: "bad --by", args: []string{"top", "r", "--by", "worst"}, code: 2, stderr: []string{`--by "worst": want rejected or granted`}},
		{name: "bad -n", args: []string{"top", "r", "-n", "0"}, code: 2, stderr: []string{"-n 0: want a number of domains ≥ 1"}},
		{name: "-n not a number", args: []string{"top", "r", "-n", "many"}, code: 2, stderr: []string{`invalid value "many" for flag -n`}},
		{name: "negative copies", args: []string{"check", "r", "d", "--copies", "-1"}, code: 2, stderr: []string{"--copies -1: want 0 (a peek, the default) or more"}},
		{name: "zero timeout", args: []string{"status", "--timeout", "0s"}, code: 2, stderr: []string{`--timeout "0s": want a positive duration`}},
		{name: "unknown flag", args: []string{"peers", "--colour"}, code: 2, stderr: []string{"flag provided but not defined: -colour"}},
		{name: "empty --socket", args: []string{"status", "--socket="}, code: 2, stderr: []string{`--socket "": empty`}},
		{name: "socket and http", args: []string{"status", "--socket", nowhere, "--http", "127.0.0.1:7070"}, code: 2, stderr: []string{"give one"}},
		{name: "socket off", args: []string{"status", "--socket", "off"}, code: 2, stderr: []string{`"off" names neither`}},
		{name: "http port 0", args: []string{"status", "--http", "127.0.0.1:0"}, code: 2, stderr: []string{`--http "127.0.0.1:0": port "0"`, "start line"}},
		{name: "http not host:port", args: []string{"status", "--http", "7070"}, code: 2, stderr: []string{`--http "7070": want host:port`}},
		{name: "OBOL_HTTP port 0 with the socket off", args: []string{"peers"}, env: map[string]string{"OBOL_SOCKET": "off", "OBOL_HTTP": "127.0.0.1:0"}, code: 2, stderr: []string{`OBOL_HTTP "127.0.0.1:0"`}},
		{name: "both listeners off", args: []string{"peers"}, env: map[string]string{"OBOL_SOCKET": "off", "OBOL_HTTP": "off"}, code: 2, stderr: []string{`OBOL_SOCKET "off" and OBOL_HTTP "off": the agent serves neither`}},
		{name: "socket path too long", args: []string{"status", "--socket", "/" + strings.Repeat("s", 200)}, code: 2, stderr: []string{"--socket", "201 bytes, want at most"}},
		{name: "missing token file", args: []string{"status", "--socket", nowhere, "--auth-token-file", filepath.Join(dir, "token")}, code: 2, stderr: []string{`--auth-token-file "` + filepath.Join(dir, "token") + `"`}},
		{name: "missing token file from env", args: []string{"status", "--socket", nowhere}, env: map[string]string{"OBOL_AUTH_TOKEN_FILE": filepath.Join(dir, "t2")}, code: 2, stderr: []string{`OBOL_AUTH_TOKEN_FILE "`}},
		// Flags alone run the agent: a flag's value is never a command.
		{name: "a flag's value named like a command", args: []string{"--log-level", "status", "--socket", nowhere}, code: 2, stderr: []string{`--log-level "status": want debug, info, warn or error`}},
		{name: "a command after flags", args: []string{"--log-level", "info", "status"}, code: 2, stderr: []string{`unexpected argument "status": a command comes first (agent status [flags])`}},
		{name: "agent -h", args: []string{"-h"}, stdout: []string{"Usage: agent [flags]", "agent COMMAND [arguments] [flags]", "agent help lists them", "-http-public"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tc.env, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tc.code != 0 && stdout != "" {
				t.Errorf("bad usage printed on stdout:\n%s", stdout)
			}
			if tc.code == 0 && stderr != "" {
				t.Errorf("stderr:\n%s", stderr)
			}
			if strings.Contains(stderr, "cannot reach") || strings.Contains(stderr, `"msg"`) {
				t.Errorf("bad usage got as far as dialing or serving:\n%s", stderr)
			}
		})
	}
}

// TestCommandTarget: a command finds the agent by the agent's own rule:
// --socket, OBOL_SOCKET, the config file's agent.socket, the default; with
// the socket off, the HTTP listener by the same order.
func TestCommandTarget(t *testing.T) {
	dir := tempDir(t)
	cfgFile := filepath.Join(dir, "obol.yaml")
	if err := os.WriteFile(cfgFile, []byte("agent: {socket: /cfg/obol.sock, http: 127.0.0.1:7171}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	offFile := filepath.Join(dir, "off.yaml")
	if err := os.WriteFile(offFile, []byte("agent: {socket: off, http: 127.0.0.2:7272}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		o          cmdOptions
		e          env
		network    string
		dial, host string
		from       string
		warn       string // on stderr
	}{
		{name: "the default, with XDG", e: env{runtimeDir: "/run/user/7"}, network: "unix", dial: "/run/user/7/obol.sock", from: "the default socket"},
		{name: "OBOL_SOCKET", e: env{socket: "/env.sock", runtimeDir: "/x"}, network: "unix", dial: "/env.sock", from: "OBOL_SOCKET"},
		{name: "--socket over OBOL_SOCKET", o: cmdOptions{socket: "/flag.sock"}, e: env{socket: "/env.sock"}, network: "unix", dial: "/flag.sock", from: "--socket"},
		{name: "the config file's socket", e: env{config: cfgFile, runtimeDir: "/x"}, network: "unix", dial: "/cfg/obol.sock", from: "config agent.socket"},
		{name: "--config over OBOL_CONFIG", o: cmdOptions{config: cfgFile}, e: env{config: offFile}, network: "unix", dial: "/cfg/obol.sock", from: "config agent.socket"},
		{name: "OBOL_SOCKET over the config file", e: env{socket: "/env.sock", config: cfgFile}, network: "unix", dial: "/env.sock", from: "OBOL_SOCKET"},
		{name: "socket off: the default HTTP", e: env{socket: "off"}, network: "tcp", dial: "127.0.0.1:7070", host: "127.0.0.1:7070", from: "the default --http"},
		{name: "socket off: OBOL_HTTP", e: env{socket: "off", http: "[::1]:7071"}, network: "tcp", dial: "[::1]:7071", host: "[::1]:7071", from: "OBOL_HTTP"},
		{name: "socket off: the config file's http", e: env{socket: "off", config: cfgFile}, network: "tcp", dial: "127.0.0.1:7171", host: "127.0.0.1:7171", from: "config agent.http"},
		{name: "socket off in the config file", e: env{config: offFile}, network: "tcp", dial: "127.0.0.2:7272", host: "127.0.0.2:7272", from: "config agent.http"},
		{name: "--http", o: cmdOptions{http: "127.0.0.1:9"}, e: env{socket: "/env.sock"}, network: "tcp", dial: "127.0.0.1:9", host: "127.0.0.1:9", from: "--http"},
		{name: "--http with no host", o: cmdOptions{http: ":7070"}, network: "tcp", dial: ":7070", host: "localhost:7070", from: "--http"},
		{name: "an unreadable config file", e: env{config: filepath.Join(dir, "none.yaml"), runtimeDir: "/run/user/8"}, network: "unix", dial: "/run/user/8/obol.sock", from: "the default socket",
			warn: `OBOL_CONFIG "` + filepath.Join(dir, "none.yaml") + `": cannot read agent.socket and agent.http from it`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, err := tc.o.target(tc.e, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			host := tc.host
			if host == "" {
				host = "localhost"
			}
			if got.network != tc.network || got.dial != tc.dial || got.host != host || got.from.from != tc.from {
				t.Errorf("target %+v, want %s %s (Host %s) from %s", got, tc.network, tc.dial, host, tc.from)
			}
			if tc.warn == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tc.warn) {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.warn)
			}
		})
	}
}

// e2eConfig is the end-to-end test's config file: a gcra resource of 2,
// the default's blocked domain, and an adaptive resource (no domains).
const e2eConfig = `
resources:
  e2e/bucket: {kind: gcra, burst: 2, count: 1, period: 1h}
  e2e/tiers:
    kind: tiers
    tiers: "5,1,1,0"
    domains:
      blocked: {tiers: "5,1,1,0", hard_limit: 0}
  e2e/window: {kind: adaptive, min_window: 1, max_window: 5}
`

// TestCommandsEndToEnd runs every command against an agent in this
// process, on its socket and its HTTP listener, and checks what each
// prints and its exit status, down to an agent that is gone.
func TestCommandsEndToEnd(t *testing.T) {
	dir := tempDir(t)
	sock := filepath.Join(dir, "obol.sock")
	cfgFile := filepath.Join(dir, "obol.yaml")
	if err := os.WriteFile(cfgFile, []byte(e2eConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, []string{"--config", cfgFile, "--watch-config=false", "--socket", sock, "--http", "127.0.0.1:0"}, noEnv, sock)
	var httpAddr string
	for _, l := range logLines(t, a.stderr.String()) {
		if l["msg"] == "obol agent started" {
			httpAddr, _ = l["http"].(string)
		}
	}
	env := map[string]string{"OBOL_SOCKET": sock}
	cmd := func(args ...string) (int, string, string) {
		t.Helper()
		return runCmd(t, env, args...)
	}
	want := func(what string, code, wantCode int, stdout, stderr string, has ...string) {
		t.Helper()
		if code != wantCode {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, code, wantCode, stdout, stderr)
		}
		for _, h := range has {
			if !strings.Contains(stdout+stderr, h) {
				t.Errorf("%s: the output lacks %q\nstdout:\n%s\nstderr:\n%s", what, h, stdout, stderr)
			}
		}
	}
	jsonOf := func(what, s string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("%s: stdout is not one JSON object (%v):\n%s", what, err, s)
		}
		return m
	}

	// status
	code, out, errw := cmd("status")
	want("status", code, 0, out, errw, "obol agent ", "node       ", "ready      yes", "uptime", "version 1, 3 resources, sha256 ",
		"from "+cfgFile, "listeners  socket "+sock+", ", "http "+httpAddr, "peers      none")
	code, out, errw = cmd("status", "--json")
	want("status --json", code, 0, out, errw)
	st := jsonOf("status --json", out)
	resp, err := unixClient(sock).Get("http://obol/v1/config")
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		Config json.RawMessage `json:"config"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&shown)
	resp.Body.Close()
	sum := sha256.Sum256(shown.Config)
	peers, _ := st["peers"].([]any)
	node, _ := st["node"].(string)
	if self, _ := peers[0].(map[string]any); node == "" || self["name"] != node || self["self"] != true {
		t.Errorf("status --json: node %q, peers %v", node, peers)
	}
	if st["ready"] != true || st["config_sha256"] != hex.EncodeToString(sum[:]) || st["config_source"] != cfgFile ||
		st["config_version"] != float64(1) || len(peers) != 1 {
		t.Errorf("status --json: %v", st)
	}
	// The same agent on its HTTP listener, the socket given in the
	// environment notwithstanding.
	code, out, errw = cmd("status", "--http", httpAddr)
	want("status --http", code, 0, out, errw, "node       "+node, "http "+httpAddr+", 1 of ")

	// check: a peek spends nothing and counts nowhere; --copies spends.
	for range 3 {
		code, out, errw = cmd("check", "e2e/bucket", "alice")
		want("check (a peek)", code, 0, out, errw, "granted: e2e/bucket for alice (a peek", "nothing was spent", "RateLimit-Policy: ")
	}
	topTotal := func(by string) float64 {
		t.Helper()
		code, out, errw := cmd("top", "e2e/bucket", "--by", by, "--json")
		want("top --json", code, 0, out, errw)
		return jsonOf("top --json", out)["total"].(float64)
	}
	if n := topTotal("granted"); n != 0 {
		t.Errorf("after three peeks top counts %v grants, want 0", n)
	}
	code, out, errw = cmd("check", "--copies", "2", "e2e/bucket", "alice") // a flag before the arguments
	want("check --copies 2", code, 0, out, errw, "granted: 2 of e2e/bucket for alice (spent)")
	if n := topTotal("granted"); n != 1 {
		t.Errorf("after a check of 2 top counts %v grants, want 1", n)
	}
	code, out, errw = cmd("check", "e2e/bucket", "alice")
	want("check of an empty bucket", code, exitRejected, out, errw, "rejected: e2e/bucket for alice, retry after ", "a peek")
	code, out, errw = cmd("check", "e2e/bucket", "alice", "--json")
	want("check --json of an empty bucket", code, exitRejected, out, errw)
	if m := jsonOf("check --json", out); m["granted"] != false || m["status"] != float64(429) || m["peek"] != true || m["retry_after_s"] == nil ||
		m["decision"].(map[string]any)["granted"] != float64(0) {
		t.Errorf("check --json of a rejection: %v", m)
	}
	code, out, errw = cmd("check", "e2e/bucket", "alice", "--copies", "1")
	want("check --copies 1 of an empty bucket", code, exitRejected, out, errw, "rejected: 1 of e2e/bucket for alice")
	code, out, errw = cmd("check", "e2e/tiers", "blocked")
	want("check of a blocked domain", code, exitRejected, out, errw, "no wait will let it through")
	code, out, errw = cmd("check", "e2e/tiers", "bob", "--json")
	want("check --json of a grant", code, 0, out, errw)
	if m := jsonOf("check --json", out); m["granted"] != true || m["status"] != float64(204) || m["decision"] != nil || m["ratelimit_policy"] == "" {
		t.Errorf("check --json of a grant: %v", m)
	}
	code, out, errw = cmd("check", "e2e/nope", "bob")
	want("check of an unknown resource", code, exitAnswered, out, errw, "the agent answered 404 unknown_resource")
	code, out, errw = cmd("check", "--", "e2e/tiers", "-dash")
	want("check of a domain after --", code, 0, out, errw, "for -dash")

	// reset: alice's empty bucket is full again; the agent logs who asked.
	code, out, errw = cmd("reset", "e2e/bucket", "alice")
	want("reset", code, 0, out, errw, "reset e2e/bucket for alice")
	code, out, errw = cmd("check", "e2e/bucket", "alice", "--copies", "2")
	want("check after the reset", code, 0, out, errw, "granted: 2 of e2e/bucket for alice (spent)")
	if !strings.Contains(a.stderr.String(), `"msg":"key reset","resource":"e2e/bucket","domain":"alice","client":"pid:`) {
		t.Errorf("the agent's log lacks the reset with its client:\n%s", a.stderr.String())
	}
	code, out, errw = cmd("reset", "e2e/window", "x")
	want("reset of an adaptive resource", code, exitAnswered, out, errw, "409 wrong_kind")
	code, out, errw = cmd("reset", "e2e/bucket", "--json", "bob")
	want("reset --json", code, 0, out, errw)
	if m := jsonOf("reset --json", out); m["reset"] != true {
		t.Errorf("reset --json: %s", out)
	}

	// top
	code, out, errw = cmd("top", "e2e/bucket")
	want("top", code, 0, out, errw, "rejections of e2e/bucket in the last ", "COUNT  ERROR  DOMAIN", "alice")
	code, out, errw = cmd("top", "e2e/tiers", "--by", "granted", "-n", "1")
	want("top of nothing granted", code, 0, out, errw, "no grants of e2e/tiers in the last ")
	code, out, errw = cmd("top", "e2e/window")
	want("top of an adaptive resource", code, exitAnswered, out, errw, "409 wrong_kind")
	code, out, errw = cmd("top", "e2e/nope", "--json")
	want("top --json of an unknown resource", code, exitAnswered, out, errw)
	if e, _ := jsonOf("top --json error", out)["error"].(map[string]any); e["code"] != "unknown_resource" {
		t.Errorf("top --json of an unknown resource: stdout %s", out)
	}
	code, out, errw = cmd("top", "e2e/bucket", "-n", "1000")
	want("top -n 1000", code, exitAnswered, out, errw, "400 bad_request", "n: must be an integer in [1, 100]")

	// peers
	code, out, errw = cmd("peers")
	want("peers", code, 0, out, errw, "NAME", "LAST SYNC", node+" (this node)", httpAddr, "alive")
	code, out, errw = cmd("peers", "--json")
	want("peers --json", code, 0, out, errw)
	if p, _ := jsonOf("peers --json", out)["peers"].([]any); len(p) != 1 {
		t.Errorf("peers --json: %s", out)
	}

	// config: the normalized config, loadable as a config file.
	code, out, errw = cmd("config")
	want("config", code, 0, out, errw, `"e2e/bucket": {`, `"period": "1h0m0s"`)
	if c, err := config.Parse([]byte(out)); err != nil || len(c.Resources) != 3 {
		t.Errorf("config's output does not load as a config (%v):\n%s", err, out)
	}
	code, out, errw = cmd("config", "--json")
	want("config --json", code, 0, out, errw)
	if m := jsonOf("config --json", out); m["version"] != float64(1) || m["config"] == nil {
		t.Errorf("config --json: %s", out)
	}
	if errw != "" {
		t.Errorf("config redacted something:\n%s", errw)
	}

	// reload: a good file, then a bad one (refused, the old stays).
	if err := os.WriteFile(cfgFile, []byte(e2eConfig+"  e2e/new: {kind: gcra, burst: 1, count: 1, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errw = cmd("reload")
	want("reload", code, 0, out, errw, "reloaded "+cfgFile+": config version 2", "added:        e2e/new", "unchanged:    3 resources")
	if err := os.WriteFile(cfgFile, []byte("resources:\n  e2e/bad: {kind: gcra, burst: 0, count: 1, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errw = cmd("reload")
	want("reload of a bad file", code, exitAnswered, out, errw, "400 bad_request", "refused", "burst")
	code, out, errw = cmd("reload", "--json")
	want("reload --json of a bad file", code, exitAnswered, out, errw)
	if e, _ := jsonOf("reload --json", out)["error"].(map[string]any); e["code"] != "bad_request" || e["problems"] == nil {
		t.Errorf("reload --json of a bad file: stdout %s", out)
	}
	code, out, errw = cmd("status")
	want("status after the reloads", code, 0, out, errw, "version 2, 4 resources")

	// The agent gone: exit 3, with --json an error object.
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	code, out, errw = cmd("status")
	want("status of a stopped agent", code, exitUnreachable, out, errw, "cannot reach the agent on the socket "+sock+" (OBOL_SOCKET)", "is the agent running")
	code, out, errw = cmd("check", "e2e/bucket", "alice", "--json")
	want("check --json of a stopped agent", code, exitUnreachable, out, errw)
	if e, _ := jsonOf("check --json, unreachable", out)["error"].(map[string]any); e["code"] != "unreachable" {
		t.Errorf("unreachable --json: stdout %s", out)
	}
	code, out, errw = cmd("peers", "--http", httpAddr)
	want("peers on a closed HTTP listener", code, exitUnreachable, out, errw, "cannot reach the agent on the HTTP listener "+httpAddr+" (--http)", "connection refused")
}

// TestCommandsToken: the commands send the bearer token from
// --auth-token-file or OBOL_AUTH_TOKEN_FILE; without it, an agent that asks
// for it everywhere answers 401 and the command says what to give. Neither
// the token nor the gossip key shows in any output.
func TestCommandsToken(t *testing.T) {
	dir := tempDir(t)
	sock := filepath.Join(dir, "obol.sock")
	const token, key = "tok-0123456789abcdef0123456789", "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	tokenFile, keyFile := filepath.Join(dir, "token"), filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "obol.yaml")
	if err := os.WriteFile(cfgFile, []byte("gossip: {bind: 127.0.0.1:0, secret_file: "+keyFile+"}\nresources: {r/gcra: {kind: gcra, burst: 1, count: 1, period: 1s}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startAgent(t, []string{"--config", cfgFile, "--socket", sock, "--http", "off", "--auth-token-file", tokenFile, "--auth-everywhere",
		"--node-name", "tok"}, noEnv, sock)
	code, out, errw := runCmd(t, map[string]string{"OBOL_SOCKET": sock}, "status")
	if code != exitAnswered || !strings.Contains(errw, "401 unauthorized") || !strings.Contains(errw, "--auth-token-file FILE or OBOL_AUTH_TOKEN_FILE") {
		t.Errorf("status without the token: exit %d\n%s%s", code, out, errw)
	}
	withToken := map[string]string{"OBOL_SOCKET": sock, "OBOL_AUTH_TOKEN_FILE": tokenFile}
	var all strings.Builder
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"config"}, {"config", "--json"}, {"peers"}, {"top", "r/gcra"}} {
		code, out, errw := runCmd(t, withToken, args...)
		if code != 0 {
			t.Errorf("%v with the token: exit %d\n%s%s", args, code, out, errw)
		}
		all.WriteString(out + errw)
	}
	if code, out, errw := runCmd(t, map[string]string{"OBOL_SOCKET": sock}, "peers", "--auth-token-file", tokenFile); code != 0 {
		t.Errorf("peers --auth-token-file: exit %d\n%s%s", code, out, errw)
	}
	if s := all.String(); strings.Contains(s, token) || strings.Contains(s, key) || !strings.Contains(s, keyFile) {
		t.Errorf("the output shows the token or the key, or not the key file's path:\n%s", s)
	}
}

// fakeAgent serves h on a Unix socket until the test ends and returns the
// socket's path.
func fakeAgent(t *testing.T, h http.Handler) string {
	t.Helper()
	path := filepath.Join(tempDir(t), "fake.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

// TestCommandsAgainstAnswers: what the commands make of answers a live
// agent of this release does not give: an earlier release without GET
// /v1/status, an agent not ready, garbage, no answer in time, a config
// with secret-named members, names with control characters.
func TestCommandsAgainstAnswers(t *testing.T) {
	jsonReply := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	notFound := `{"error":{"code":"not_found","message":"no endpoint GET /v1/status"}}`
	older := http.NewServeMux()
	older.HandleFunc("/v1/status", jsonReply(404, notFound))
	older.HandleFunc("/readyz", jsonReply(200, `{"status":"ready"}`))
	older.HandleFunc("/v1/config", jsonReply(200, `{"version":3,"config":{"agent":{},"resources":{"a/b":{"kind":"gcra"}}}}`))
	older.HandleFunc("/v1/peers", jsonReply(200, `{"peers":[{"name":"old-node","address":"unix:/x","state":"alive","last_sync_age_ms":0,"self":true},{"name":"p\u001b[31m","address":"10.0.0.2:7946","state":"alive","last_sync_age_ms":-1}]}`))
	older.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# HELP process_start_time_seconds x\nprocess_start_time_seconds 1.7e+09\n")
	})
	olderSock := fakeAgent(t, older)
	sum := sha256.Sum256([]byte(`{"agent":{},"resources":{"a/b":{"kind":"gcra"}}}`))

	notReady := http.NewServeMux()
	notReady.HandleFunc("/v1/status", jsonReply(200, `{"version":"v9","node":"n","ready":false,"config_version":1,"listeners":[]}`))
	notReady.HandleFunc("/v1/peers", jsonReply(200, `{"peers":[]}`))

	secrets := http.NewServeMux()
	secrets.HandleFunc("/v1/config", jsonReply(200, `{"version":1,"config":{"gossip":{"secret_file":"/k","secret":"hunter2"},"x":{"api_token":"t0k","password":["p1",""],"max_keys":7,"token_file":"/t"}}}`))

	hung := http.NewServeMux()
	hung.HandleFunc("/", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })

	cases := []struct {
		name     string
		h        http.Handler
		args     []string
		code     int
		has      []string // in stdout + stderr
		hasNot   []string
		jsonWant map[string]any // fields of stdout, when it is JSON
	}{
		{name: "an earlier release: status composed", h: older, args: []string{"status"},
			has: []string{"obol agent unknown", "node       old-node", "version 3, 1 resource, sha256 " + hex.EncodeToString(sum[:]), "since 2023-11-14T22:13:20Z", "1 (1 alive)", "no GET /v1/status"}},
		{name: "an earlier release: status --json", h: older, args: []string{"status", "--json"},
			jsonWant: map[string]any{"version": "unknown", "node": "old-node", "ready": true, "config_version": float64(3), "config_sha256": hex.EncodeToString(sum[:]), "started_at_ms": float64(1.7e12)}},
		{name: "control characters quoted", h: older, args: []string{"peers"}, has: []string{`"p\x1b[31m"`, "never"}, hasNot: []string{"\x1b"}},
		{name: "not ready", h: notReady, args: []string{"status"}, code: exitAnswered, has: []string{"ready      no", "is not ready"}},
		{name: "not ready, --json", h: notReady, args: []string{"status", "--json"}, code: exitAnswered, jsonWant: map[string]any{"ready": false, "version": "v9", "peers": []any{}}},
		{name: "garbage", h: jsonReply(500, "<html>oops</html>"), args: []string{"peers"}, code: exitAnswered, has: []string{"the agent answered 500 bad_reply", "oops"}},
		{name: "garbage, --json", h: jsonReply(502, "oops"), args: []string{"peers", "--json"}, code: exitAnswered, jsonWant: map[string]any{"error": map[string]any{"code": "bad_reply", "message": "the agent answered 502 bad_reply: GET /v1/peers: not the reply expected: \"oops\""}}},
		{name: "200 but not JSON", h: jsonReply(200, "nope"), args: []string{"top", "r"}, code: exitAnswered, has: []string{"not the JSON expected"}},
		{name: "no answer in time", h: hung, args: []string{"peers", "--timeout", "50ms"}, code: exitUnreachable, has: []string{"no answer in time (--timeout)"}},
		{name: "secrets redacted", h: secrets, args: []string{"config"}, has: []string{`"secret_file": "/k"`, `"secret": "REDACTED"`, `"api_token": "REDACTED"`, `"REDACTED",`, `""`, `"max_keys": 7`, `"token_file": "/t"`, "3 secret values redacted"},
			hasNot: []string{"hunter2", "t0k", "p1"}},
		{name: "secrets redacted, --json", h: secrets, args: []string{"config", "--json"}, hasNot: []string{"hunter2", "t0k", "p1"},
			jsonWant: map[string]any{"version": float64(1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := olderSock
			if tc.h != older {
				sock = fakeAgent(t, tc.h)
			}
			code, out, errw := runCmd(t, nil, append(tc.args, "--socket", sock)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errw)
			}
			for _, h := range tc.has {
				if !strings.Contains(out+errw, h) {
					t.Errorf("the output lacks %q\nstdout:\n%s\nstderr:\n%s", h, out, errw)
				}
			}
			for _, h := range tc.hasNot {
				if strings.Contains(out+errw, h) {
					t.Errorf("the output has %q\nstdout:\n%s\nstderr:\n%s", h, out, errw)
				}
			}
			if tc.jsonWant != nil {
				var m map[string]any
				if err := json.Unmarshal([]byte(out), &m); err != nil {
					t.Fatalf("stdout is not JSON (%v):\n%s", err, out)
				}
				for k, v := range tc.jsonWant {
					if !reflect.DeepEqual(m[k], v) {
						t.Errorf("%s = %#v, want %#v (stdout %s)", k, m[k], v, out)
					}
				}
			}
		})
	}
}

func TestRedactJSON(t *testing.T) {
	cases := []struct {
		name, in, want string
		n              int
		bad            bool
	}{
		{name: "nothing secret", in: `{"a":1,"b":[true,null,"x"],"c":{"d":"e"}}`, want: `{"a":1,"b":[true,null,"x"],"c":{"d":"e"}}`},
		{name: "order and numbers kept", in: `{"z":1.50,"a":1e3}`, want: `{"z":1.50,"a":1e3}`},
		{name: "a secret string", in: `{"gossip":{"secret":"s","secret_file":"/f"}}`, want: `{"gossip":{"secret":"REDACTED","secret_file":"/f"}}`, n: 1},
		{name: "a list of secrets, empty kept", in: `{"Passwords":["a","",3]}`, want: `{"Passwords":["REDACTED","",3]}`, n: 1},
		{name: "an object under a secret name is walked", in: `{"tokens":{"kind":"gcra","auth_token":"t"}}`, want: `{"tokens":{"kind":"gcra","auth_token":"REDACTED"}}`, n: 1},
		{name: "a resource named like a secret", in: `{"resources":{"api/token-refresh":{"kind":"gcra"}}}`, want: `{"resources":{"api/token-refresh":{"kind":"gcra"}}}`},
		{name: "paths and counts", in: `{"key_dir":"/d","max_keys":3,"private_key_path":"/p","api_key":"k"}`, want: `{"key_dir":"/d","max_keys":3,"private_key_path":"/p","api_key":"REDACTED"}`, n: 1},
		{name: "not JSON", in: `{"a":`, bad: true},
		{name: "two documents", in: `{} {}`, bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, n, err := redactJSON([]byte(tc.in))
			if tc.bad {
				if err == nil {
					t.Fatalf("redactJSON(%s) = %s, want an error", tc.in, got)
				}
				return
			}
			if err != nil || string(got) != tc.want || n != tc.n {
				t.Errorf("redactJSON(%s) = %s, %d, %v; want %s, %d", tc.in, got, n, err, tc.want, tc.n)
			}
		})
	}
}

func TestParseInterspersed(t *testing.T) {
	cases := []struct {
		name string
		args []string
		pos  []string
		json bool
		n    int
	}{
		{name: "none", n: 1},
		{name: "flags first", args: []string{"--json", "-n", "3", "a", "b"}, pos: []string{"a", "b"}, json: true, n: 3},
		{name: "flags last", args: []string{"a", "b", "--json", "-n=4"}, pos: []string{"a", "b"}, json: true, n: 4},
		{name: "between", args: []string{"a", "-n", "5", "b"}, pos: []string{"a", "b"}, n: 5},
		{name: "after --", args: []string{"a", "--", "-b", "--json"}, pos: []string{"a", "-b", "--json"}, n: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			j := fs.Bool("json", false, "")
			n := fs.Int("n", 1, "")
			pos, err := parseInterspersed(fs, tc.args)
			if err != nil || !reflect.DeepEqual(pos, tc.pos) || *j != tc.json || *n != tc.n {
				t.Errorf("parseInterspersed(%q) = %q, json %v, n %d, %v", tc.args, pos, *j, *n, err)
			}
		})
	}
}

func TestCommandHelpers(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want string
	}{{0, "0s"}, {350, "350ms"}, {1049, "1s"}, {54210, "54.2s"}, {11525000, "3h12m5s"}} {
		if got := millis(tc.ms); got != tc.want {
			t.Errorf("millis(%d) = %q, want %q", tc.ms, got, tc.want)
		}
	}
	for in, want := range map[string]string{"tenant-9": "tenant-9", "": `""`, "a\nb": `"a\nb"`, "é ü": "é ü", "x\u202ey": `"x\u202ey"`} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %s, want %s", in, got, want)
		}
	}
	for _, tc := range []struct{ obj, want string }{
		{`{"a":1}`, `{"a":1,"peers":[]}`},
		{` {} `, `{"peers":[]}`},
	} {
		if got, err := withMember([]byte(tc.obj), "peers", json.RawMessage(`[]`)); err != nil || string(got) != tc.want {
			t.Errorf("withMember(%s) = %s, %v; want %s", tc.obj, got, err, tc.want)
		}
	}
	if _, err := withMember([]byte(`[1]`), "peers", json.RawMessage(`[]`)); err == nil {
		t.Error("withMember of an array: no error")
	}
}
