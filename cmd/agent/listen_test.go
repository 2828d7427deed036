package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rlsDir writes a rate limit service config directory under dir.
func rlsDir(t *testing.T, dir string) string {
	t.Helper()
	cfgDir := filepath.Join(dir, "rls")
	if err := os.Mkdir(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeRLS(t, cfgDir, "100")
	return cfgDir
}

// metricValue returns the value of the series line that starts with
// series in the agent's /metrics, -1 when there is none.
func metricValue(t *testing.T, sock, series string) float64 {
	t.Helper()
	c := unixClient(sock)
	defer c.CloseIdleConnections() // the socket is capped too
	resp, err := c.Get("http://obol/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return -1
}

// stalled opens a connection to addr and sends the headers of a POST
// /json and one byte of its body, and no more: a slow-body client.
func stalled(addr string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// TestRLSHTTPStalledConnectionsCapped: slow-body clients of --rls-http
// (headers, then a byte of body and nothing more) hold at most
// --max-conns connections: the rest are closed at once and counted; the
// Unix socket API keeps answering; and a stalled one is cut by
// --read-timeout.
func TestRLSHTTPStalledConnectionsCapped(t *testing.T) {
	dir := tempDir(t)
	sock := filepath.Join(dir, "obol.sock")
	httpAddr := freePort(t)
	a := startAgent(t, []string{"--socket", sock, "--http", "off", "--rls-config", rlsDir(t, dir),
		"--rls-socket", filepath.Join(dir, "rls.sock"), "--rls-http", httpAddr,
		"--max-conns", "8", "--read-timeout", "2s", "--drain-timeout", "1s"}, noEnv, sock)

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	const n = 60
	for range n {
		c, err := stalled(httpAddr)
		if err != nil {
			continue // closed over the cap before the write: refused too
		}
		held = append(held, c)
	}
	// Every connection past the cap is closed by the agent (its reader
	// sees EOF or a reset) without a byte sent.
	rlsWaitFor(t, func() bool {
		return metricValue(t, sock, `obol_listener_refused_connections_total{listener="rls_http"}`) >= n-8
	})
	if open := metricValue(t, sock, `obol_listener_connections{listener="rls_http"}`); open > 8 {
		t.Fatalf("%v connections open on rls_http, want at most 8", open)
	}
	if max := metricValue(t, sock, `obol_listener_max_connections{listener="rls_http"}`); max != 8 {
		t.Fatalf("obol_listener_max_connections = %v, want 8", max)
	}
	// The API on the socket is not touched.
	hc := unixClient(sock)
	defer hc.CloseIdleConnections()
	for range 20 {
		resp, err := hc.Get("http://obol/healthz")
		if err != nil {
			t.Fatalf("the socket API, with rls_http full: %v", err)
		}
		resp.Body.Close()
	}
	// A stalled connection is cut by the read timeout: its reader gets
	// the end of the connection (after, at most, an error reply).
	cut := 0
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := io.Copy(io.Discard, c)
		if err == nil || errors.Is(err, syscall.ECONNRESET) {
			cut++
		} else {
			t.Fatalf("a stalled connection: %v, want it closed by the read timeout", err)
		}
	}
	rlsWaitFor(t, func() bool {
		return metricValue(t, sock, `obol_listener_connections{listener="rls_http"}`) == 0
	})
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestAPIStalledConnectionsCapped: the same on the HTTP API's listener:
// it holds at most --max-conns, and the Unix socket (its own cap) keeps
// answering.
func TestAPIStalledConnectionsCapped(t *testing.T) {
	dir := tempDir(t)
	sock := filepath.Join(dir, "obol.sock")
	a := startAgent(t, []string{"--socket", sock, "--http", "127.0.0.1:0", "--max-conns", "8"}, noEnv, sock)
	var addr string
	for _, l := range logLines(t, a.stderr.String()) {
		if l["msg"] == "obol agent started" {
			addr, _ = l["http"].(string)
		}
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 40 {
		if c, err := stalled(addr); err == nil {
			held = append(held, c)
		}
	}
	rlsWaitFor(t, func() bool {
		return metricValue(t, sock, `obol_listener_refused_connections_total{listener="http"}`) >= 32
	})
	if open := metricValue(t, sock, `obol_listener_connections{listener="http"}`); open != 8 {
		t.Fatalf("%v connections open on http, want 8", open)
	}
	hc := unixClient(sock)
	defer hc.CloseIdleConnections()
	for range 20 {
		resp, err := hc.Get("http://obol/healthz")
		if err != nil {
			t.Fatalf("the socket API, with http full: %v", err)
		}
		resp.Body.Close()
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
}

// failing is a listener whose Accept fails for good (EINVAL, not a
// temporary error) once fail is closed.
type failing struct {
	net.Listener
	fail chan struct{}
}

func (f *failing) Accept() (net.Conn, error) {
	res := make(chan struct{})
	var c net.Conn
	var err error
	go func() { c, err = f.Listener.Accept(); close(res) }()
	select {
	case <-res:
		return c, err
	case <-f.fail:
		f.Listener.Close()
		<-res
		if c != nil {
			c.Close()
		}
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EINVAL)}
	}
}

// TestListenerFatalErrorStopsAgent: when a listener fails for good (the
// rate limit service's HTTP listener, or the API's status listener), the
// whole agent stops promptly: the log names the listener and the error,
// the stop sequence runs (the state file is written) and run returns an
// exit status of 1. Never a half-alive agent whose other listeners answer.
func TestListenerFatalErrorStopsAgent(t *testing.T) {
	for _, name := range []string{"rls_http", "status"} {
		t.Run(name, func(t *testing.T) {
			fail := make(chan struct{})
			listenerHook = func(n string, ln net.Listener) net.Listener {
				if n == name {
					return &failing{Listener: ln, fail: fail}
				}
				return ln
			}
			defer func() { listenerHook = nil }()
			dir := tempDir(t)
			sock := filepath.Join(dir, "obol.sock")
			a := startAgent(t, []string{"--socket", sock, "--http", "off", "--status-http", "127.0.0.1:0",
				"--rls-config", rlsDir(t, dir), "--rls-socket", filepath.Join(dir, "rls.sock"), "--rls-http", freePort(t),
				"--state-file", filepath.Join(dir, "state"), "--drain-timeout", "1s"}, noEnv, sock)
			close(fail)
			var err error
			select {
			case err = <-a.done:
				a.done <- err
			case <-time.After(30 * time.Second):
				t.Fatalf("the agent still runs after its %s listener failed; stderr:\n%s", name, a.stderr)
			}
			if code := exitCode(err); code != 1 {
				t.Fatalf("exit status %d (%v), want 1", code, err)
			}
			log := a.stderr.String()
			if !regexp.MustCompile(`"msg":"obol agent stopped on an error".*invalid argument`).MatchString(log) {
				t.Errorf("no stop line with the error:\n%s", log)
			}
			want := map[string]string{"rls_http": "--rls-http", "status": "status listener"}[name]
			if !strings.Contains(log, want) {
				t.Errorf("the log does not name the listener (%s):\n%s", want, log)
			}
			if !strings.Contains(log, "obol state file written on stop") {
				t.Errorf("the stop sequence did not write the state file:\n%s", log)
			}
			if _, err := os.Stat(sock); !os.IsNotExist(err) {
				t.Errorf("the socket is still there after the stop: %v", err)
			}
		})
	}
}
