package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// serveInProcess serves h on a Unix socket in a temporary directory for the
// length of the test.
func serveInProcess(t *testing.T, h fasthttp.RequestHandler) *server {
	t.Helper()
	dir, err := os.MkdirTemp("", "obol-load-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return &server{name: "test", socket: sock, pid: os.Getpid()}
}

func granted(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"granted":1,"remaining":3}`)
}

func TestClosedLoop(t *testing.T) {
	srv := serveInProcess(t, granted)
	bodies, _ := buildBodies(requestJSON, testResources, 100, 1)
	spec := loadSpec{srv: srv, sc: requestJSON, bodies: bodies, conns: 3, seed: 1}
	res, err := runPhase(context.Background(), spec, phaseTiming{warmup: 50 * time.Millisecond, dur: 300 * time.Millisecond, hz: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.requests == 0 || res.errors != 0 || res.hist.TotalCount() != res.requests {
		t.Fatalf("requests %d, errors %d (%s), latencies %d", res.requests, res.errors, res.firstErr, res.hist.TotalCount())
	}
	if res.sampled == 0 || res.grantShare() != 1 {
		t.Errorf("sampled %d decisions, grant share %g", res.sampled, res.grantShare())
	}
	if !res.cpuOK || !res.genOK {
		t.Errorf("CPU not read: %+v", res)
	}
	if res.elapsed < 250*time.Millisecond || res.elapsed > time.Second {
		t.Errorf("measured for %s, want about 300ms", res.elapsed)
	}
}

func TestOpenLoopRate(t *testing.T) {
	srv := serveInProcess(t, granted)
	bodies, _ := buildBodies(requestJSON, testResources, 100, 1)
	spec := loadSpec{srv: srv, sc: requestJSON, bodies: bodies, conns: 4, rate: 2000, seed: 1}
	timing := phaseTiming{warmup: 100 * time.Millisecond, dur: 500 * time.Millisecond, hz: 100}
	res, err := runPhase(context.Background(), spec, timing)
	if err != nil {
		t.Fatal(err)
	}
	// The schedule bounds what can be answered in the measured interval:
	// at most every request scheduled up to its end, those of the warmup
	// included (a backlog the warmup left is answered in the interval: on
	// a loaded machine 2,321/s was seen). Below, half the rate: the
	// generator sends, whatever the machine's load.
	most := spec.rate * (timing.warmup + timing.dur).Seconds() / timing.dur.Seconds()
	if rps := res.rps(); rps < spec.rate/2 || rps > most {
		t.Errorf("open loop at %.0f/s answered %.0f/s, want %.0f to %.0f", spec.rate, rps, spec.rate/2, most)
	}
}

// TestCoordinatedOmission checks that in open loop a stall is charged to
// every request scheduled during it, not only to the one that met it.
func TestCoordinatedOmission(t *testing.T) {
	var n atomic.Int64
	srv := serveInProcess(t, func(ctx *fasthttp.RequestCtx) {
		if n.Add(1) == 100 {
			// The stall under test: the server stops answering for 300 ms
			// (what the test measures, not a wait for an event).
			<-time.After(300 * time.Millisecond)
		}
		granted(ctx)
	})
	bodies, _ := buildBodies(requestJSON, testResources, 10, 1)
	// One connection at 1000/s for 1 s: the stall delays ~300 requests by
	// 0–300 ms, a third of them, so the p90 is well over 50 ms. A closed
	// loop would record one slow request and a p90 of microseconds.
	spec := loadSpec{srv: srv, sc: requestJSON, bodies: bodies, conns: 1, rate: 1000, seed: 1}
	res, err := runPhase(context.Background(), spec, phaseTiming{warmup: 0, dur: time.Second, hz: 100})
	if err != nil {
		t.Fatal(err)
	}
	if p90 := res.quantile(90); p90 < 50_000 {
		t.Errorf("p90 %.0f µs after a 300 ms stall in open loop: the stall was not charged to the requests it delayed", p90)
	}
	if res.errors != 0 {
		t.Errorf("%d errors: %s", res.errors, res.firstErr)
	}
}

func TestErrorsCounted(t *testing.T) {
	srv := serveInProcess(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"error":{"code":"not_ready","message":"starting"}}`)
	})
	bodies, _ := buildBodies(requestJSON, testResources, 10, 1)
	spec := loadSpec{srv: srv, sc: requestJSON, bodies: bodies, conns: 2, seed: 1}
	res, err := runPhase(context.Background(), spec, phaseTiming{dur: 100 * time.Millisecond, hz: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.requests != 0 || res.errors == 0 || res.firstErr != "status 503 not_ready: starting" {
		t.Errorf("requests %d, errors %d, first %q", res.requests, res.errors, res.firstErr)
	}
	// A dead server: transport errors, and the phase still ends on time.
	dead := &server{name: "dead", socket: filepath.Join(t.TempDir(), "none.sock")}
	start := time.Now()
	res, _ = runPhase(context.Background(), loadSpec{srv: dead, sc: requestJSON, bodies: bodies, conns: 2, seed: 1},
		phaseTiming{dur: 100 * time.Millisecond, hz: 100})
	if res.errors == 0 || res.cpuOK || time.Since(start) > 2*time.Second {
		t.Errorf("dead server: %d errors, cpu read %v, took %s", res.errors, res.cpuOK, time.Since(start))
	}
}

func TestFloorServer(t *testing.T) {
	body := []byte(`{"granted":1,"remaining":9,"retry_after_ms":0}`)
	srv := serveInProcess(t, floorServer(body, "application/json").Handler)
	bodies, _ := buildBodies(requestJSON, testResources, 10, 1)
	reply, ctype, err := sampleReply(srv, false, requestJSON, bodies, 3)
	if err != nil {
		t.Fatal(err)
	}
	if string(reply) != string(body) || ctype != "application/json" {
		t.Errorf("floor replied %s (%s)", reply, ctype)
	}
}

// roundTrip writes req on a new connection to the Unix socket and returns the
// bytes read until they hold a whole reply.
func roundTrip(t *testing.T, socket string, req []byte) []byte {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if _, m, _, perr := parseReply(got); m > 0 || perr != nil {
			return got
		}
		if err != nil {
			t.Fatalf("read %q: %v", got, err)
		}
	}
}

