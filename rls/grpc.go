package rls

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the proto codec replyCodec wraps
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// grpc.go is the gRPC edge: RateLimitService/ShouldRateLimit and the
// standard health service (service "ratelimit", as envoyproxy/ratelimit
// names it, and ""), on whatever listeners the caller serves it on. The
// wall clock is read here, once per request. Replies come from a pool and
// go back to it when the codec has marshalled them. Calls run on a set of
// stream worker goroutines (streamWorkersPerProc).

// HealthService is the gRPC health service name of the rate limit service.
const HealthService = "ratelimit"

// Server serves a Service over gRPC (and HTTP: http.go).
type Server struct {
	rlpb.UnimplementedRateLimitServiceServer
	svc     *Service
	now     func() time.Time
	grpc    *grpc.Server
	health  *health.Server
	healthy atomic.Bool
}

// streamWorkersPerProc is how many stream worker goroutines the gRPC
// server keeps per GOMAXPROCS (grpc.NumStreamWorkers). By default grpc-go
// starts a goroutine per call, whose stack then grows twice on the way to
// the handler (in processRPC and in the select that reads the request),
// copying its frames each time: under load, about a fifth of the server's
// CPU. A worker's stack stays grown from call to call. A
// call that finds every worker busy gets its own goroutine, as without
// workers. 16 per core (32 on 2 cores) took that share from 18% to 2%
// at 32 calls in flight, and to 9% at 128; an idle worker costs a
// parked goroutine (a few KB of stack).
const streamWorkersPerProc = 16

// NewServer returns a server of svc reading the time from now (nil: the
// wall clock), healthy. Its gRPC server keeps streamWorkersPerProc ×
// GOMAXPROCS worker goroutines until it is stopped.
func NewServer(svc *Service, now func() time.Time) *Server {
	if now == nil {
		now = time.Now
	}
	s := &Server{svc: svc, now: now, health: health.NewServer()}
	s.grpc = grpc.NewServer(grpc.ForceServerCodecV2(replyCodec{encoding.GetCodecV2("proto")}),
		grpc.NumStreamWorkers(uint32(streamWorkersPerProc*runtime.GOMAXPROCS(0))))
	rlpb.RegisterRateLimitServiceServer(s.grpc, s)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.SetHealthy(true)
	return s
}

// Service returns the served service.
func (s *Server) Service() *Service { return s.svc }

// GRPC returns the gRPC server, to Serve listeners on and to stop.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// SetHealthy sets what /healthcheck and the gRPC health service answer.
func (s *Server) SetHealthy(ok bool) {
	s.healthy.Store(ok)
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus(HealthService, st)
	s.health.SetServingStatus("", st)
}

// Healthy reports whether the server reports itself healthy.
func (s *Server) Healthy() bool { return s.healthy.Load() }

// ShouldRateLimit implements RateLimitServiceServer.
func (s *Server) ShouldRateLimit(_ context.Context, req *rlpb.RateLimitRequest) (*rlpb.RateLimitResponse, error) {
	r := GetReply()
	if err := s.svc.Decide(s.now(), req, r); err != nil {
		r.Release()
		return nil, status.Error(codes.Unknown, err.Error())
	}
	return r.Response(), nil
}

// replyCodec is the proto codec, which hands a RateLimitResponse back to
// its Reply's pool once marshalled: every RateLimitResponse this server
// sends is a Reply's (ShouldRateLimit), and gRPC keeps no reference to a
// message once its bytes are out.
type replyCodec struct{ encoding.CodecV2 }

func (c replyCodec) Marshal(v any) (mem.BufferSlice, error) {
	out, err := c.CodecV2.Marshal(v)
	if m, ok := v.(*rlpb.RateLimitResponse); ok {
		replyOf(m).Release()
	}
	return out, err
}
