package main

import (
	"context"
	"net"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/obol-dev/obol/rls"
)

// alloc_test.go counts what one ShouldRateLimit round trip allocates,
// client and server together, in process over bufconn: through the floor's
// bare handler (what grpc-go itself makes) and through obol's service. The
// difference is what obol adds per decision.

// roundTripClient serves srv on a bufconn listener and returns a client of
// it.
func roundTripClient(b *testing.B, srv *grpc.Server) rlsv3.RateLimitServiceClient {
	b.Helper()
	l := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// benchRequest is one descriptor of the bench domain, as the load sends.
var benchRequest = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
	Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "client", Value: "c1"}},
}}}

// benchRoundTrip calls ShouldRateLimit b.N times.
func benchRoundTrip(b *testing.B, cl rlsv3.RateLimitServiceClient) {
	ctx := context.Background()
	if _, err := cl.ShouldRateLimit(ctx, benchRequest); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cl.ShouldRateLimit(ctx, benchRequest); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTripFloor is the floor's handler: grpc-go's own
// allocations, client and server, per call.
func BenchmarkRoundTripFloor(b *testing.B) {
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, newFloorHandler())
	benchRoundTrip(b, roundTripClient(b, srv))
}

// BenchmarkRoundTripObol is obol's service (package rls, the wall clock,
// default options) on the bench config: a decision that counts.
func BenchmarkRoundTripObol(b *testing.B) {
	cfgDir, err := writeConfig(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := rls.LoadDir(cfgDir)
	if err != nil {
		b.Fatal(err)
	}
	srv := rls.NewServer(rls.New(cfg, rls.Options{}), nil)
	benchRoundTrip(b, roundTripClient(b, srv.GRPC()))
}
