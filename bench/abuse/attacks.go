package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/obol-dev/obol/api"
	"github.com/obol-dev/obol/bench/internal/benchkit"
	"github.com/obol-dev/obol/config"
	timebase "github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/freeport"
	"github.com/obol-dev/obol/local"
)

// field returns a string field of a JSON reply.
func field(b []byte, name string) string {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	switch v := m[name].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// attackIDs: ids were a prefix and a shared counter. The victim holds
// copies and staged a transfer; the attacker knows its own ids and tries
// their neighbours (the old scheme's next and previous ids) and one-character
// changes of them. Held when no guess opens anything.
func attackIDs(ctx context.Context, a *agentProc) (string, error) {
	bg := context.Background()
	open := func() string { _, b, _ := a.post(bg, "/v1/sessions", `{"ttl_ms":60000}`); return field(b, "session") }
	victim, attacker := open(), open()
	var victimHolds []string
	for range 5 {
		_, b, _ := a.post(bg, "/v1/reserve", `{"resource":"demo/jobs","domain":"acme","copies":1,"session":"`+victim+`"}`)
		victimHolds = append(victimHolds, field(b, "hold"))
	}
	_, b, _ := a.post(bg, "/v1/reserve", `{"resource":"demo/jobs","domain":"evil","copies":1,"session":"`+attacker+`"}`)
	mine := field(b, "hold")
	if mine == "" || victimHolds[0] == "" {
		return "", fmt.Errorf("setup failed: %s", b)
	}
	guesses := neighbours(mine, 2000)
	guesses = append(guesses, neighbours(attacker, 2000)...)
	opened := 0
	tried := 0
	for _, g := range guesses {
		if ctx.Err() != nil {
			break
		}
		tried++
		if code, _, _ := a.post(bg, "/v1/release", `{"hold":"`+g+`","copies":1}`); code == 200 {
			opened++
		}
		if code, _, _ := a.post(bg, "/v1/seize", `{"transfer":"`+g+`","session":"`+attacker+`"}`); code == 200 {
			opened++
		}
	}
	fig := fmt.Sprintf("%d guesses, %d opened something; an id looks like %s", tried, opened, mine)
	if opened > 0 {
		return fig, errors.New("a guessed id worked")
	}
	return fig, nil
}

// neighbours returns ids near id: with its trailing counter (the old
// scheme, base 36 after the last '.') moved by ±k, and with one character
// changed.
func neighbours(id string, n int) []string {
	var out []string
	if i := strings.LastIndexByte(id, '.'); i >= 0 {
		if v, err := strconv.ParseInt(id[i+1:], 36, 64); err == nil {
			for k := int64(1); len(out) < n/2 && k < int64(n); k++ {
				out = append(out, id[:i+1]+strconv.FormatInt(v+k, 36))
				if v-k >= 0 {
					out = append(out, id[:i+1]+strconv.FormatInt(v-k, 36))
				}
			}
		}
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567abcdefghijklmnopqrstuvwxyz0123456789"
	for p := len(id) - 1; p >= 0 && len(out) < n; p-- {
		for _, c := range alphabet {
			if byte(c) != id[p] && len(out) < n {
				out = append(out, id[:p]+string(c)+id[p+1:])
			}
		}
	}
	return out
}

// attackCaps: sessions cost memory and lived a day; 1M of them took 270 MB.
// Held when the agent refuses new sessions at its cap with too_many, and
// its resident memory grows by less than 100 MB. It runs until the first
// refusal (or a minute), however long the phase.
func attackCaps(_ context.Context, a *agentProc) (string, error) {
	bg := context.Background()
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	rss0 := rssOf(a.cmd.Process.Pid)
	opened, refused := 0, 0
	var lastErr string
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				code, b, err := a.post(bg, "/v1/sessions", `{"ttl_ms":86400000}`)
				if err != nil {
					continue
				}
				mu.Lock()
				if code == 200 {
					opened++
				} else {
					refused++
					lastErr = string(b)
					if strings.Contains(string(b), "too_many") {
						lastErr = "too_many"
					}
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rss1 := rssOf(a.cmd.Process.Pid)
	fig := fmt.Sprintf("%d sessions opened, %d refused (%s); RSS %d → %d MB", opened, refused, lastErr, rss0>>20, rss1>>20)
	switch {
	case refused == 0:
		return fig, fmt.Errorf("no session was refused in %d (the cap was not reached: run longer with -d)", opened)
	case lastErr != "too_many":
		return fig, fmt.Errorf("refused with %q, not too_many", lastErr)
	case rss1-rss0 > 100<<20:
		return fig, fmt.Errorf("RSS grew by %d MB", (rss1-rss0)>>20)
	}
	return fig, nil
}

// rssOf returns a process's resident memory in bytes (0 if unknown).
func rssOf(pid int) int64 {
	st, err := benchkit.ReadStatus(pid)
	if err != nil {
		return 0
	}
	return st.RSSKiB << 10
}

// attackClock: a real wall clock cannot be stepped under a benchmark, so
// this runs the agent's handler code in this process on its time base over
// faked clocks: a gcra bucket emptied, the wall clock stepped back 1 h, a
// second later the bucket must have refilled; a session opened, the wall
// clock stepped forward 24 h, a second later it must still be alive.
func attackClock(ctx context.Context, _ *agentProc) (string, error) {
	start := time.Now()
	var mu sync.Mutex
	var elapsed, step time.Duration
	base := timebase.NewMonotonicFrom(start,
		func(time.Time) time.Duration { mu.Lock(); defer mu.Unlock(); return elapsed },
		func() time.Time { mu.Lock(); defer mu.Unlock(); return start.Add(elapsed + step) })
	srv := api.New(local.New(config.Default()), api.Options{Base: base, Logger: slog.New(slog.DiscardHandler)})
	dir, _ := os.MkdirTemp("", "obol-clock")
	defer os.RemoveAll(dir)
	ls, err := api.Listen(api.ListenConfig{Socket: filepath.Join(dir, "c.sock")})
	if err != nil {
		return "", err
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ls) }()
	defer func() { stop(); <-done }()
	c := &agentProc{client: unixClient(filepath.Join(dir, "c.sock"))}
	_ = benchkit.WaitSocket(context.Background(), filepath.Join(dir, "c.sock"), 500*time.Millisecond) // the requests below say if it did not come up
	bg := context.Background()
	c.post(bg, "/v1/request", `{"resource":"demo/export","domain":"d","copies":20}`)
	mu.Lock()
	step, elapsed = -time.Hour, time.Second
	mu.Unlock()
	_, b, _ := c.post(bg, "/v1/request", `{"resource":"demo/export","domain":"d","copies":20}`)
	back := field(b, "granted")
	_, b, _ = c.post(bg, "/v1/sessions", `{"ttl_ms":30000}`)
	sid := field(b, "session")
	mu.Lock()
	step, elapsed = 24*time.Hour, 2*time.Second
	mu.Unlock()
	code, _, _ := c.post(bg, "/v1/sessions/"+sid+"/keepalive", "")
	<-ctx.Done()
	fig := fmt.Sprintf("after 1 h back: granted %s of 20; after 24 h forward: keepalive %d", back, code)
	if back != "20" || code != 200 {
		return fig, errors.New("a clock step moved a decision")
	}
	return fig, nil
}

// attackLogs: each connection dropped mid-headers logged fasthttp's raw
// buffer; 130k connections wrote 78 MiB in 5 s. Held when the agent's log
// grows by less than 64 KB however many connections are dropped.
func attackLogs(ctx context.Context, a *agentProc) (string, error) {
	before := a.stderr.bytes()
	junk := "GET /v1/state HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Junk: "+strings.Repeat("j", 100)+"\r\n", 130)
	var n int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := net.Dial("unix", a.socket)
				if err != nil {
					continue
				}
				c.Write([]byte(junk))
				c.Close()
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // the last lines
	grew := a.stderr.bytes() - before
	fig := fmt.Sprintf("%d connections dropped mid-headers, log grew %d bytes", n, grew)
	if grew > 64<<10 {
		return fig, fmt.Errorf("the log grew by %d KB", grew>>10)
	}
	return fig, nil
}

// attackSmuggle: a request with both framings was served by its chunked
// one. Held when it is refused with 400 and the connection is closed before
// the second request is served.
func attackSmuggle(ctx context.Context, a *agentProc) (string, error) {
	tries, bad := 0, 0
	for ctx.Err() == nil {
		c, err := net.Dial("unix", a.socket)
		if err != nil {
			return "", err
		}
		body := `{"resource":"demo/export","domain":"d"}`
		fmt.Fprintf(c, "POST /v1/request HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", len(body), body)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		out, _ := io.ReadAll(bufio.NewReader(c))
		c.Close()
		tries++
		if !strings.HasPrefix(string(out), "HTTP/1.1 400") || strings.Count(string(out), "HTTP/1.1 ") != 1 {
			bad++
		}
		time.Sleep(10 * time.Millisecond)
	}
	fig := fmt.Sprintf("%d tries, %d served", tries, bad)
	if bad > 0 {
		return fig, errors.New("a request with both framings was served")
	}
	return fig, nil
}

// exitOf runs the agent binary with args until it exits (or d passes) and
// returns its exit code and log.
func exitOf(bin string, d time.Duration, args ...string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		return -1, err.Error()
	}
	return 0, string(out)
}

