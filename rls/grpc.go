package rls

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the proto codec replyCodec wraps
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/obol-dev/obol/internal/netguard"
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

// Bounds of the gRPC server, per connection (the cap on connections is
// the listener's: netguard). With them a client cannot make the server
// hold more than MaxConcurrentStreams calls per connection, each for at
// most MaxConnectionAge and the read timeout.
const (
	// MaxConcurrentStreams is the most calls in flight on one connection,
	// advertised in HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS: a client
	// that opens more has them refused (RST_STREAM REFUSED_STREAM, which
	// gRPC clients see as UNAVAILABLE and may retry); Envoy opens another
	// connection instead. 100 is HTTP/2's recommended least.
	MaxConcurrentStreams = 100
	// MaxRecvMsgSize bounds a request, as /json's body is bounded: over
	// it the call is refused with RESOURCE_EXHAUSTED.
	MaxRecvMsgSize = 1 << 20
	// MaxSendMsgSize bounds a reply; over it the call fails with
	// RESOURCE_EXHAUSTED.
	MaxSendMsgSize = 4 << 20
	// KeepaliveTime is how long a connection may be silent before the
	// server pings it, and KeepaliveTimeout how long it then waits for
	// the answer before it closes the connection.
	KeepaliveTime    = time.Minute
	KeepaliveTimeout = 20 * time.Second
	// MaxConnectionAge is how long a connection lives: past it (±10%,
	// grpc-go's jitter) the server sends a GOAWAY, lets the calls in
	// flight finish for the read timeout, then closes it; Envoy opens a
	// new one. It bounds how long a call whose request never comes (its
	// headers, then nothing) holds its stream, at no cost per call (a
	// deadline per call would cost a timer per call; Envoy sends its own,
	// grpc-timeout, with every call).
	MaxConnectionAge = 30 * time.Minute
	// MinPingInterval is the shortest interval between a client's pings
	// the server accepts, and only while calls are in flight: a client
	// that pings more often, or pings an idle connection, gets a GOAWAY
	// (ENHANCE_YOUR_CALM) after two such pings and its connection closed.
	MinPingInterval = 10 * time.Second
)

// NewServer returns a server of svc reading the time from now (nil: the
// wall clock), healthy, with the default netguard.Limits. Its gRPC server
// keeps streamWorkersPerProc × GOMAXPROCS worker goroutines until it is
// stopped.
func NewServer(svc *Service, now func() time.Time) *Server {
	return NewServerWith(svc, now, netguard.Limits{})
}

// NewServerWith is NewServer with the timeouts of lim (zero fields: their
// defaults): a new connection's HTTP/2 handshake must end within
// lim.ReadTimeout, a connection with no call in flight for lim.IdleTimeout
// is sent a GOAWAY and closed, and one past MaxConnectionAge is sent a
// GOAWAY and closed lim.ReadTimeout later. The message sizes, streams per connection and keepalive are
// bounded by the constants above. lim.MaxConns is the listener's: serve
// the server on listeners guarded by netguard.
func NewServerWith(svc *Service, now func() time.Time, lim netguard.Limits) *Server {
	if now == nil {
		now = time.Now
	}
	lim = lim.WithDefaults()
	s := &Server{svc: svc, now: now, health: health.NewServer()}
	s.grpc = grpc.NewServer(grpc.ForceServerCodecV2(replyCodec{encoding.GetCodecV2("proto")}),
		grpc.NumStreamWorkers(uint32(streamWorkersPerProc*runtime.GOMAXPROCS(0))),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.MaxSendMsgSize(MaxSendMsgSize),
		grpc.ConnectionTimeout(lim.ReadTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     lim.IdleTimeout,
			MaxConnectionAge:      MaxConnectionAge,
			MaxConnectionAgeGrace: lim.ReadTimeout,
			Time:                  KeepaliveTime,
			Timeout:               KeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             MinPingInterval,
			PermitWithoutStream: false,
		}))
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
		return nil, status.Error(Code(err), err.Error())
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
