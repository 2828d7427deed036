package main

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// server is the rate-limited API: it answers a request at t with 200 or
// 429 and the remaining count.
type server interface {
	serve(t time.Time) (status, remaining int)
}

// gcraServer is obol's own GCRA (package local, kind gcra): a bucket of
// limit refilled at limit per period, emptied at the epoch by one request
// of limit tokens.
type gcraServer struct{ e *local.Engine }

const serverResource = "bench/api"

func newGCRAServer(limit int, period time.Duration) *gcraServer {
	cfg := &config.Config{Resources: map[string]*config.Resource{
		serverResource: {Kind: config.KindGCRA, Burst: limit, Count: limit, Period: period},
	}}
	s := &gcraServer{e: local.New(cfg)}
	if d, err := s.e.Request(epoch, serverResource, "account", limit, limit); err != nil || d.Remaining != 0 {
		panic(fmt.Sprintf("emptying the bucket: %+v %v", d, err))
	}
	return s
}

func (s *gcraServer) serve(t time.Time) (int, int) {
	d, err := s.e.Request(t, serverResource, "account", 1, 1)
	if err != nil {
		panic(err)
	}
	if d.Granted == 0 {
		return http.StatusTooManyRequests, d.Remaining
	}
	return http.StatusOK, d.Remaining
}

// countServer starts with n requests and never refills (rate_throttle_client's
// decrease-only server).
type countServer struct{ left int }

func (s *countServer) serve(time.Time) (int, int) {
	if s.left >= 1 {
		s.left--
		return http.StatusOK, s.left
	}
	return http.StatusTooManyRequests, 0
}

// scenario is one run: procs×threads clients, each process sharing one
// throttle (a PacerGroup) between its threads, as rate_throttle_client's
// benchmark does.
type scenario struct {
	strategy   adaptive.Strategy
	procs      int
	threads    int
	request    time.Duration // each request's own duration
	limit      int           // the quota the pacers are told (requests per period)
	period     time.Duration
	duration   time.Duration // stop sending after this (0 = until stopUnder)
	startSleep time.Duration
	stopUnder  int // a client stops once it sees remaining ≤ stopUnder (-1 = never)
	seed       uint64
}

type clientStats struct {
	requests, limited int
	stoppedAt         time.Duration
}

type runResult struct {
	clients  []clientStats
	maxSleep time.Duration
	end      time.Duration // when the last client stopped
}

type event struct {
	at    time.Time
	seq   uint64
	th    int
	reply bool
}

type events []event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// run1 simulates sc against srv on virtual time. A thread asks its pacer
// for a delay, sends the request after it, the server decides at the send
// instant, and the thread sees the reply sc.request later.
func run1(sc scenario, srv server) runResult {
	n := sc.procs * sc.threads
	groups := make([]*adaptive.PacerGroup, sc.procs)
	pacers := make([]*adaptive.Pacer, n)
	for i := range groups {
		g, err := adaptive.NewPacerGroup(adaptive.PacerConfig{
			Strategy:   sc.strategy,
			Limit:      sc.limit,
			Period:     sc.period,
			StartSleep: sc.startSleep,
			Rand:       rand.New(rand.NewPCG(sc.seed, uint64(i)+1)),
		})
		if err != nil {
			panic(err)
		}
		groups[i] = g
		for j := range sc.threads {
			pacers[i*sc.threads+j] = g.Pacer()
		}
	}
	stats := make([]clientStats, n)
	pending := make([]struct{ status, remaining int }, n)
	var h events
	var seq uint64
	push := func(e event) {
		seq++
		e.seq = seq
		heap.Push(&h, e)
	}
	end := epoch.Add(sc.duration)
	const limit = 10 * time.Hour // a run that never stops is a bug of the strategy
	for i := range n {
		push(event{at: epoch.Add(pacers[i].Delay(epoch)), th: i})
	}
	var last time.Time
	for h.Len() > 0 {
		e := heap.Pop(&h).(event)
		if e.at.Sub(epoch) > limit {
			panic(fmt.Sprintf("%v: a client still runs after %v", sc.strategy, limit))
		}
		p := pacers[e.th]
		st := &stats[e.th]
		if !e.reply {
			if sc.duration > 0 && !e.at.Before(end) {
				st.stoppedAt = end.Sub(epoch)
				continue
			}
			status, remaining := srv.serve(e.at)
			st.requests++
			if status == http.StatusTooManyRequests {
				st.limited++
			}
			pending[e.th].status, pending[e.th].remaining = status, remaining
			push(event{at: e.at.Add(sc.request), th: e.th, reply: true})
			continue
		}
		r := pending[e.th]
		p.ObserveAt(e.at, r.status, r.remaining)
		if sc.stopUnder >= 0 && r.remaining <= sc.stopUnder {
			st.stoppedAt = e.at.Sub(epoch)
			last = e.at
			continue
		}
		push(event{at: e.at.Add(p.Delay(e.at)), th: e.th})
	}
	res := runResult{clients: stats}
	for _, g := range groups {
		res.maxSleep = max(res.maxSleep, g.MaxSleep())
	}
	if !last.IsZero() {
		res.end = last.Sub(epoch)
	}
	return res
}

// metrics are rate_throttle_client's four figures.
type metrics struct {
	retryRate float64 // mean over clients of 429s ÷ requests
	maxSleep  float64 // seconds
	stdev     float64 // sample standard deviation of request counts
	clear     float64 // seconds to clear the workload
	meanReqs  float64
}

func summarize(r runResult) metrics {
	var m metrics
	var sum, sumsq float64
	for _, c := range r.clients {
		if c.requests > 0 {
			m.retryRate += float64(c.limited) / float64(c.requests)
		}
		sum += float64(c.requests)
	}
	n := float64(len(r.clients))
	m.retryRate /= n
	m.meanReqs = sum / n
	for _, c := range r.clients {
		d := float64(c.requests) - m.meanReqs
		sumsq += d * d
	}
	if n > 1 {
		m.stdev = math.Sqrt(sumsq / (n - 1))
	}
	m.maxSleep = r.maxSleep.Seconds()
	return m
}
