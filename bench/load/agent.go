package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// agent.go builds the agent, writes its config, starts it and stops it; or
// attaches to one already running.

// Resource names of the config the generator writes.
const (
	defaultResources   = "bench/gcra,bench/tiers"
	defaultRSSResource = "bench/keys"
)

// agentConfig is the config the generator runs its own agent on:
//
//   - bench/gcra, a gcra bucket with a large burst (1000, refilled at 1000
//     per second): a domain is asked far less often than that, so it grants
//     everything, in every phase alike;
//   - bench/tiers, tiers of 1 per second with a burst to 10 per 5 s every
//     20 s: a domain asked more than about once a second is often refused,
//     so that decisions are a mix of grants and rejections;
//   - bench/keys, for the RSS measurement: a gcra bucket refilled at one
//     token an hour, so that every key driven into it stays tracked (a key
//     is dropped once its bucket is full again), with room for rssKeys keys.
func agentConfig(rssKeys int) string {
	maxKeys := max(2*rssKeys, 1000)
	return fmt.Sprintf(`# Written by bench/load: the agent's config under load.
namespaces:
  bench:
    allow_unconfigured: false
resources:
  bench/gcra:
    kind: gcra
    burst: 1000
    count: 1000
    period: 1s
  bench/tiers:
    kind: tiers
    tiers: "1,1,1,0,10,5,5,15"
    hard_limit: 100
  bench/keys:
    kind: gcra
    burst: 10
    count: 1
    period: 1h
    max_keys: %d
`, maxKeys)
}

// goTool returns the path of the go command.
func goTool() (string, error) {
	p, err := benchkit.GoTool()
	if err != nil {
		return "", fmt.Errorf("%w (it builds the agent; or attach with -agent-socket and -agent-pid)", err)
	}
	return p, nil
}

// buildAgent builds the agent into dir and returns the binary's path (a
// failed build is a *benchkit.BuildError). It must run inside the module.
func buildAgent(ctx context.Context, dir string) (string, error) {
	gobin, err := goTool()
	if err != nil {
		return "", err
	}
	return benchkit.BuildAgent(ctx, gobin, dir)
}

// child is a process the generator started: the agent or the floor, with
// the server it serves.
type child struct {
	server
	*benchkit.Child
}

// stop ends the process (benchkit.Child.Stop); a nil child, or one with no
// process, is stopped already.
func (c *child) stop() {
	if c == nil || c.Child == nil {
		return
	}
	c.Child.Stop()
}

// startAgent starts the agent binary on cfgFile, its socket in dir and its
// TCP listener on a free loopback port, and waits until it is ready. Its
// stderr's last 20 lines are kept (its stdout is dropped).
func startAgent(ctx context.Context, bin, dir, cfgFile string) (*child, error) {
	sock := filepath.Join(dir, "agent.sock")
	cmd := exec.Command(bin, "--config", cfgFile, "--socket", sock, "--http", "127.0.0.1:0")
	cmd.Stdout = io.Discard
	addr := make(chan string, 1)
	proc, err := benchkit.StartChild("agent", cmd, 20, func(line string) {
		if a, ok := startedAddr(line); ok {
			select {
			case addr <- a:
			default:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	c := &child{server: server{name: "agent", socket: sock, pid: proc.Pid()}, Child: proc}

	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	select {
	case c.http = <-addr:
	case <-c.Exited:
		return nil, fmt.Errorf("the agent exited at start (%s):\n%s", cmd.ProcessState, c.Logs)
	case <-deadline.C:
		c.stop()
		return nil, fmt.Errorf("the agent did not report its listeners within 20 s:\n%s", c.Logs)
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
	if err := waitReady(ctx, &c.server, 10*time.Second); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w\n%s", err, c.Logs)
	}
	return c, nil
}

// startedAddr returns the TCP address the agent logs when it has started.
func startedAddr(line string) (string, bool) { return benchkit.StartedField(line, "http") }

// get sends GET path to srv over its Unix socket and returns the status and
// body.
func get(srv *server, path string) (int, []byte, error) {
	hc, err := srv.client(false)
	if err != nil {
		return 0, nil, err
	}
	defer hc.CloseIdleConnections()
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://localhost" + path)
	if err := hc.DoTimeout(req, resp, clientTimeout); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), bytes.Clone(resp.Body()), nil
}

// waitReady polls GET /readyz until it answers 200, for at most limit.
func waitReady(ctx context.Context, srv *server, limit time.Duration) error {
	err := benchkit.Poll(ctx, limit, 50*time.Millisecond, func() error {
		status, body, err := get(srv, "/readyz")
		if err == nil && status != fasthttp.StatusOK {
			err = fmt.Errorf("status %d: %s", status, benchkit.Snippet(body))
		}
		return err
	})
	if te := (*benchkit.TimeoutError)(nil); errors.As(err, &te) {
		return fmt.Errorf("%s at %s not ready within %s: %v", srv.name, srv.socket, limit, te.Last)
	}
	return err
}

// goroutines returns the agent's goroutine count from the go_goroutines line
// of GET /metrics, when it serves one.
func goroutines(srv *server) (int64, bool) {
	status, body, err := get(srv, "/metrics")
	if err != nil || status != fasthttp.StatusOK {
		return 0, false
	}
	return metricValue(body, "go_goroutines")
}

// metricValue returns the value of an unlabelled metric in Prometheus text.
func metricValue(text []byte, name string) (int64, bool) {
	for line := range bytes.SplitSeq(text, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) >= 2 && string(f[0]) == name {
			v, err := strconv.ParseFloat(string(f[1]), 64)
			if err != nil {
				return 0, false
			}
			return int64(v), true
		}
	}
	return 0, false
}
