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
// at most 1000 × (1 + drift).
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
	bin := buildAgent(t, dir)
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
	// One window: not in a minute's last 15 s (the calls take a second or
	// two, a few more under the race detector).
	if s := time.Now().Second(); s > 45 {
		time.Sleep(time.Duration(61-s) * time.Second)
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
	if start.Truncate(time.Minute) != time.Now().Truncate(time.Minute) {
		t.Fatalf("the calls took %v and crossed a minute: the test's premise (one window) failed", took)
	}
	bound := int64(1000 * (1 + config.DefaultDrift))
	t.Logf("granted %d of 3000 in %v (limit 1000, at most %d)", granted.Load(), took.Round(time.Millisecond), bound)
	if g := granted.Load(); g > bound || g < 1000 {
		t.Fatalf("granted %d, want within [1000, %d]", g, bound)
	}
}
