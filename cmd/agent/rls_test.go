package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/obol-dev/obol/internal/await"
	"github.com/obol-dev/obol/internal/freeport"
)

const rlsYAML = `domain: edge
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: %d}
`

func writeRLS(t *testing.T, dir string, limit string) {
	t.Helper()
	tmp := filepath.Join(dir, ".edge.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(strings.Replace(rlsYAML, "%d", limit, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "edge.yaml")); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	p, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p)
}

// The agent serves Envoy's rate limit service on its socket and TCP port,
// /json and /healthcheck, its metrics, reloads its directory (a bad file
// is refused, the old config kept), and turns unhealthy on stop.
func TestRunRLS(t *testing.T) {
	dir := tempDir(t)
	cfgDir := filepath.Join(dir, "rls")
	if err := os.Mkdir(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeRLS(t, cfgDir, "100")
	sock := filepath.Join(dir, "obol.sock")
	rsock := filepath.Join(dir, "rls.sock")
	grpcAddr, httpAddr := freePort(t), freePort(t)
	a := startAgent(t, []string{"--socket", sock, "--http", "off", "--rls-config", cfgDir, "--rls-socket", rsock,
		"--rls-grpc", grpcAddr, "--rls-http", httpAddr, "--rls-headers", "draft03", "--drain-timeout", "1s"}, noEnv, sock)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "client", Value: "c"}}}}}
	call := func(target string) *rlpb.RateLimitResponse {
		t.Helper()
		cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		resp, err := rlpb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		return resp
	}
	if r := call("unix://" + rsock); r.Statuses[0].LimitRemaining != 99 || r.ResponseHeadersToAdd[0].Value != "100, 100;w=3600" {
		t.Fatalf("over the socket: %v", r)
	}
	if r := call(grpcAddr); r.Statuses[0].LimitRemaining != 98 {
		t.Fatalf("over TCP: %v", r)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Post("http://"+httpAddr+"/json", "application/json", strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"client","value":"c"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"limitRemaining":97`)) {
		t.Fatalf("/json: %d %s", resp.StatusCode, body)
	}
	m, err := unixClient(sock).Get("http://obol/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(m.Body)
	m.Body.Close()
	if !bytes.Contains(body, []byte(`ratelimit_service_rate_limit_total_hits{domain="edge",key="edge.client"} 3`)) {
		t.Fatalf("/metrics lacks the rate limit service's total_hits of 3:\n%s", grepLines(string(body), "ratelimit_"))
	}

	// A bad file is refused, the old config stays; a good one is loaded.
	if err := os.WriteFile(filepath.Join(cfgDir, "bad.yaml"), []byte("domain: x\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.stderr.Wait(t, 10*time.Second, "fortnight")
	if r := call("unix://" + rsock); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 100 {
		t.Fatalf("after a bad file: %v", r)
	}
	os.Remove(filepath.Join(cfgDir, "bad.yaml"))
	writeRLS(t, cfgDir, "7")
	// Each reload is logged once the new config is in force: the check
	// runs again on each line the agent logs.
	await.Until(t, 10*time.Second, "the limit of 7 in force", &a.stderr.Signal, func() bool {
		return strings.Contains(a.stderr.String(), "rate limit service config reloaded") &&
			call("unix://" + rsock).Statuses[0].CurrentLimit.GetRequestsPerUnit() == 7
	})

	// Stopping: the health turns unhealthy before the listeners close.
	cc, err := grpc.NewClient("unix://"+rsock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	health := healthpb.NewHealthClient(cc)
	if h, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"}); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	// The health service's Watch sends each change of the status: the
	// test waits on it. The stream ends once it has said NOT_SERVING, so
	// that the drain does not wait for it.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch, err := health.Watch(wctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch: %v %v, want SERVING first", h, err)
	}
	a.cancel()
	h, err := watch.Recv()
	stopWatch()
	if err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health watch after the stop began: %v %v, want NOT_SERVING while still serving", h, err)
	}
	if err := a.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// rlsWaitFor polls cond for up to 10 s. It is for what the agent shows only
// in its replies and metrics (the health service, the listeners' figures):
// no event crosses to the test to say they changed.
func rlsWaitFor(t *testing.T, cond func() bool) {
	t.Helper()
	await.Poll(t, 10*time.Second, "the condition", cond)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestRLSFlags(t *testing.T) {
	dir := tempDir(t)
	cfgDir := filepath.Join(dir, "rls")
	if err := os.Mkdir(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeRLS(t, cfgDir, "5")
	badDir := filepath.Join(dir, "bad")
	if err := os.Mkdir(badDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(badDir, "a.yaml"), []byte("domain: a\ndescriptors:\n  - key: \"\"\n  - key: k\n    rate_limit: {unit: minute, unlimited: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "obol.yaml")
	if err := os.WriteFile(good, []byte("agent: {http: off}\nresources:\n  a/g: {kind: gcra, burst: 1, count: 1, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"summary", []string{"--check-config", good, "--rls-config", cfgDir, "--rls-socket", filepath.Join(dir, "r.sock")}, nil, 0,
			"rate limit service: " + cfgDir + " (1 domain, 1 limit), grpc socket " + filepath.Join(dir, "r.sock") + ", grpc off, http off"},
		{"from the environment", []string{"--check-config", good}, map[string]string{"OBOL_RLS_CONFIG": cfgDir, "OBOL_RLS_GRPC": "127.0.0.1:8081"}, 0, "grpc 127.0.0.1:8081"},
		{"no listener", []string{"--check-config", good, "--rls-config", cfgDir}, nil, 2, "give --rls-socket or --rls-grpc"},
		{"listener without config", []string{"--check-config", good, "--rls-grpc", "127.0.0.1:1"}, nil, 2, "need --rls-config"},
		{"public address refused", []string{"--check-config", good, "--rls-config", cfgDir, "--rls-grpc", "0.0.0.0:8081"}, nil, 2, "--rls-public"},
		{"public address allowed", []string{"--check-config", good, "--rls-config", cfgDir, "--rls-grpc", "0.0.0.0:8081", "--rls-public"}, nil, 0, "grpc 0.0.0.0:8081"},
		{"bad headers", []string{"--check-config", good, "--rls-config", cfgDir, "--rls-grpc", "127.0.0.1:1", "--rls-headers", "draft99"}, nil, 2, `got "draft99"`},
		{"bad env bool", []string{"--check-config", good, "--rls-config", cfgDir, "--rls-grpc", "127.0.0.1:1"}, map[string]string{"OBOL_RLS_SHADOW_MODE": "maybe"}, 2, "OBOL_RLS_SHADOW_MODE"},
		{"every problem of a bad directory", []string{"--check-config", good, "--rls-config", badDir, "--rls-grpc", "127.0.0.1:1"}, nil, 2,
			"descriptor has empty key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), tc.args, envOf(tc.env), &out, &errb)
			if code := exitCode(err); code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %s; stderr %s", code, tc.code, out.String(), errb.String())
			}
			if all := out.String() + errb.String(); !strings.Contains(all, tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, all)
			}
			if tc.name == "every problem of a bad directory" && !strings.Contains(errb.String(), "should not specify rate limit unit when unlimited") {
				t.Fatalf("not every problem listed:\n%s", errb.String())
			}
		})
	}
}

// kubeletDir returns a directory laid out as kubelet lays out a
// ConfigMap volume, edge.yaml -> ..data/edge.yaml and ..data -> ..v1, with
// ..v1/edge.yaml holding v1 and ..v2/edge.yaml v2 (for a swap), and a
// function writing a file.
func kubeletDir(t *testing.T, v1, v2 string) (string, func(path, content string)) {
	t.Helper()
	dir := tempDir(t)
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"..v1", "..v2"} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "..v1", "edge.yaml"), v1)
	write(filepath.Join(dir, "..v2", "edge.yaml"), v2)
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "edge.yaml"), filepath.Join(dir, "edge.yaml")); err != nil {
		t.Fatal(err)
	}
	return dir, write
}

// rlsDigest changes with every way the directory's content changes: an
// edit in place, a new file, and a ConfigMap's ..data symlink swap; not
// with files it does not read.
func TestRLSDigest(t *testing.T) {
	dir, write := kubeletDir(t, "domain: edge\n", "domain: edge2\n")
	digest := func() [32]byte {
		t.Helper()
		d, _, err := rlsDigest(dir)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d0 := digest()
	write(filepath.Join(dir, "notes.txt"), "ignored")
	if digest() != d0 {
		t.Fatal("a file the service does not read changed the digest")
	}
	// The swap: a new ..data link renamed over the old one.
	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	d1 := digest()
	if d1 == d0 {
		t.Fatal("the ..data swap left the digest unchanged")
	}
	write(filepath.Join(dir, "other.yml"), "domain: other\n")
	if digest() == d1 {
		t.Fatal("a new file left the digest unchanged")
	}
}

// statRLS's stamp stays the same while nothing changes, and changes with
// an edit (same size, a later modification time), a replacement by rename,
// a new file, a removed one and a ConfigMap's ..data swap; not with files
// the service does not read. An empty stamp is never the same.
func TestRLSStamp(t *testing.T) {
	dir, write := kubeletDir(t, "domain: edge\n", "domain: edge\n") // ..v2's of the same size
	stamp := func() rlsStamp {
		t.Helper()
		st, err := statRLS(dir)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if (rlsStamp{}).same(rlsStamp{}) {
		t.Fatal("empty stamps are the same")
	}
	s0 := stamp()
	if !s0.same(stamp()) {
		t.Fatal("an unchanged directory changed its stamp")
	}
	write(filepath.Join(dir, "notes.txt"), "ignored")
	if !s0.same(stamp()) {
		t.Fatal("a file the service does not read changed the stamp")
	}
	steps := []struct {
		what string
		do   func()
	}{
		{"the ..data swap", func() {
			if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
		}},
		{"an edit in place keeping the size", func() {
			p := filepath.Join(dir, "..v2", "edge.yaml")
			write(p, "domain: edgf\n")
			later := time.Now().Add(time.Hour) // coarse clocks: make the time differ
			if err := os.Chtimes(p, later, later); err != nil {
				t.Fatal(err)
			}
		}},
		{"a replacement by rename", func() {
			write(filepath.Join(dir, "new.tmp"), "domain: edgg\n")
			if err := os.Rename(filepath.Join(dir, "new.tmp"), filepath.Join(dir, "..v2", "edge.yaml")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a new file", func() { write(filepath.Join(dir, "other.yml"), "domain: other\n") }},
		{"a removed file", func() {
			if err := os.Remove(filepath.Join(dir, "other.yml")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	prev := s0
	for _, st := range steps {
		st.do()
		now := stamp()
		if now.same(prev) {
			t.Fatalf("%s left the stamp unchanged", st.what)
		}
		prev = now
	}
}

// The watcher reads and parses a large config (over rlsLowprioBytes) with
// lowprio.Run, which gives it one more P while it runs, and a small one at
// once.
func TestRLSWatcherWorkOffDecisions(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	var got int
	offDecisions(rlsLowprioBytes, func() { got = runtime.GOMAXPROCS(0) })
	if got != n {
		t.Errorf("a config of %d bytes: GOMAXPROCS %d while read, want %d (at once)", rlsLowprioBytes, got, n)
	}
	offDecisions(rlsLowprioBytes+1, func() { got = runtime.GOMAXPROCS(0) })
	if got != n+1 {
		t.Errorf("a config of %d bytes: GOMAXPROCS %d while read, want %d (lowprio.Run)", rlsLowprioBytes+1, got, n+1)
	}
	if after := runtime.GOMAXPROCS(0); after != n {
		t.Errorf("GOMAXPROCS %d after, want %d", after, n)
	}
}