// attackGossip: gossip without a key was open: a rogue agent joined and took
// all 100 global copies. Here two agents share a key on loopback; a rogue
// agent without it joins them and reserves every copy of demo/jobs; the
// victim must not count them. Then an agent is asked to gossip on every
// interface without a key: it must refuse to start.
func attackGossip(ctx context.Context, a *agentProc) (string, error) {
	keyFile := filepath.Join(a.dir, "gossip.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		return "", err
	}
	p1, _ := freeport.Loopback()
	p2, _ := freeport.Loopback()
	victim, err := startAgent(a.bin, a.dir, "--node-name", "victim", "--gossip-bind", fmt.Sprintf("127.0.0.1:%d", p1), "--gossip-secret-file", keyFile)
	if err != nil {
		return "", err
	}
	defer victim.stop()
	rogue, err := startAgent(a.bin, a.dir, "--node-name", "rogue", "--gossip-bind", fmt.Sprintf("127.0.0.1:%d", p2), "--join", fmt.Sprintf("127.0.0.1:%d", p1))
	if err != nil {
		return "", err
	}
	defer rogue.stop()
	bg := context.Background()
	_, b, _ := rogue.post(bg, "/v1/sessions", `{"ttl_ms":60000}`)
	sid := field(b, "session")
	_, b, _ = rogue.post(bg, "/v1/reserve", `{"resource":"demo/jobs","domain":"acme","copies":5,"session":"`+sid+`"}`)
	for i := range 20 {
		rogue.post(bg, "/v1/reserve", `{"resource":"demo/jobs","domain":"d`+strconv.Itoa(i)+`","copies":5,"session":"`+sid+`"}`)
	}
	time.Sleep(3 * time.Second) // several sync intervals and gossip rounds: what would have arrived has
	_, vb, _ := victim.post(bg, "/v1/sessions", `{"ttl_ms":60000}`)
	vsid := field(vb, "session")
	_, res, _ := victim.post(bg, "/v1/reserve", `{"resource":"demo/jobs","domain":"acme","copies":5,"session":"`+vsid+`"}`)
	req, _ := http.NewRequest("GET", "http://obol/v1/peers", nil)
	resp, err := victim.client.Do(req)
	peers := ""
	if err == nil {
		pb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		peers = string(pb)
	}
	code, out := exitOf(a.bin, 10*time.Second, "--check-config", os.DevNull, "--gossip-bind", "0.0.0.0:7946", "--join", "127.0.0.1:1")
	<-ctx.Done()
	fig := fmt.Sprintf("victim granted %s of 5 to acme with global holds %s; rogue in victim's peers: %v; an agent asked to gossip on 0.0.0.0 without a key exits %d", field(res, "granted"), field(res, "global_holds"), strings.Contains(peers, "rogue"), code)
	switch {
	case field(res, "granted") != "5" || field(res, "global_holds") != "5":
		return fig, errors.New("the rogue's holds were counted")
	case strings.Contains(peers, "rogue"):
		return fig, errors.New("the rogue is a member")
	case code != 2 || !strings.Contains(out, "needs a key"):
		return fig, fmt.Errorf("gossip on 0.0.0.0 without a key was not refused: %s", out)
	}
	return fig, nil
}

