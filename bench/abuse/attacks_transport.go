package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/obol-dev/obol/bench/internal/benchkit"
	"github.com/obol-dev/obol/internal/freeport"
	"github.com/obol-dev/obol/internal/netguard"
)

// attacks_transport.go: the transport attacks of the second red team.
//
//   - fds: 19,995 connections to --rls-http, each sending headers and then
//     a body byte a second, took every descriptor of the agent: its status
//     listener's accept failed with EMFILE, which stopped the agent's API
//     while the process lived on, /healthcheck still OK. Replayed: as many
//     stalled connections as this process's descriptor limit allows (up to
//     20,000), half to --rls-http and half to the HTTP API. Held when the
//     agent lives, keeps serving its socket (the probe), holds at most its
//     cap on each listener and never nears its descriptor limit.
//   - streams: 200,000 header-only streams on one connection to
//     --rls-grpc (about 4 MB) made 148k goroutines and 2.4 GB RSS.
//     Replayed: 200,000 such streams, on one connection and then on a new
//     one each time the agent closes the last. Held when the server
//     refuses the streams past its limit and the agent's goroutines and
//     RSS stay bounded, during and after.

func init() {
	attacks = append(attacks,
		attack{name: "fds", what: "stalled connections (headers, then a body byte a second) to --rls-http and the HTTP API, as many as this process's descriptor limit allows up to 20,000",
			run: attackFDs, agentArgs: rlsAgentArgs},
		attack{name: "streams", what: "200,000 header-only HTTP/2 streams on one connection to --rls-grpc (then on a new one each time the agent closes the last)",
			run: attackStreams, agentArgs: rlsAgentArgs})
}

// rlsAgentArgs turns the rate limit service on, with its gRPC and HTTP
// listeners on free loopback ports and a config directory of one domain.
func rlsAgentArgs(dir string) ([]string, error) {
	cfg := filepath.Join(dir, "rls-transport")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		return nil, err
	}
	yaml := "domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"
	if err := os.WriteFile(filepath.Join(cfg, "edge.yaml"), []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	g, err := freeport.Loopback()
	if err != nil {
		return nil, err
	}
	h, err := freeport.Loopback()
	if err != nil {
		return nil, err
	}
	return []string{"--rls-config", cfg, "--rls-grpc", fmt.Sprintf("127.0.0.1:%d", g), "--rls-http", fmt.Sprintf("127.0.0.1:%d", h)}, nil
}

// argOf returns the value of a flag the agent was started with.
func argOf(a *agentProc, name string) string {
	for i, s := range a.cmd.Args {
		if s == name && i+1 < len(a.cmd.Args) {
			return a.cmd.Args[i+1]
		}
	}
	return ""
}

// startedField returns a field of the agent's "obol agent started" line.
// It waits up to 5 s for the line; "" when it does not come.
func startedField(a *agentProc, name string) string {
	var v string
	_ = benchkit.Poll(context.Background(), 5*time.Second, 20*time.Millisecond, func() error {
		for _, l := range strings.Split(a.stderr.String(), "\n") {
			var ok bool
			if v, ok = benchkit.StartedField(l, name); ok {
				return nil
			}
		}
		return errors.New("no started line yet")
	})
	return v
}

// metrics returns the agent's /metrics series whose names start with one
// of prefixes, by their full series text.
func metrics(a *agentProc, prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	resp, err := a.client.Get("http://obol/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		l := sc.Text()
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				if i := strings.LastIndexByte(l, ' '); i > 0 {
					v, _ := strconv.ParseFloat(l[i+1:], 64)
					out[l[:i]] = v
				}
			}
		}
	}
	return out
}

// fdsOf counts a process's open descriptors.
func fdsOf(pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(es)
}

// nofileOf returns a process's soft descriptor limit (0 if unknown).
func nofileOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Max open files") {
			f := strings.Fields(strings.TrimPrefix(l, "Max open files"))
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}

// alive reports whether the agent process still runs.
func alive(a *agentProc) bool {
	return a.cmd.Process.Signal(syscall.Signal(0)) == nil
}

