package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func init() {
	attacks = append(attacks,
		attack{name: "browser", what: "what a browser on the same host sends for a page of another site: a text/plain form, no-cors fetches opening a session and reloading the config, a GET /v1/check from an img tag, and reads of /v1/config and /v1/top after DNS rebinding (Host: evil.example), over the loopback port", run: attackBrowser},
		attack{name: "configfiles", what: "--config at /dev/zero and at a FIFO, an RLS config file linked to /proc/self/pagemap, and a reload once the config file became a FIFO", run: attackConfigFiles},
	)
}

// attackBrowser: any Content-Type but MessagePack was read as JSON and
// neither Host nor Origin was checked, so a page in a browser on the host
// spent tokens with a text/plain form, opened sessions and reloaded the
// config with no-cors fetch, and read /v1/config and /v1/top after DNS
// rebinding. Here a plain client sends the same requests, with the headers
// Chromium sends, to the agent's loopback port: each must be refused (403
// or 415), and the victim's key must be untouched; a request as a client
// (or the dashboard) sends it is served.
func attackBrowser(ctx context.Context, a *agentProc) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	ag, err := startAgent(a.bin, a.dir, "--http", addr)
	if err != nil {
		return "", err
	}
	defer ag.stop()
	port := addr[strings.LastIndexByte(addr, ':'):]
	base := "http://" + addr
	state := func() (string, error) {
		resp, err := ag.client.Get("http://obol/v1/state?resource=demo/search&domain=victim")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	before, err := state()
	if err != nil {
		return "", err
	}
	spend := `{"resource":"demo/search","domain":"victim"}`
	tcp := &http.Client{Timeout: 10 * time.Second}
	type req struct {
		name, method, path, body string
		headers                  []string
		want                     int
	}
	send := func(r req) (int, error) {
		var body io.Reader
		if r.body != "" {
			body = strings.NewReader(r.body)
		}
		hr, err := http.NewRequestWithContext(ctx, r.method, base+r.path, body)
		if err != nil {
			return 0, err
		}
		for _, h := range r.headers {
			k, v, _ := strings.Cut(h, ": ")
			if k == "Host" {
				hr.Host = v
				continue
			}
			hr.Header.Set(k, v)
		}
		resp, err := tcp.Do(hr)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	cross := []string{"Origin: http://evil.example", "Sec-Fetch-Site: cross-site"}
	refused := []req{
		{"text/plain form", "POST", "/v1/request", spend, append([]string{"Content-Type: text/plain"}, cross...), 403},
		{"text/plain, no Origin", "POST", "/v1/request", spend, []string{"Content-Type: text/plain;charset=UTF-8"}, 415},
		{"no-cors session", "POST", "/v1/sessions", `{"ttl_ms":86400000}`, append([]string{"Content-Type: text/plain;charset=UTF-8"}, cross...), 403},
		{"no-cors reload", "POST", "/v1/config/reload", "", cross, 403},
		{"img GET /v1/check", "GET", "/v1/check?resource=demo/search&domain=victim", "", []string{"Sec-Fetch-Site: cross-site"}, 403},
		{"rebinding /v1/config", "GET", "/v1/config", "", []string{"Host: evil.example" + port}, 403},
		{"rebinding /v1/top", "GET", "/v1/top?resource=demo/search", "", []string{"Host: evil.example" + port, "Sec-Fetch-Site: same-origin"}, 403},
	}
	var got []string
	for _, r := range refused {
		code, err := send(r)
		if err != nil {
			return "", err
		}
		got = append(got, fmt.Sprintf("%s %d", r.name, code))
		if code != r.want {
			return strings.Join(got, ", "), fmt.Errorf("%s: %d, want %d", r.name, code, r.want)
		}
	}
	after, err := state()
	if err != nil {
		return "", err
	}
	if after != before {
		return strings.Join(got, ", "), fmt.Errorf("the victim's key changed: %s → %s", before, after)
	}
	// The dashboard's own request is served (and spends).
	code, err := send(req{"the dashboard", "POST", "/v1/request", spend, []string{"Content-Type: application/json", "Origin: " + base, "Sec-Fetch-Site: same-origin"}, 200})
	if err != nil {
		return "", err
	}
	spent, _ := state()
	fig := strings.Join(got, ", ") + fmt.Sprintf("; the victim's key unchanged; the dashboard's own request %d", code)
	if code != 200 || spent == before {
		return fig, fmt.Errorf("the dashboard's own request was not served: %d", code)
	}
	<-ctx.Done()
	return fig, nil
}

// attackConfigFiles: --config at /dev/zero read 2.7 GB then ran out of
// memory; at a FIFO the watcher blocked in open and a reload hung with its
// lock held; an RLS config file linked to /proc/self/pagemap read 3.7 GB.
// Each must be refused within a second, and a reload of a config file that
// became a FIFO answered at once (twice: its lock let go), the agent then
// stopping on its signal.
func attackConfigFiles(ctx context.Context, a *agentProc) (string, error) {
	dir, err := os.MkdirTemp(a.dir, "configfiles")
	if err != nil {
		return "", err
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return "", err
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		return "", err
	}
	rlsDir := filepath.Join(dir, "rls")
	if err := os.MkdirAll(rlsDir, 0o700); err != nil {
		return "", err
	}
	if err := os.Symlink("/proc/self/pagemap", filepath.Join(rlsDir, "config.yaml")); err != nil {
		return "", err
	}
	var figs []string
	for _, tc := range []struct {
		name string
		args []string
		say  string
	}{
		{"--config /dev/zero", []string{"--config", "/dev/zero", "--socket", "off", "--http", "127.0.0.1:0"}, "character device"},
		{"--config FIFO", []string{"--config", fifo, "--socket", "off", "--http", "127.0.0.1:0"}, "FIFO"},
		{"--rls-config linked to /proc/self/pagemap", []string{"--check-config", empty, "--rls-config", rlsDir, "--rls-socket", filepath.Join(dir, "rls.sock")}, "the cap of"},
	} {
		start := time.Now()
		code, out := exitOf(a.bin, 20*time.Second, tc.args...)
		took := time.Since(start)
		figs = append(figs, fmt.Sprintf("%s: exit %d in %v", tc.name, code, took.Round(time.Millisecond)))
		if code != 2 || !strings.Contains(out, tc.say) || took > 5*time.Second {
			return strings.Join(figs, "; "), fmt.Errorf("%s: exit %d after %v: %.300s", tc.name, code, took, out)
		}
	}

	file := filepath.Join(dir, "obol.yaml")
	if err := os.WriteFile(file, []byte("resources:\n  a/b: {kind: gcra, burst: 3, count: 1, period: 1h}\n"), 0o600); err != nil {
		return "", err
	}
	ag, err := startAgent(a.bin, dir, "--config", file)
	if err != nil {
		return "", err
	}
	defer func() {
		if ag.cmd.ProcessState == nil { // not waited for below
			ag.stop()
		}
	}()
	if err := os.Remove(file); err != nil {
		return "", err
	}
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		return "", err
	}
	for i := range 2 {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		code, b, err := ag.post(rctx, "/v1/config/reload", "")
		cancel()
		took := time.Since(start)
		figs = append(figs, fmt.Sprintf("reload %d from a FIFO: %d in %v", i+1, code, took.Round(time.Microsecond)))
		if err != nil || code != 400 || !strings.Contains(string(b), "FIFO") {
			return strings.Join(figs, "; "), fmt.Errorf("reload %d: %d %v %.200s", i+1, code, err, b)
		}
	}
	start := time.Now()
	_ = ag.cmd.Process.Signal(os.Interrupt)
	stopped := make(chan error, 1)
	go func() { stopped <- ag.cmd.Wait() }()
	select {
	case err := <-stopped:
		figs = append(figs, fmt.Sprintf("stopped on SIGINT in %v (%v)", time.Since(start).Round(time.Millisecond), err))
	case <-time.After(10 * time.Second):
		_ = ag.cmd.Process.Kill()
		<-stopped
		return strings.Join(figs, "; "), fmt.Errorf("the agent did not stop within 10 s of SIGINT")
	}
	<-ctx.Done()
	return strings.Join(figs, "; "), nil
}