// attackNames: the default name was the hostname, so two agents on one host
// shared it and corrupted each other's counts. Here a second agent starts
// under a name already in the mesh; it must stop within the first minute,
// naming the flag, and the first must keep serving.
func attackNames(ctx context.Context, a *agentProc) (string, error) {
	p1, _ := freeport.Loopback()
	p2, _ := freeport.Loopback()
	first, err := startAgent(a.bin, a.dir, "--node-name", "same", "--gossip-bind", fmt.Sprintf("127.0.0.1:%d", p1))
	if err != nil {
		return "", err
	}
	defer first.stop()
	start := time.Now()
	code, out := exitOf(a.bin, 90*time.Second, "--socket", filepath.Join(a.dir, "second.sock"), "--http", "off",
		"--node-name", "same", "--gossip-bind", fmt.Sprintf("127.0.0.1:%d", p2), "--join", fmt.Sprintf("127.0.0.1:%d", p1))
	took := time.Since(start)
	alive, _, _ := first.post(context.Background(), "/v1/request", `{"resource":"demo/export","domain":"d","copies":0}`)
	<-ctx.Done()
	fig := fmt.Sprintf("the second agent exited %d after %v; the first answers %d", code, took.Round(time.Millisecond), alive)
	switch {
	case code != 1 || !strings.Contains(out, "unique --node-name"):
		return fig, fmt.Errorf("the second agent was not stopped: %.300s", out)
	case alive != 200:
		return fig, errors.New("the first agent stopped answering")
	}
	return fig, nil
}

