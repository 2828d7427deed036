package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// diffTrace is the differential's trace: 8 seconds of 30 requests each.
var diffTrace = traceSpec{seed: 20260123, ticks: 8, perTick: 30}

// startPeerOrSkip builds envoyproxy/ratelimit and starts n instances of it,
// each on a Redis of its own, on the config directory under runtimeRoot;
// it skips the test, saying how to run it, where Redis or the module proxy
// is missing.
func startPeerOrSkip(t *testing.T, ctx context.Context, runtimeRoot string, n int) []*service {
	t.Helper()
	if testing.Short() {
		t.Skip("the differential builds envoyproxy/ratelimit and runs Redis (about a minute): run it without -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skipf("redis-server is not on PATH; to run: %s", howToRun)
	}
	dir := t.TempDir()
	bin, err := buildRatelimit(ctx, dir)
	if errors.Is(err, errUnavailable) {
		t.Skipf("envoyproxy/ratelimit cannot be built here (%v); to run: %s", firstLine(err.Error()), howToRun)
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []*service
	for i := range n {
		d := filepath.Join(dir, fmt.Sprint("peer", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		s, err := startRatelimit(ctx, bin, d, runtimeRoot)
		if errors.Is(err, errUnavailable) {
			t.Skipf("Redis cannot run here (%v); to run: %s", firstLine(err.Error()), howToRun)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.stop)
		out = append(out, s)
	}
	return out
}

// callerFor dials s over its Unix socket.
func callerFor(t *testing.T, s *service) caller {
	t.Helper()
	conn, err := dial("unix://" + s.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return caller{name: s.name, cl: rlsv3.NewRateLimitServiceClient(conn)}
}

// reportMismatches fails t with the first mismatches between two services.
func reportMismatches(t *testing.T, what string, trace []step, ms []mismatch) {
	t.Helper()
	if len(ms) == 0 {
		return
	}
	var b strings.Builder
	for i, m := range ms {
		if i == 40 {
			fmt.Fprintf(&b, "… and %d more\n", len(ms)-i)
			break
		}
		fmt.Fprintf(&b, "step %d (second %d) %s: %s: want %s, got %s\n", m.step, trace[m.step].tick, describe(trace[m.step].req), m.field, m.want, m.got)
	}
	t.Fatalf("%s: %d differences over %d requests:\n%s", what, len(ms), len(trace), b.String())
}

// TestRatelimitControl replays the trace against two envoyproxy/ratelimit
// instances, each with its own Redis, and requires identical replies: the
// control that shows the replay's alignment to the wall clock leaves no room
// for timing differences, so that any difference in TestDifferential is
// obol's.
func TestRatelimitControl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := t.TempDir()
	if _, err := writeConfig(root); err != nil {
		t.Fatal(err)
	}
	peers := startPeerOrSkip(t, ctx, root, 2)
	trace := makeTrace(diffTrace)
	start := time.Now()
	res, err := replay(ctx, []caller{callerFor(t, peers[0]), callerFor(t, peers[1])}, trace)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replayed %d requests in %v", len(trace), time.Since(start).Round(time.Millisecond))
	checkOutcomes(t, res.replies[0])
	reportMismatches(t, "envoyproxy/ratelimit against itself", trace, compareAll(res, 0, 1))
}

// checkOutcomes fails t unless the trace met both outcomes and many limits:
// a trace that never reaches a limit would compare nothing of interest.
func checkOutcomes(t *testing.T, replies []*rlsv3.RateLimitResponse) {
	t.Helper()
	ok, over, limited := decisionCounts(replies)
	t.Logf("reference replies: %d OK, %d OVER_LIMIT, %d statuses under a limit", ok, over, limited)
	if ok < len(replies)/10 || over < len(replies)/10 || limited < len(replies)/2 {
		t.Fatalf("the trace is not a useful comparison: %d OK, %d OVER_LIMIT, %d limited statuses of %d requests", ok, over, limited, len(replies))
	}
}

// startObolAgent builds obol's agent and starts it alone on the config
// directory cfgDir (see startObol).
func startObolAgent(t *testing.T, ctx context.Context, cfgDir string) *service {
	t.Helper()
	dir := t.TempDir()
	bin, err := buildAgent(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := startObol(ctx, bin, dir, cfgDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

// TestDifferential replays the trace against envoyproxy/ratelimit (on
// Redis) and obol's agent (built from ./cmd/agent, alone, default RLS
// options), both on the same config directory, and requires every
// reply to match: overall_code, and per status code, current_limit,
// limit_remaining and duration_until_reset (within a second).
func TestDifferential(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := t.TempDir()
	cfgDir, err := writeConfig(root)
	if err != nil {
		t.Fatal(err)
	}
	peer := startPeerOrSkip(t, ctx, root, 1)[0]
	obol := startObolAgent(t, ctx, cfgDir)
	trace := makeTrace(diffTrace)
	start := time.Now()
	res, err := replay(ctx, []caller{callerFor(t, peer), callerFor(t, obol)}, trace)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replayed %d requests in %v", len(trace), time.Since(start).Round(time.Millisecond))
	checkOutcomes(t, res.replies[0])
	reportMismatches(t, "obol against envoyproxy/ratelimit", trace, compareAll(res, 0, 1))
}
