package rls

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// bare is the least handler: one static response, the baseline of what
// grpc-go itself costs per call.
type bare struct {
	rlpb.UnimplementedRateLimitServiceServer
	resp *rlpb.RateLimitResponse
}

func (b *bare) ShouldRateLimit(context.Context, *rlpb.RateLimitRequest) (*rlpb.RateLimitResponse, error) {
	return b.resp, nil
}

// benchGRPC calls ShouldRateLimit over a Unix socket, client and server in
// this process: allocs/op counts both sides.
func benchGRPC(b *testing.B, register func(*grpc.Server)) {
	path := filepath.Join(b.TempDir(), "b.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	register(gs)
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()
	benchClient(b, "unix://"+path)
}

func benchClient(b *testing.B, target string) {
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	c := rlpb.NewRateLimitServiceClient(cc)
	req := &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("remote_address", "10.1.2.3")}}
	ctx := context.Background()
	if _, err := c.ShouldRateLimit(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.ShouldRateLimit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGRPCBare is a bare grpc-go handler answering a response of the
// same shape as the service's (one status with its limit and reset), so
// that the client's decoding costs the same.
func BenchmarkGRPCBare(b *testing.B) {
	resp := &rlpb.RateLimitResponse{OverallCode: rlpb.RateLimitResponse_OK, Statuses: []*rlpb.RateLimitResponse_DescriptorStatus{{
		Code: rlpb.RateLimitResponse_OK, CurrentLimit: &rlpb.RateLimitResponse_RateLimit{RequestsPerUnit: 3, Unit: rlpb.RateLimitResponse_RateLimit_MINUTE}, LimitRemaining: 2,
		DurationUntilReset: durationpb.New(60 * time.Second),
	}}}
	benchGRPC(b, func(s *grpc.Server) { rlpb.RegisterRateLimitServiceServer(s, &bare{resp: resp}) })
}

// BenchmarkGRPCService is the service over the same socket.
func BenchmarkGRPCService(b *testing.B) {
	srv := NewServer(testService(b, Options{}), func() time.Time { return t0 })
	path := filepath.Join(b.TempDir(), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.GRPC().Serve(l) }()
	defer srv.GRPC().Stop()
	benchClient(b, "unix://"+path)
}