// attackToken: a public listener exposed reload, config, state, session
// deletion and simulate with no authentication. An agent with a token asks
// for it on every listener here (--auth-everywhere, since a benchmark may
// only reach loopback): requests without it, or with a wrong one, are 401;
// with it, 200. A public listener without a token is refused at start.
func attackToken(ctx context.Context, a *agentProc) (string, error) {
	tokenFile := filepath.Join(a.dir, "token")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		return "", err
	}
	guarded, err := startAgent(a.bin, a.dir, "--auth-token-file", tokenFile, "--auth-everywhere")
	if err != nil {
		return "", err
	}
	defer guarded.stop()
	codes := map[string]int{}
	for _, tc := range []struct{ name, method, path, auth string }{
		{"config, no token", "GET", "/v1/config", ""},
		{"reload, no token", "POST", "/v1/config/reload", ""},
		{"delete a session, wrong token", "DELETE", "/v1/sessions/s-X", "Bearer wrong"},
		{"simulate, no token", "POST", "/v1/simulate", ""},
		{"config, token", "GET", "/v1/config", "Bearer 0123456789abcdef0123456789abcdef"},
	} {
		req, _ := http.NewRequest(tc.method, "http://obol"+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := guarded.client.Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		codes[tc.name] = resp.StatusCode
	}
	code, out := exitOf(a.bin, 10*time.Second, "--check-config", os.DevNull, "--http", "0.0.0.0:7070", "--http-public")
	<-ctx.Done()
	fig := fmt.Sprintf("%v; a public listener without a token exits %d", codes, code)
	for name, c := range codes {
		if want := 401; strings.HasSuffix(name, ", token") {
			if c != 200 {
				return fig, fmt.Errorf("%s: %d", name, c)
			}
		} else if c != want {
			return fig, fmt.Errorf("%s: %d, want 401", name, c)
		}
	}
	if code != 2 || !strings.Contains(out, "needs --auth-token-file") {
		return fig, fmt.Errorf("a public listener without a token was not refused: %.300s", out)
	}
	return fig, nil
}

// attackHoard: one client that never completed its tickets filled an
// adaptive window for everyone. An agent runs an adaptive resource with
// client_share 0.5 and a window of 20; this process admits until refused
// and completes nothing; another process (this program run again) must
// still be admitted.
func attackHoard(ctx context.Context, a *agentProc) (string, error) {
	cfg := filepath.Join(a.dir, "hoard.yaml")
	if err := os.WriteFile(cfg, []byte("resources:\n  demo/hoard: {kind: adaptive, min_window: 1, max_window: 20, timeout: 30s, client_share: 0.5}\n  demo/export: {kind: gcra, burst: 20, count: 20, period: 1s}\n"), 0o600); err != nil {
		return "", err
	}
	agent, err := startAgent(a.bin, a.dir, "--config", cfg)
	if err != nil {
		return "", err
	}
	defer agent.stop()
	held := 0
	var last string
	for range 30 {
		_, b, err := agent.post(context.Background(), "/v1/admit", `{"resource":"demo/hoard"}`)
		if err != nil {
			return "", err
		}
		if field(b, "admitted") != "true" && !strings.Contains(string(b), `"admitted":true`) {
			last = string(b)
			break
		}
		held++
	}
	out, err := exec.Command(os.Args[0], "-admit-once", agent.socket).Output()
	<-ctx.Done()
	fig := fmt.Sprintf("the hoarder got %d places, then %s; another process: %s", held, strings.TrimSpace(last), strings.TrimSpace(string(out)))
	switch {
	case err != nil:
		return fig, fmt.Errorf("the other process: %v", err)
	case held != 10 || !strings.Contains(last, `"client_share":true`):
		return fig, errors.New("the hoarder was not held to half the window")
	case !strings.Contains(string(out), `"admitted":true`):
		return fig, errors.New("another process was not admitted")
	}
	return fig, nil
}
