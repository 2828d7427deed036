package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// load.go drives one server (the agent or the floor) with C persistent
// HTTP/1.1 connections (the event loop of loop_linux.go) and records every
// request's latency in an HDR histogram; it also holds the fasthttp client
// of the single requests made outside the load (probe, sampling, /readyz).

// server is a process the generator loads: the agent or the floor.
type server struct {
	name   string // "agent" or "floor"
	socket string // its Unix socket
	http   string // its loopback TCP address, "" when unknown
	pid    int    // its process id, for /proc; 0 when unknown
}

// Client timeouts: a request that takes longer is an error, and no worker can
// hang past the end of its phase by more than this.
const clientTimeout = 10 * time.Second

// client returns an HTTP client holding at most one connection to s, over its
// Unix socket or (tcp) its loopback TCP address.
func (s *server) client(tcp bool) (*fasthttp.HostClient, error) {
	network, addr := "unix", s.socket
	if tcp {
		if s.http == "" {
			return nil, fmt.Errorf("%s: no TCP address known (give -agent-http with -agent-socket)", s.name)
		}
		network, addr = "tcp", s.http
	}
	d := net.Dialer{Timeout: clientTimeout}
	return &fasthttp.HostClient{
		Addr:                     "localhost",
		Dial:                     func(string) (net.Conn, error) { return d.Dial(network, addr) },
		MaxConns:                 1,
		MaxIdleConnDuration:      time.Minute,
		ReadTimeout:              clientTimeout,
		WriteTimeout:             clientTimeout,
		NoDefaultUserAgentHeader: true,
	}, nil
}

// newRequest returns a POST request of scenario sc, without its body.
func newRequest(sc scenario) *fasthttp.Request {
	req := fasthttp.AcquireRequest()
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://localhost" + sc.path())
	req.Header.SetContentType(sc.enc.contentType())
	req.Header.Set("Accept", sc.enc.contentType())
	return req
}

