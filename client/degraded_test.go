package client

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestDegradedWhenSocketRemoved(t *testing.T) {
	a := startAgent(t, nil)
	// The production timeouts: the bound must hold with them.
	c, logs := newClient(t, Config{Socket: a.sock, Timeout: DefaultTimeout})
	ctx := context.Background()
	if d, err := c.Request(ctx, "t/gcra", "d"); err != nil || d.Degraded || d.Granted != 1 {
		t.Fatalf("Request with the agent up = %+v, %v", d, err)
	}
	a.stop() // closes the listener and removes the socket; the client's connection is now dead
	for i := range 3 {
		start := time.Now()
		d, err := c.Request(ctx, "t/gcra", "d", Copies(3), MinCopies(2))
		elapsed := time.Since(start)
		if err != nil || !d.Degraded || d.Granted != 2 || d.Reply != (Reply{}) {
			t.Fatalf("call %d: Request with the socket gone = %+v, %v; want a degraded grant of 2", i, d, err)
		}
		t.Logf("call %d: degraded in %v", i, elapsed)
		if elapsed > 25*time.Millisecond {
			t.Errorf("call %d: degraded grant took %v, want ≤ 25ms", i, elapsed)
		}
	}
	if st := c.Stats(); st.Degraded != 3 || st.Errors != 0 {
		t.Errorf("Stats = %+v, want 3 degraded", st)
	}
	if n := logs.lines("agent unavailable"); n != 1 {
		t.Errorf("logged %d lines about the agent, want 1 per interval", n)
	}
}

// hungAgent accepts connections and never answers.
func hungAgent(t *testing.T) string {
	sock := filepath.Join(shortTempDir(t), "hung.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return sock
}

func TestDegradedWhenAgentHangs(t *testing.T) {
	sock := hungAgent(t)
	const timeout = 50 * time.Millisecond
	fc := fakeClock() // the timeout pause runs on it; the call timeout is wall-clock
	c, _ := newClient(t, Config{Socket: sock, Timeout: timeout, Clock: fc})
	ctx := context.Background()
	start := time.Now()
	d, err := c.Request(ctx, "t/gcra", "d")
	elapsed := time.Since(start)
	t.Logf("degraded after %v (timeout %v)", elapsed, timeout)
	if err != nil || !d.Degraded || d.Granted != 1 {
		t.Fatalf("Request to a hung agent = %+v, %v", d, err)
	}
	if elapsed < timeout || elapsed > timeout+200*time.Millisecond {
		t.Errorf("degraded after %v, want about the timeout %v", elapsed, timeout)
	}
	// Within the pause the agent is not asked: at once.
	start = time.Now()
	d, _ = c.Request(ctx, "t/gcra", "d")
	if elapsed := time.Since(start); !d.Degraded || elapsed >= timeout {
		t.Errorf("Request in the pause = %+v after %v, want degraded at once", d, elapsed)
	}
	// After the pause it is asked again (and times out again).
	fc.Advance(DefaultTimeoutPause)
	start = time.Now()
	d, _ = c.Request(ctx, "t/gcra", "d")
	if elapsed := time.Since(start); !d.Degraded || elapsed < timeout {
		t.Errorf("Request after the pause = %+v after %v, want a new try", d, elapsed)
	}
}

func TestDefaultTimeoutBoundsAHungAgent(t *testing.T) {
	sock := hungAgent(t)
	c, _ := newClient(t, Config{Socket: sock, Timeout: DefaultTimeout, TimeoutPause: -1})
	for i := range 3 {
		start := time.Now()
		d, err := c.Request(context.Background(), "t/gcra", "d")
		elapsed := time.Since(start)
		t.Logf("call %d: degraded after %v", i, elapsed)
		if err != nil || !d.Degraded {
			t.Fatalf("Request = %+v, %v", d, err)
		}
		if elapsed > DefaultTimeout+100*time.Millisecond {
			t.Errorf("call %d took %v with the default timeout %v", i, elapsed, DefaultTimeout)
		}
	}
}

func TestContextDeadlineIsNotDegraded(t *testing.T) {
	sock := hungAgent(t)
	c, _ := newClient(t, Config{Socket: sock, Timeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	d, err := c.Request(ctx, "t/gcra", "d")
	if !errors.Is(err, context.DeadlineExceeded) || d.Degraded {
		t.Fatalf("Request past its ctx deadline = %+v, %v; want context.DeadlineExceeded", d, err)
	}
}

func TestDegradedOn5xxAndBadReplies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{name: "500 internal", status: 500, body: `{"error":{"code":"internal","message":"internal error; request id x-1"}}`},
		{name: "503 not ready", status: 503, body: `{"error":{"code":"not_ready","message":"starting"}}`},
		{name: "502 from a proxy", status: 502, body: `<html>bad gateway</html>`},
		{name: "200 not JSON", status: 200, body: `hello`},
		{name: "200 not a decision", status: 200, body: `{"remaining": 3}`},
		{name: "200 truncated", status: 200, body: `{"granted": 1, "remaining": `},
		{name: "redirect", status: 302, body: ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := startStub(t, func(ctx *fasthttp.RequestCtx) {
				ctx.SetStatusCode(tc.status)
				ctx.SetBodyString(tc.body)
			})
			c, _ := newClient(t, Config{Socket: sock})
			d, err := c.Request(context.Background(), "t/gcra", "d", Copies(2), MinCopies(1))
			if err != nil || !d.Degraded || d.Granted != 1 {
				t.Fatalf("Request = %+v, %v; want a degraded grant of 1", d, err)
			}
			if st := c.Stats(); st.Degraded != 1 {
				t.Errorf("Stats.Degraded = %d", st.Degraded)
			}
		})
	}
}