func attackFDs(ctx context.Context, a *agentProc) (string, error) {
	pid := a.cmd.Process.Pid
	targets := []string{argOf(a, "--rls-http"), startedField(a, "http")}
	if targets[0] == "" || targets[1] == "" {
		return "", fmt.Errorf("setup: no --rls-http or HTTP address (%q)", targets)
	}
	var rl syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	n := min(20000, int(rl.Cur)-500) // what this process can hold, with room for its own files
	agentLimit := nofileOf(pid)

	var mu sync.Mutex
	var live []net.Conn
	var dialed, refusedAtOnce atomic.Int64
	var wg sync.WaitGroup
	const dialers = 8
	for w := range dialers {
		wg.Go(func() {
			for i := w; i < n && ctx.Err() == nil; i += dialers {
				addr := targets[i%2]
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					continue
				}
				dialed.Add(1)
				if _, err := fmt.Fprintf(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
					refusedAtOnce.Add(1)
					c.Close()
					continue
				}
				mu.Lock()
				live = append(live, c)
				mu.Unlock()
			}
		})
	}
	// A byte a second on each connection still open, each at its own
	// phase of the second (a tenth of them every 100 ms), as clients that
	// each send on their own clock do; the agent's descriptors are counted
	// meanwhile.
	peakFDs := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
loop:
	for slice := 0; ; slice = (slice + 1) % 10 {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		peakFDs = max(peakFDs, fdsOf(pid))
		mu.Lock()
		kept := live[:0]
		for i, c := range live {
			if i%10 == slice {
				c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				if _, err := c.Write([]byte(" ")); err != nil {
					c.Close()
					continue
				}
			}
			kept = append(kept, c)
		}
		live = kept
		mu.Unlock()
	}
	wg.Wait()
	peakFDs = max(peakFDs, fdsOf(pid))
	m := metrics(a, "obol_listener_")
	mu.Lock()
	held := len(live)
	for _, c := range live {
		c.Close()
	}
	mu.Unlock()
	ok := alive(a)
	fig := fmt.Sprintf("%d connections dialed (limit here %d), %d still open at the end; rls_http open %v of %v (refused %v), http open %v of %v (refused %v); agent descriptors peak %d of %d",
		dialed.Load(), rl.Cur, held,
		m[`obol_listener_connections{listener="rls_http"}`], m[`obol_listener_max_connections{listener="rls_http"}`], m[`obol_listener_refused_connections_total{listener="rls_http"}`],
		m[`obol_listener_connections{listener="http"}`], m[`obol_listener_max_connections{listener="http"}`], m[`obol_listener_refused_connections_total{listener="http"}`],
		peakFDs, agentLimit)
	switch {
	case !ok:
		return fig, errors.New("the agent died")
	case len(m) == 0:
		return fig, errors.New("the agent's /metrics did not answer on its socket")
	case agentLimit > 0 && peakFDs > agentLimit*3/4:
		return fig, fmt.Errorf("the agent held %d descriptors of its %d", peakFDs, agentLimit)
	case m[`obol_listener_connections{listener="rls_http"}`] > m[`obol_listener_max_connections{listener="rls_http"}`]:
		return fig, errors.New("rls_http holds more than its cap")
	case dialed.Load() < int64(n)/2:
		return fig, fmt.Errorf("only %d of %d connections dialed: the attack did not run in full (longer -d)", dialed.Load(), n)
	}
	return fig, nil
}

// streamsSent is how many header-only streams the streams attack opens.
const streamsSent = 200_000

// h2flood is one connection of the streams attack.
type h2flood struct {
	refused, ended atomic.Int64
	goaway         atomic.Value
}

