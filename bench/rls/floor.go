package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/obol-dev/obol/bench/internal/benchkit"
	"github.com/obol-dev/obol/internal/freeport"
)

// floor.go is the floor: a bare grpc-go server whose ShouldRateLimit returns
// OK at once, with one descriptor status of the shape the services send
// (code, current limit, remaining, time to reset), built once. It is what
// gRPC over the same transport costs with no decision behind it. It runs as
// a child process (this binary with the hidden -serve-floor flag) so that
// its CPU time is read from /proc exactly as the services' is.

// floorHandler is the floor's RateLimitService: every call gets reply.
type floorHandler struct {
	rlsv3.UnimplementedRateLimitServiceServer
	reply *rlsv3.RateLimitResponse
}

// newFloorHandler returns the floor's handler and its one reply.
func newFloorHandler() *floorHandler {
	return &floorHandler{reply: &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
			Code:               rlsv3.RateLimitResponse_OK,
			CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1000, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND},
			LimitRemaining:     999,
			DurationUntilReset: &durationpb.Duration{Seconds: 1},
		}},
	}}
}

// ShouldRateLimit answers OK with the fixed reply.
func (h *floorHandler) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return h.reply, nil
}

// floorMain serves the floor: `-serve-floor SOCKET -tcp ADDR`, on the Unix
// socket and the TCP address, until SIGTERM (or SIGINT).
func floorMain(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	sock := fs.String("serve-floor", "", "Unix socket to serve on")
	tcp := fs.String("tcp", "127.0.0.1:0", "loopback TCP address to serve on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sock == "" {
		return errors.New("floor: -serve-floor SOCKET is required")
	}
	_ = os.Remove(*sock)
	ul, err := net.Listen("unix", *sock)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	defer os.Remove(*sock)
	tl, err := net.Listen("tcp", *tcp)
	if err != nil {
		ul.Close()
		return fmt.Errorf("floor: %w", err)
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, newFloorHandler())
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ul) }()
	go func() { errc <- srv.Serve(tl) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		srv.Stop()
		return nil
	case err := <-errc:
		srv.Stop()
		return fmt.Errorf("floor: %w", err)
	}
}

// service is one server under test, as the driver sees it.
type service struct {
	name   string
	socket string // gRPC over this Unix socket
	tcp    string // gRPC over this loopback address ("" if none)
	pids   []int  // the processes whose CPU time is the service's
	stop   func()
}

// startFloor starts this binary as the floor, on a socket in dir and a free
// loopback port.
func startFloor(ctx context.Context, dir string) (*service, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freeport.Loopback()
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "floor.sock")
	tcp := "127.0.0.1:" + strconv.Itoa(port)
	c, err := startChild("floor", exec.Command(self, benchkit.FloorFlag, sock, "-tcp", tcp))
	if err != nil {
		return nil, err
	}
	if err := waitServing(ctx, c, "unix://"+sock); err != nil {
		c.Stop()
		return nil, err
	}
	return &service{name: "floor", socket: sock, tcp: tcp, pids: []int{c.Pid()}, stop: c.Stop}, nil
}