func TestDegradedRefundAndBatch(t *testing.T) {
	c, _ := newClient(t, Config{Socket: filepath.Join(shortTempDir(t), "none.sock")})
	ctx := context.Background()
	if n, err := c.Refund(ctx, "t/gcra", "d", 1); err != nil || n != -1 {
		t.Fatalf("degraded Refund = %d, %v", n, err)
	}
	rs, err := c.Batch(ctx, []Need{{Resource: "a/b", Domain: "d", Copies: 3, MinCopies: 2}, {Resource: "a/b", Domain: "e"}})
	if err != nil || len(rs) != 2 || !rs[0].Degraded || rs[0].Granted != 2 || !rs[1].Degraded || rs[1].Granted != 1 {
		t.Fatalf("degraded Batch = %+v, %v", rs, err)
	}
	if st := c.Stats(); st.Degraded != 3 {
		t.Errorf("Stats.Degraded = %d, want 3", st.Degraded)
	}
}

func TestKillSwitch(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	for _, tc := range []struct {
		name string
		cfg  Config
		env  string
		on   bool
	}{
		{name: "config", cfg: Config{KillSwitch: true}, on: true},
		{name: "env 1", env: "1", on: true},
		{name: "env true", env: "true", on: true},
		{name: "env 0", env: "0", on: false},
		{name: "off", on: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Socket, cfg.Clock = a.sock, fc
			cfg.Getenv = func(k string) string {
				if k == "OBOL_KILL_SWITCH" {
					return tc.env
				}
				return ""
			}
			c, logs := newClient(t, cfg)
			if c.KillSwitch() != tc.on {
				t.Fatalf("KillSwitch() = %v", c.KillSwitch())
			}
			domain := "kill-" + tc.name
			c.Request(context.Background(), "t/one", domain)
			d, err := c.Request(context.Background(), "t/one", domain, Copies(1))
			if err != nil {
				t.Fatal(err)
			}
			if tc.on {
				if !d.Killed || d.Granted != 1 || d.RetryAfter != 0 || d.Reply.Granted != 0 || d.Reply.RetryAfterMs != 1000 {
					t.Fatalf("killed Request = %+v", d)
				}
				if n := logs.lines("kill switch"); n != 1 {
					t.Fatalf("logged %d kill-switch lines, want 1", n)
				}
				c.Request(context.Background(), "t/one", domain) // within the interval: not logged
				if n := logs.lines("kill switch"); n != 1 {
					t.Fatalf("logged %d kill-switch lines within the interval, want 1", n)
				}
				fc.Advance(DefaultLogInterval)
				c.Request(context.Background(), "t/one", domain) // the bucket refilled: granted
				c.Request(context.Background(), "t/one", domain)
				if n := logs.lines("kill switch"); n != 2 {
					t.Fatalf("logged %d kill-switch lines after the interval, want 2", n)
				}
				if st := c.Stats(); st.Killed != 3 {
					t.Fatalf("Stats.Killed = %d, want 3", st.Killed)
				}
			} else if d.Killed || d.Granted != 0 {
				t.Fatalf("Request without the kill switch = %+v", d)
			}
		})
	}
	t.Run("holds and SetKillSwitch", func(t *testing.T) {
		c, _ := newClient(t, Config{Socket: a.sock, Clock: fc, KillSwitch: true})
		ctx := context.Background()
		full, _ := c.Reserve(ctx, "t/two", "k", Copies(2))
		h, err := c.Reserve(ctx, "t/two", "k", Copies(2))
		if err != nil || !h.Killed || h.Granted != 2 || h.ID != "" {
			t.Fatalf("killed Reserve = %+v, %v", h, err)
		}
		id, _ := h.Transfer(ctx, 1, 0)
		if h2, err := c.Seize(ctx, id); err != nil || !h2.Killed || h2.Granted != 1 {
			t.Fatalf("Seize(%q) = %+v, %v", id, h2, err)
		}
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
		c.SetKillSwitch(false)
		if h, _ := c.Reserve(ctx, "t/two", "k"); h.Granted != 0 || h.Killed {
			t.Fatalf("Reserve with the switch off = %+v", h)
		}
		full.Release()
	})
	t.Run("bad env", func(t *testing.T) {
		_, err := New(Config{Socket: a.sock, Getenv: func(string) string { return "maybe" }})
		if err == nil {
			t.Fatal("New accepted OBOL_KILL_SWITCH=maybe")
		}
	})
}

func TestNewConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name    string
		cfg     Config
		base    string
		addr    string
		wantErr bool
	}{
		{name: "socket", cfg: Config{Socket: "/run/obol.sock"}, base: "http://obol", addr: "obol"},
		{name: "url", cfg: Config{URL: "http://127.0.0.1:7070"}, base: "http://127.0.0.1:7070", addr: "127.0.0.1:7070"},
		{name: "url with prefix", cfg: Config{URL: "http://localhost/obol/"}, base: "http://localhost/obol", addr: "localhost:80"},
		{name: "both", cfg: Config{Socket: "/s", URL: "http://x"}, wantErr: true},
		{name: "bad scheme", cfg: Config{URL: "unix:///s"}, wantErr: true},
		{name: "query", cfg: Config{URL: "http://x/?a=1"}, wantErr: true},
		{name: "tiny ttl", cfg: Config{SessionTTL: time.Millisecond}, wantErr: true},
		{name: "huge ttl", cfg: Config{SessionTTL: 25 * time.Hour}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Getenv = env(nil)
			c, err := New(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			defer c.Close()
			if c.base != tc.base || c.hc.Addr != tc.addr {
				t.Errorf("base %q addr %q; want %q %q", c.base, c.hc.Addr, tc.base, tc.addr)
			}
		})
	}
}

// TestDefaultSocket: without Socket or URL the client dials $OBOL_SOCKET,
// else the agent's default socket ($XDG_RUNTIME_DIR/obol.sock; never under
// $TMPDIR); OBOL_SOCKET=off makes New fail naming it.
func TestDefaultSocket(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(dir string) map[string]string
		sock string // where the stub agent listens, under dir; "": New fails
	}{
		{name: "XDG_RUNTIME_DIR, TMPDIR ignored", sock: "obol.sock",
			env: func(dir string) map[string]string {
				return map[string]string{"XDG_RUNTIME_DIR": dir, "TMPDIR": "/nonexistent"}
			}},
		{name: "OBOL_SOCKET wins", sock: "mine.sock",
			env: func(dir string) map[string]string {
				return map[string]string{"OBOL_SOCKET": filepath.Join(dir, "mine.sock"), "XDG_RUNTIME_DIR": "/nonexistent"}
			}},
		{name: "OBOL_SOCKET off",
			env: func(string) map[string]string { return map[string]string{"OBOL_SOCKET": "off"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortTempDir(t)
			m := tc.env(dir)
			getenv := func(k string) string { return m[k] }
			if tc.sock == "" {
				if _, err := New(Config{Getenv: getenv}); err == nil || !strings.Contains(err.Error(), "OBOL_SOCKET") {
					t.Fatalf("New = %v, want an error naming OBOL_SOCKET", err)
				}
				return
			}
			serve(t, filepath.Join(dir, tc.sock), func(ctx *fasthttp.RequestCtx) {
				ctx.SetStatusCode(418)
				ctx.SetBodyString("the stub")
			})
			c, _ := newClient(t, Config{Getenv: getenv})
			_, err := c.Request(context.Background(), "r/x", "d")
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != 418 {
				t.Fatalf("Request = %v; want the stub's 418 (the client dialed elsewhere)", err)
			}
		})
	}
}

func TestAgentRestartIsNotDegraded(t *testing.T) {
	a := startAgent(t, nil)
	c, _ := newClient(t, Config{Socket: a.sock})
	ctx := context.Background()
	if d, err := c.Request(ctx, "t/gcra", "d"); err != nil || d.Degraded {
		t.Fatalf("Request = %+v, %v", d, err)
	}
	// The agent restarts on the same socket: the client's kept-alive
	// connection is dead, and the request goes out again on a new one.
	a.stop()
	b := startAgentAt(t, a.sock, nil)
	for i := range 3 {
		if d, err := c.Request(ctx, "t/gcra", "d"); err != nil || d.Degraded {
			t.Fatalf("Request %d after the restart = %+v, %v", i, d, err)
		}
	}
	if n := b.count("/v1/request"); n != 3 {
		t.Errorf("the new agent served %d requests, want 3", n)
	}
}