// TestLargeAndClosing sends requests larger than a socket buffer takes at
// once (so that a write is partial) and gets replies larger than the read
// buffer, every other one with Connection: close: all succeed, none is lost.
func TestLargeAndClosing(t *testing.T) {
	reply := []byte(`{"granted":1,"pad":"` + strings.Repeat("x", 100_000) + `"}`)
	var n atomic.Int64
	srv := serveInProcess(t, func(ctx *fasthttp.RequestCtx) {
		if len(ctx.PostBody()) < 1_000_000 {
			ctx.SetStatusCode(fasthttp.StatusBadRequest)
		}
		if n.Add(1)%2 == 0 {
			ctx.SetConnectionClose()
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(reply)
	})
	big := []byte(`{"resource":"r","domain":"` + strings.Repeat("d", 1_200_000) + `"}`)
	for _, rate := range []float64{0, 200} {
		spec := loadSpec{srv: srv, sc: requestJSON, bodies: [][]byte{big}, conns: 2, rate: rate, seed: 1}
		// Phases of 300 ms run until 10 requests were made in all: on a
		// loaded machine one phase may complete none of these 1.2 MB
		// requests (seen in CI: 0 and 2). What is checked is that every
		// one made succeeds, not how many a phase makes.
		total := int64(0)
		for phase := 0; total < 10; phase++ {
			if phase == 100 {
				t.Fatalf("rate %g: %d requests in 100 phases of 300 ms, want 10", rate, total)
			}
			res, err := runPhase(context.Background(), spec, phaseTiming{dur: 300 * time.Millisecond, hz: 100})
			if err != nil {
				t.Fatal(err)
			}
			total += res.requests
			if res.errors != 0 || res.hist.TotalCount() != res.requests || (res.requests > 0 && res.grantShare() != 1) {
				t.Fatalf("rate %g: %d requests, %d errors (%s), %d latencies, grant share %g",
					rate, res.requests, res.errors, res.firstErr, res.hist.TotalCount(), res.grantShare())
			}
		}
	}
}

// TestMalformedReplies checks that a server answering what is not HTTP, or
// the wrong Content-Type, or a reply that is not a decision, is charged an
// error per request, and that the phase still ends on time.
func TestMalformedReplies(t *testing.T) {
	for _, tc := range []struct {
		name, reply, wantErr string
		sampled              bool // only the fully decoded replies (1 in 64) can fail
	}{
		{name: "not HTTP", reply: "SSH-2.0-x\r\n\r\n", wantErr: "malformed reply: status line", sampled: false},
		{name: "chunked", reply: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", wantErr: "Transfer-Encoding", sampled: false},
		{name: "wrong type", reply: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok", wantErr: `reply Content-Type "text/plain"`, sampled: false},
		{name: "no decision", reply: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", wantErr: "decision without granted", sampled: true},
		{name: "error status", reply: "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: 43\r\n\r\n" +
			`{"error":{"code":"busy","message":"later"}}`, wantErr: "status 429 busy: later", sampled: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sock := rawServer(t, []byte(tc.reply))
			bodies, _ := buildBodies(requestJSON, testResources, 10, 1)
			srv := &server{name: "raw", socket: sock}
			start := time.Now()
			res, err := runPhase(context.Background(), loadSpec{srv: srv, sc: requestJSON, bodies: bodies, conns: 2, seed: 1},
				phaseTiming{dur: 200 * time.Millisecond, hz: 100})
			if err != nil {
				t.Fatal(err)
			}
			if res.errors == 0 || (res.requests != 0) != tc.sampled || !strings.Contains(res.firstErr, tc.wantErr) || time.Since(start) > 3*time.Second {
				t.Errorf("%d requests, %d errors, the first %q (want %q), took %s", res.requests, res.errors, res.firstErr, tc.wantErr, time.Since(start))
			}
		})
	}
}

// rawServer answers every request on a Unix socket with reply, written as
// is, and keeps the connection open.
func rawServer(t *testing.T, reply []byte) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "raw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := c.Write(reply); err != nil {
						return
					}
				}
			}()
		}
	}()
	return sock
}
