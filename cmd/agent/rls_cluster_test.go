package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/obol-dev/obol/config"
)

// TestRLSThreeAgentsConverge starts three agent binaries joined over
// loopback, behind one rate limit service config of 1000 a minute, and
// sends 1000 calls to each, at once, within one minute: the cluster grants
// at most 1000 × (1 + drift). The agents run on the wall clock moved on to
// the start of a minute as they start (OBOL_TEST_CLOCK_SHIFT, testclock.go),
// so the calls fall in one window of the service's whatever the wall clock
// reads.
func TestRLSThreeAgentsConverge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three agent binaries; run without -short")
	}
	dir := tempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(clusterYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	rdir := filepath.Join(dir, "rls")
	if err := os.Mkdir(rdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rdir, "api.yaml"), []byte("domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 1000}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildAgent(t, dir, "obol_testclock")
	// The agents' clock: the wall clock moved on to the next minute; the
	// test reads the same clock (serviceNow) to check the premise.
	now := time.Now()
	shift := now.Truncate(time.Minute).Add(time.Minute).Sub(now)
	t.Setenv("OBOL_TEST_CLOCK_SHIFT", shift.String())
	serviceNow := func() time.Time { return time.Now().Add(shift) }
	minute := serviceNow().Truncate(time.Minute)
	rls := func(name string) []string {
		return []string{"--rls-config", rdir, "--rls-socket", filepath.Join(dir, name+".rls.sock")}
	}
	a := startProc(t, bin, dir, "a", rls("a")...)
	b := startProc(t, bin, dir, "b", append(rls("b"), "--join", a.gossip)...)
	c := startProc(t, bin, dir, "c", append(rls("c"), "--join", a.gossip+","+b.gossip)...)
	nodes := []*proc{a, b, c}
	waitFor(t, 10*time.Second, "every node to see three live members", func() bool {
		for _, n := range nodes {
			alive := 0
			for _, p := range n.peers(t) {
				if p["state"] == "alive" {
					alive++
				}
			}
			if alive != 3 {
				return false
			}
		}
		return true
	})
	// One window: the agents started on a minute of their clock, and the
	// calls have 25 s (the context's) to end in it.
	if left := minute.Add(time.Minute).Sub(serviceNow()); left < 25*time.Second {
		t.Fatalf("the agents took %v to start and join, leaving %v of the window for the calls, want 25 s", time.Minute-left, left)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	var granted atomic.Int64
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b", "c"} {
		cc, err := grpc.NewClient("unix://"+filepath.Join(dir, name+".rls.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		cl := rlpb.NewRateLimitServiceClient(cc)
		wg.Go(func() {
			req := &rlpb.RateLimitRequest{Domain: "api", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "client", Value: "c1"}}}}}
			for range 1000 {
				resp, err := cl.ShouldRateLimit(ctx, req)
				if err != nil {
					t.Error(err)
					return
				}
				if resp.OverallCode == rlpb.RateLimitResponse_OK {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if end := serviceNow(); !end.Truncate(time.Minute).Equal(minute) {
		t.Fatalf("the calls took %v and ended at %v, past the minute of %v: the test's premise (one window) failed", took, end, minute)
	}
	bound := int64(1000 * (1 + config.DefaultDrift))
	t.Logf("granted %d of 3000 in %v (limit 1000, at most %d)", granted.Load(), took.Round(time.Millisecond), bound)
	if g := granted.Load(); g > bound || g < 1000 {
		t.Fatalf("granted %d, want within [1000, %d]", g, bound)
	}
}
