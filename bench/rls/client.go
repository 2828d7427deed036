package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// client.go dials the services with grpc-go and go-control-plane's generated
// RateLimitService stubs, and waits for a service to answer.

// dial opens a client connection to target ("unix:///path" or
// "passthrough:///127.0.0.1:port").
func dial(target string) (*grpc.ClientConn, error) {
	return grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// probeRequest is what readiness is checked with: a domain no config names,
// which every service answers OK without counting anything.
var probeRequest = &rlsv3.RateLimitRequest{
	Domain: "bench-readiness-probe",
	Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "probe", Value: "1"}},
	}},
}

// waitServing calls ShouldRateLimit on target until it answers, for at most
// 30 s, or fails early when the child c exits.
func waitServing(ctx context.Context, c *benchkit.Child, target string) error {
	conn, err := dial(target)
	if err != nil {
		return err
	}
	defer conn.Close()
	cl := rlsv3.NewRateLimitServiceClient(conn)
	err = benchkit.Poll(ctx, 30*time.Second, 50*time.Millisecond, func() error {
		if !c.Alive() {
			return benchkit.Stop(c.Failure("exited at start"))
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := cl.ShouldRateLimit(cctx, probeRequest)
		return err
	})
	if te := (*benchkit.TimeoutError)(nil); errors.As(err, &te) {
		return c.Failure(fmt.Sprintf("did not answer ShouldRateLimit on %s within 30 s: %v", target, te.Last))
	}
	return err
}
