package rls

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// serve starts srv on a Unix socket and a loopback TCP port and returns
// their dial targets.
func serve(t *testing.T, srv *Server) (unixTarget, tcpTarget string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rls.sock")
	ul, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.GRPC().Serve(ul) }()
	go func() { _ = srv.GRPC().Serve(tl) }()
	t.Cleanup(srv.GRPC().Stop)
	return "unix://" + path, tl.Addr().String()
}

func client(t *testing.T, target string) (rlpb.RateLimitServiceClient, healthpb.HealthClient) {
	t.Helper()
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return rlpb.NewRateLimitServiceClient(cc), healthpb.NewHealthClient(cc)
}

func TestGRPCEndToEnd(t *testing.T) {
	now := t0.Add(5 * time.Second)
	srv := NewServer(testService(t, Options{Headers: HeadersDraft03}), func() time.Time { return now })
	ut, tt := serve(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("remote_address", "e2e"), desc("nope", "x")}}
	var got []uint32
	for i, target := range []string{ut, tt, ut, tt} {
		c, _ := client(t, target)
		resp, err := c.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("call %d over %s: %v", i, target, err)
		}
		if len(resp.Statuses) != 2 || resp.Statuses[1].CurrentLimit != nil || resp.Statuses[0].DurationUntilReset.GetSeconds() != 55 {
			t.Fatalf("call %d: %v", i, resp)
		}
		got = append(got, resp.Statuses[0].LimitRemaining)
		want := rlpb.RateLimitResponse_OK
		if i == 3 {
			want = rlpb.RateLimitResponse_OVER_LIMIT
		}
		if resp.OverallCode != want || resp.Statuses[0].Code != want {
			t.Fatalf("call %d: overall %v, want %v", i, resp.OverallCode, want)
		}
		if len(resp.ResponseHeadersToAdd) != 3 || resp.ResponseHeadersToAdd[0].Value != "3, 3;w=60" {
			t.Fatalf("call %d: headers %v", i, resp.ResponseHeadersToAdd)
		}
	}
	if want := []uint32{2, 1, 0, 0}; !equal(got, want) {
		t.Fatalf("remaining %v, want %v", got, want)
	}
	c, h := client(t, ut)
	if _, err := c.ShouldRateLimit(ctx, &rlpb.RateLimitRequest{Domain: "web"}); err == nil {
		t.Fatal("no descriptors: no error")
	}
	// A request over a bound is the caller's error: INVALID_ARGUMENT,
	// naming the bound.
	big := &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("remote_address", strings.Repeat("x", 5000))}}
	if _, err := c.ShouldRateLimit(ctx, big); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("a 5,000-byte value: %v, want InvalidArgument naming 4096", err)
	}
	hr, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: HealthService})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hr, err)
	}
	srv.SetHealthy(false)
	hr, err = h.Check(ctx, &healthpb.HealthCheckRequest{Service: HealthService})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health after SetHealthy(false): %v %v", hr, err)
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHTTPJSONAndHealth(t *testing.T) {
	srv := NewServer(testService(t, Options{}), func() time.Time { return t0 })
	hs := httptest.NewServer(srv.HTTPHandler())
	defer hs.Close()
	post := func(body string) (int, string) {
		resp, err := http.Post(hs.URL+"/json", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	body := `{"domain": "web", "descriptors": [{"entries": [{"key": "path", "value": "/login"}]}]}`
	for i, want := range []int{200, 200, 429} {
		code, out := post(body)
		if code != want {
			t.Fatalf("call %d: %d %s, want %d", i, code, out, want)
		}
		if i == 0 && !bytes.Contains([]byte(out), []byte(`"limitRemaining":1`)) {
			t.Fatalf("call 0: %s", out)
		}
	}
	if code, _ := post(`{"domain": 3}`); code != 400 {
		t.Fatalf("bad body: %d", code)
	}
	if code, _ := post(`{"domain": "web"}`); code != 400 {
		t.Fatalf("no descriptors: %d", code)
	}
	get := func() int {
		resp, err := http.Get(hs.URL + "/healthcheck")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if get() != 200 {
		t.Fatal("healthcheck not OK")
	}
	srv.SetHealthy(false)
	if get() != 500 {
		t.Fatal("healthcheck OK after SetHealthy(false)")
	}
}

// FuzzDecide decodes a request as /json does and decides it: no input
// crashes the service, and every decided request gets one status per
// descriptor.
func FuzzDecide(f *testing.F) {
	f.Add([]byte(`{"domain":"web","descriptors":[{"entries":[{"key":"remote_address","value":"x"}]}]}`))
	f.Add([]byte(`{"domain":"web","hitsAddend":3,"descriptors":[{"entries":[{"key":"tenant","value":"free-1"}],"hitsAddend":"0"},{"entries":[{"key":"user","value":"u"},{"key":"plan","value":"gold"}],"limit":{"requestsPerUnit":1,"unit":"HOUR"}}]}`))
	s := testService(f, Options{Headers: HeadersDraft11, StopIncrementOverLimit: true})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rlpb.RateLimitRequest
		if protojson.Unmarshal(data, &req) != nil {
			return
		}
		r := GetReply()
		defer r.Release()
		if err := s.Decide(t0, &req, r); err != nil {
			return
		}
		if len(r.Response().Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(r.Response().Statuses), len(req.Descriptors))
		}
	})
}
