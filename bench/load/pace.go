package main

import (
	"math/rand/v2"
	"time"
)

// pace.go is the open-loop schedule of one connection and the rule that
// decides when a request leaves and from which instant its latency counts.
// Instants are nanoseconds on the monotonic clock since the load's epoch.

// aheadSlack is how early a request may leave: a connection whose next
// request is due within aheadSlack sends it at once instead of sleeping, so
// that the loop sleeps only for a gap longer than that and sends what falls
// due close together in one wake-up. A request sent early has its latency
// measured from when it left (never from the later scheduled instant, which
// would hide part of it).
const aheadSlack = int64(50 * time.Microsecond)

// schedule is one connection's share of an open-loop rate: its request k is
// due at first + k·interval.
type schedule struct {
	first    int64   // when request 0 is due
	interval float64 // nanoseconds between two requests of the connection
	k        int64   // the next request's index
}

// newSchedule is the schedule of connection g of conns sharing rate requests
// per second in total, beginning at start: each connection sends every
// conns/rate seconds, connection g offset by g/conns of that interval, so
// that the connections' requests interleave evenly.
func newSchedule(start int64, rate float64, conns, g int) schedule {
	interval := max(float64(conns)/rate*1e9, 1)
	return schedule{first: start + int64(interval*float64(g)/float64(conns)), interval: interval}
}

// due is when the next request is due.
func (s *schedule) due() int64 { return s.first + int64(float64(s.k)*s.interval) }

// advance moves to the next request.
func (s *schedule) advance() { s.k++ }

// sendNow reports whether a request due at due leaves at now: when it is due
// already (late: it leaves at once) or within aheadSlack.
func sendNow(due, now int64) bool { return due-now <= aheadSlack }

// latencyOrigin is the instant a request's latency is measured from: its
// scheduled instant when it left late (the coordinated-omission correction:
// the wait for a stalled server, or for the generator, is charged to it), the
// instant it left when that was earlier than scheduled.
func latencyOrigin(due, sent int64) int64 { return min(due, sent) }

// wakeAt is when the loop must wake up for a request due at due: early by
// aheadSlack, so that a wake-up a little late still sends it on time.
func wakeAt(due int64) int64 { return due - aheadSlack }

// lconn is one connection of the loop.
type lconn struct {
	idx      int // index in the loop, the tag of its epoll events
	g        int // index among all the connections of the load
	fd       int // -1 when not connected
	rng      *rand.Rand
	sched    schedule // open loop
	inflight bool     // a request is out, its reply not in
	origin   int64    // the in-flight request's latency origin
	sentAt   int64    // when it left, for the timeout
	out      []byte   // the rest of a request the socket did not take at once
	buf      []byte   // read buffer; buf[:have] is a reply's beginning
	have     int
	replies  int  // replies received, for sampling
	done     bool // sends no more in this phase
	heapIdx  int  // index in the loop's heap, -1 when not in it
	wake     int64
}

// connHeap is a binary min-heap of idle connections by when they next need
// the loop (their wake). Each connection knows its place (heapIdx, -1 when
// not in the heap).
type connHeap struct{ s []*lconn }

func (h *connHeap) len() int           { return len(h.s) }
func (h *connHeap) min() *lconn        { return h.s[0] }
func (h *connHeap) less(i, j int) bool { return h.s[i].wake < h.s[j].wake }

func (h *connHeap) swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	h.s[i].heapIdx, h.s[j].heapIdx = i, j
}

// push adds c, keyed by c.wake.
func (h *connHeap) push(c *lconn) {
	c.heapIdx = len(h.s)
	h.s = append(h.s, c)
	for i := c.heapIdx; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.swap(i, p)
		i = p
	}
}

// pop removes and returns the connection with the earliest wake.
func (h *connHeap) pop() *lconn {
	c := h.s[0]
	last := len(h.s) - 1
	h.swap(0, last)
	h.s[last] = nil
	h.s = h.s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.s) && h.less(l, m) {
			m = l
		}
		if r < len(h.s) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h.swap(i, m)
		i = m
	}
	c.heapIdx = -1
	return c
}