// Latency histogram bounds, in microseconds.
const (
	histMin    = 1
	histMax    = 60_000_000 // a minute
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// sampleEvery is how often a worker fully decodes a reply (and its first
// one): often enough to catch a malformed reply and to estimate the share of
// grants, rarely enough not to slow the generator.
const sampleEvery = 64

// loadSpec is one stretch of load on one server.
type loadSpec struct {
	srv    *server
	tcp    bool
	sc     scenario
	bodies [][]byte
	conns  int
	rate   float64 // total requests per second; 0 means closed loop
	seed   uint64
}

// counts are what workers tally between two collections.
type counts struct {
	requests int64 // 200 replies of the right type
	errors   int64 // transport errors, other statuses, malformed replies
	sampled  int64 // decisions in the fully decoded replies
	granted  int64 // granted decisions among them
	firstErr string
}

func (c *counts) add(o *counts) {
	c.requests += o.requests
	c.errors += o.errors
	c.sampled += o.sampled
	c.granted += o.granted
	if c.firstErr == "" {
		c.firstErr = o.firstErr
	}
}

// worker is what one event loop recorded since the last collection.
type worker struct {
	mu   sync.Mutex
	hist *hdrhistogram.Histogram
	c    counts
}

// fail counts a failed request; w.mu is held.
func (w *worker) fail(why string) {
	w.c.errors++
	if w.c.firstErr == "" {
		w.c.firstErr = why
	}
}

// load is running load: its event loops stop by themselves at end.
type load struct {
	spec    loadSpec
	workers []*worker
	wg      sync.WaitGroup
}

// eventLoops is how many event loops (each an OS thread) share a load's
// connections. One suffices: at the 2-core machine's maximum (about
// 110,000 requests/s) it takes some 6 µs per request, two thirds of a core,
// and one thread takes the least from the cores it shares with the server.
const eventLoops = 1

// startLoad starts spec's load: from start (open loop: on a schedule
// beginning at start) until end or until ctx is done. Every request is
// encoded before it returns.
func startLoad(ctx context.Context, spec loadSpec, start, end time.Time) (*load, error) {
	if len(spec.bodies) == 0 {
		return nil, errors.New("no bodies to send")
	}
	if spec.conns < 1 {
		return nil, fmt.Errorf("-c %d: want at least 1 connection", spec.conns)
	}
	reqs := encodeRequests(spec.sc, spec.bodies)
	epoch := time.Now()
	l := &load{spec: spec}
	loops := make([]*evloop, 0, eventLoops)
	for i := range min(eventLoops, spec.conns) {
		var conns []int
		for g := i; g < spec.conns; g += eventLoops {
			conns = append(conns, g)
		}
		w := &worker{hist: newHist()}
		el, err := newEventLoop(w, spec, reqs, conns, epoch, start, end)
		if err != nil {
			for _, el := range loops {
				el.closeAll()
			}
			return nil, err
		}
		l.workers = append(l.workers, w)
		loops = append(loops, el)
	}
	for _, el := range loops {
		l.wg.Go(func() { el.run(ctx) })
	}
	return l, nil
}

// wait waits for the loops to stop.
func (l *load) wait() { l.wg.Wait() }

// collect returns what the loops recorded since the last collection, and
// clears it.
func (l *load) collect() (*hdrhistogram.Histogram, counts) {
	h := newHist()
	var c counts
	for _, w := range l.workers {
		w.mu.Lock()
		h.Merge(w.hist)
		w.hist.Reset()
		c.add(&w.c)
		w.c = counts{}
		w.mu.Unlock()
	}
	return h, c
}

// probe sends one request of sc (body) to srv and tells whether the server
// serves it. A server that does not implement the endpoint or the encoding
// yet (404 not_found on the path, a refusal naming MessagePack, a JSON reply
// to Accept: application/msgpack) makes unavailable say so; any other
// failure is err.
func probe(srv *server, tcp bool, sc scenario, body []byte) (unavailable string, err error) {
	hc, err := srv.client(tcp)
	if err != nil {
		return "", err
	}
	defer hc.CloseIdleConnections()
	req := newRequest(sc)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetBodyRaw(body)
	if err := hc.DoTimeout(req, resp, clientTimeout); err != nil {
		return "", fmt.Errorf("%s %s: %w", srv.name, sc.path(), err)
	}
	return classifyProbe(sc, resp.StatusCode(), resp.Header.ContentType(), resp.Body())
}

// classifyProbe is probe's verdict on a reply.
func classifyProbe(sc scenario, status int, contentType, body []byte) (unavailable string, err error) {
	if status == fasthttp.StatusOK {
		if sc.enc == encMsgpack && !bytes.HasPrefix(contentType, []byte(encMsgpack.contentType())) {
			return fmt.Sprintf("the agent answers Accept: application/msgpack with %q: MessagePack replies are not implemented yet", contentType), nil
		}
		if _, _, err := checkReply(sc, body); err != nil {
			return "", fmt.Errorf("%s: %w", sc.path(), err)
		}
		return "", nil
	}
	e, _ := errorReply(contentType, body)
	if status == fasthttp.StatusNotFound && e.Code == "not_found" {
		return fmt.Sprintf("POST %s is not served by the agent yet (404 not_found: %s)", sc.path(), e.Message), nil
	}
	if sc.enc == encMsgpack && (status == fasthttp.StatusBadRequest || status == fasthttp.StatusUnsupportedMediaType) &&
		strings.Contains(strings.ToLower(e.Message), "msgpack") {
		return fmt.Sprintf("the agent does not accept MessagePack yet (%d %s: %s)", status, e.Code, e.Message), nil
	}
	return "", fmt.Errorf("%s: %s", sc.path(), describeStatus(status, contentType, body))
}

// errorReply decodes an error reply {"error": {"code", "message"}}, in
// MessagePack when its Content-Type says so, else in JSON.
func errorReply(contentType, body []byte) (wireError, bool) {
	var e struct {
		Error *wireError `json:"error" msgpack:"error"`
	}
	enc := encJSON
	if bytes.HasPrefix(contentType, []byte(encMsgpack.contentType())) {
		enc = encMsgpack
	}
	if enc.unmarshal(body, &e) != nil || e.Error == nil {
		return wireError{}, false
	}
	return *e.Error, true
}

// describeStatus describes a reply other than 200: its status and error, or
// the start of its body.
func describeStatus(status int, contentType, body []byte) string {
	if e, ok := errorReply(contentType, body); ok {
		return fmt.Sprintf("status %d %s: %s", status, e.Code, e.Message)
	}
	return fmt.Sprintf("status %d: %q", status, benchkit.Snippet(body))
}

// sampleReply sends the first n bodies to srv and returns the reply of median
// length with its Content-Type: a typical reply of the scenario, which the
// floor then serves.
func sampleReply(srv *server, tcp bool, sc scenario, bodies [][]byte, n int) ([]byte, string, error) {
	hc, err := srv.client(tcp)
	if err != nil {
		return nil, "", err
	}
	defer hc.CloseIdleConnections()
	req := newRequest(sc)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	var replies [][]byte
	var ct string
	for i := 0; i < n && i < len(bodies); i++ {
		req.SetBodyRaw(bodies[i])
		if err := hc.DoTimeout(req, resp, clientTimeout); err != nil {
			return nil, "", fmt.Errorf("%s %s: %w", srv.name, sc.path(), err)
		}
		if resp.StatusCode() != fasthttp.StatusOK {
			return nil, "", fmt.Errorf("%s %s: %s", srv.name, sc.path(), describeStatus(resp.StatusCode(), resp.Header.ContentType(), resp.Body()))
		}
		replies = append(replies, bytes.Clone(resp.Body()))
		ct = string(resp.Header.ContentType())
	}
	if len(replies) == 0 {
		return nil, "", errors.New("no bodies to sample")
	}
	return medianByLength(replies), ct, nil
}

// medianByLength returns the element of median length (the lower median).
func medianByLength(bs [][]byte) []byte {
	s := slices.Clone(bs)
	slices.SortStableFunc(s, func(a, b []byte) int { return len(a) - len(b) })
	return s[(len(s)-1)/2]
}