// flood opens one connection to addr and sends up to n header-only
// streams on it, until the server closes it or ctx ends; it returns how
// many it sent. After the sending it calls held (the streams the server
// took are still open) and then closes the connection.
func (h *h2flood) flood(ctx context.Context, addr string, n int, held func()) (int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	lw := &lockedWriter{w: c}
	if _, err := lw.Write([]byte(http2.ClientPreface)); err != nil {
		return 0, err
	}
	wr := http2.NewFramer(lw, nil)
	if err := wr.WriteSettings(); err != nil {
		return 0, err
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{":authority", "x"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	// The reader drains the server's frames (it answers each stream) and
	// acknowledges its settings.
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		rd := http2.NewFramer(nil, c)
		ack := http2.NewFramer(lw, nil)
		for {
			f, err := rd.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = ack.WriteSettingsAck()
				}
			case *http2.RSTStreamFrame:
				if f.ErrCode == http2.ErrCodeRefusedStream {
					h.refused.Add(1)
				} else {
					h.ended.Add(1)
				}
			case *http2.HeadersFrame:
				if f.StreamEnded() {
					h.ended.Add(1)
				}
			case *http2.GoAwayFrame:
				h.goaway.Store(f.ErrCode.String())
			}
		}
	}()
	sent := 0
	for ; sent < n && ctx.Err() == nil; sent++ {
		if err := wr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*sent + 1), BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			break
		}
	}
	if held != nil {
		held()
	}
	c.Close()
	<-readDone
	return sent, nil
}

func attackStreams(ctx context.Context, a *agentProc) (string, error) {
	pid := a.cmd.Process.Pid
	addr := argOf(a, "--rls-grpc")
	g0 := metrics(a, "go_goroutines")["go_goroutines"]
	rss0 := rssOf(pid)
	var h h2flood
	start := time.Now()
	sent, conns := 0, 0
	var gDuring float64
	var peakRSS int64
	// One connection, then a new one each time the server closes it,
	// until streamsSent are sent (or the phase ends).
	for sent < streamsSent && ctx.Err() == nil {
		sample := conns%10 == 0
		n, err := h.flood(ctx, addr, streamsSent-sent, func() {
			// Streams held now (up to the server's limit per
			// connection): the goroutines while the connection is open.
			// Read on every tenth connection only: a scrape of the
			// agent's metrics is work of its own (about a millisecond
			// of gathering), which on every connection moved the
			// probe's p99 more than the streams did.
			peakRSS = max(peakRSS, rssOf(pid))
			if sample {
				gDuring = max(gDuring, metrics(a, "go_goroutines")["go_goroutines"])
			}
		})
		if err != nil {
			return "", fmt.Errorf("setup: %v", err)
		}
		sent += n
		conns++
	}
	took := time.Since(start)
	// After: the streams' goroutines go with the connection.
	var gAfter float64
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		gAfter = metrics(a, "go_goroutines")["go_goroutines"]
		if gAfter < g0+50 || time.Now().After(deadline) {
			break
		}
	}
	rssAfter := rssOf(pid)
	ga, _ := h.goaway.Load().(string)
	fig := fmt.Sprintf("%d streams sent in %v on %d connections (each closed by the agent past %d refused streams): %d refused, %d ended by the server%s; agent goroutines %.0f → %.0f during → %.0f after; RSS %d → %d MB peak → %d MB after",
		sent, took.Round(time.Millisecond), conns, netguard.MaxRefusedStreams, h.refused.Load(), h.ended.Load(), map[bool]string{true: ", GOAWAY " + ga}[ga != ""],
		g0, gDuring, gAfter, rss0>>20, peakRSS>>20, rssAfter>>20)
	switch {
	case !alive(a):
		return fig, errors.New("the agent died")
	case gDuring-g0 > 1000:
		return fig, fmt.Errorf("the agent's goroutines grew by %.0f", gDuring-g0)
	case gAfter-g0 > 100:
		return fig, fmt.Errorf("%.0f goroutines more than before stay after the connection closed", gAfter-g0)
	case peakRSS-rss0 > 100<<20:
		return fig, fmt.Errorf("RSS grew by %d MB", (peakRSS-rss0)>>20)
	}
	return fig, nil
}

// lockedWriter serializes the writes of two framers (each writes a frame
// in one Write).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
