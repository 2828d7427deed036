package rls

import (
	"context"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// BenchmarkDecide is the decision path alone: match, count, reply, with
// the reply back in its pool as the codec puts it. It must not allocate.
func BenchmarkDecide(b *testing.B) {
	s := testService(b, Options{Headers: HeadersDraft03})
	req := &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("remote_address", "10.1.2.3"), desc("user", "bob", "plan", "gold")}}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		r := GetReply()
		if err := s.Decide(now, req, r); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

// BenchmarkHandler is ShouldRateLimit as gRPC calls it, with the codec's
// marshalling (which releases the reply).
func BenchmarkHandler(b *testing.B) {
	srv := NewServer(testService(b, Options{}), func() time.Time { return t0 })
	req := &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("remote_address", "10.1.2.3")}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := srv.ShouldRateLimit(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		replyOf(resp).Release()
	}
}

func TestDecideAllocates(t *testing.T) {
	if raceOn {
		t.Skip("the race detector drops sync.Pool items: run without -race to count allocations")
	}
	cfg, err := Parse([]Source{{Name: "web.yaml", Data: []byte(testConfig)}, {Name: "ext.yaml", Data: []byte(extConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, Options{Headers: HeadersDraft11})
	for _, req := range []*rlpb.RateLimitRequest{
		{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("remote_address", "10.1.2.3"), desc("tenant", "free-1"), desc("user", "bob", "plan", "gold")}},
		{Domain: "ext", Descriptors: []*rlv3.RateLimitDescriptor{desc("smooth", "a"), desc("tiered", "b")}},
	} {
		decideAllocs(t, s, req)
	}
}

func decideAllocs(t *testing.T, s *Service, req *rlpb.RateLimitRequest) {
	t.Helper()
	warm := GetReply()
	_ = s.Decide(t0, req, warm)
	warm.Release()
	n := testing.AllocsPerRun(200, func() {
		r := GetReply()
		if err := s.Decide(t0, req, r); err != nil {
			t.Fatal(err)
		}
		r.Release()
	})
	if n != 0 {
		t.Fatalf("a decision allocates %.1f times, want 0", n)
	}
}
