package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// load.go is the load: a closed loop of unary ShouldRateLimit calls, c in
// flight at once over a few HTTP/2 connections, the same for every service.
// The generator is kept cheap: requests are encoded once before the run and
// sent as bytes, and a reply is read no further than its overall_code (a
// codec that neither builds nor parses messages).

// shouldRateLimitMethod is the gRPC method every service serves.
const shouldRateLimitMethod = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// loadSpec is one run of the load against one service.
type loadSpec struct {
	target      string        // grpc target
	conns       int           // HTTP/2 connections
	concurrency int           // calls in flight
	warmup      time.Duration // driven but not measured
	duration    time.Duration // measured
	requests    [][]byte      // encoded requests, sent in turn
}

// loadResult is what one run measured.
type loadResult struct {
	calls, overLimit, errors int64
	elapsed                  time.Duration
	cpu                      time.Duration // the service's CPU time over the measured span
	genCPU                   time.Duration // the generator's own, over the same span
	hist                     *hdrhistogram.Histogram
	firstErr                 error
}

// rps is calls per second over the measured span.
func (r *loadResult) rps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.calls) / r.elapsed.Seconds()
}

// cpuPerCall is the service's CPU time per call, in µs.
func (r *loadResult) cpuPerCall() float64 {
	if r.calls == 0 {
		return 0
	}
	return float64(r.cpu.Microseconds()) / float64(r.calls)
}

// add returns the sum of r (nil: none yet) and x, as if measured in one
// span.
func (r *loadResult) add(x *loadResult) *loadResult {
	if r == nil {
		return x
	}
	r.calls += x.calls
	r.overLimit += x.overLimit
	r.errors += x.errors
	r.elapsed += x.elapsed
	r.cpu += x.cpu
	r.genCPU += x.genCPU
	r.hist.Merge(x.hist)
	if r.firstErr == nil {
		r.firstErr = x.firstErr
	}
	return r
}

// genCPUPerCall is the generator's own CPU time per call, in µs.
func (r *loadResult) genCPUPerCall() float64 {
	if r.calls == 0 {
		return 0
	}
	return float64(r.genCPU.Microseconds()) / float64(r.calls)
}

// loadRequests returns n encoded requests of the bench domain, one
// descriptor each, over keys client values, each counted in its own window
// (the bench domain's limit is never reached: see configFiles).
func loadRequests(n, keys int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range out {
		req := &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "client", Value: fmt.Sprintf("c%d", i%keys)}},
		}}}
		b, err := proto.Marshal(req)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// rawCodec sends pre-encoded bytes and reads replies only as far as
// overall_code: the generator encodes and decodes nothing per call. It is
// named "proto", so that the content type is the one every server expects.
type rawCodec struct{}

// rawReply is where rawCodec puts a reply's overall_code.
type rawReply struct{ overall byte }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var head [2]byte
	n := data.CopyTo(head[:])
	r := v.(*rawReply)
	r.overall = 0
	// overall_code is field 1, a varint: tag 0x08, then the code (1 OK,
	// 2 OVER_LIMIT; 0 UNKNOWN is left out).
	if n == 2 && head[0] == 0x08 {
		r.overall = head[1]
	}
	return nil
}

func (rawCodec) Name() string { return "proto" }

// runLoad drives spec's target and measures it; pids are the processes
// whose CPU time is read at the start and end of the measured span.
func runLoad(ctx context.Context, spec loadSpec, pids []int) (*loadResult, error) {
	conns := make([]*grpc.ClientConn, spec.conns)
	for i := range conns {
		c, err := dial(spec.target)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		c.Connect()
		conns[i] = c
	}
	var measuring, stopping atomic.Bool
	type worker struct {
		calls, over, errs int64
		hist              *hdrhistogram.Histogram
		firstErr          error
	}
	workers := make([]*worker, spec.concurrency)
	var wg sync.WaitGroup
	for w := range workers {
		wk := &worker{hist: hdrhistogram.New(1, 10_000_000, 3)}
		workers[w] = wk
		conn := conns[w%len(conns)]
		wg.Go(func() {
			opt := grpc.ForceCodecV2(rawCodec{})
			var reply rawReply
			i := w * 7919
			for !stopping.Load() && ctx.Err() == nil {
				req := spec.requests[i%len(spec.requests)]
				i++
				start := time.Now()
				err := conn.Invoke(ctx, shouldRateLimitMethod, &req, &reply, opt)
				lat := time.Since(start)
				if !measuring.Load() {
					continue
				}
				if err != nil {
					wk.errs++
					if wk.firstErr == nil {
						wk.firstErr = err
					}
					continue
				}
				wk.calls++
				if reply.overall == byte(rlsv3.RateLimitResponse_OVER_LIMIT) {
					wk.over++
				}
				_ = wk.hist.RecordValue(lat.Microseconds())
			}
		})
	}
	res := &loadResult{hist: hdrhistogram.New(1, 10_000_000, 3)}
	err := func() error {
		if err := benchkit.SleepUntil(ctx, time.Now().Add(spec.warmup)); err != nil {
			return err
		}
		cpu0, err := benchkit.CPUTime(pids...)
		if err != nil {
			return err
		}
		gen0, err := benchkit.CPUTime(os.Getpid())
		if err != nil {
			return err
		}
		t0 := time.Now()
		measuring.Store(true)
		if err := benchkit.SleepUntil(ctx, t0.Add(spec.duration)); err != nil {
			return err
		}
		measuring.Store(false)
		res.elapsed = time.Since(t0)
		cpu1, err := benchkit.CPUTime(pids...)
		if err != nil {
			return err
		}
		gen1, err := benchkit.CPUTime(os.Getpid())
		if err != nil {
			return err
		}
		res.cpu, res.genCPU = cpu1-cpu0, gen1-gen0
		return nil
	}()
	stopping.Store(true)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	for _, wk := range workers {
		res.calls += wk.calls
		res.overLimit += wk.over
		res.errors += wk.errs
		res.hist.Merge(wk.hist)
		if res.firstErr == nil {
			res.firstErr = wk.firstErr
		}
	}
	return res, nil
}
