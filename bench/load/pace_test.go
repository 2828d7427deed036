package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, tc := range []struct {
		name        string
		start       int64
		rate        float64
		conns, g    int
		wantDue     []int64 // the first requests' due instants
		wantSpacing int64   // between consecutive requests, for many of them
	}{
		{name: "one connection", start: 0, rate: 1000, conns: 1, g: 0, wantDue: []int64{0, ms, 2 * ms, 3 * ms}, wantSpacing: ms},
		{name: "connection 0 of 4", start: 5 * ms, rate: 1000, conns: 4, g: 0, wantDue: []int64{5 * ms, 9 * ms, 13 * ms}, wantSpacing: 4 * ms},
		{name: "connection 3 of 4, staggered", start: 5 * ms, rate: 1000, conns: 4, g: 3, wantDue: []int64{8 * ms, 12 * ms, 16 * ms}, wantSpacing: 4 * ms},
		// 64 connections at 25,000/s: every 2.56 ms each, 40 µs apart.
		{name: "connection 1 of 64", start: 0, rate: 25000, conns: 64, g: 1, wantDue: []int64{40_000, 2_600_000, 5_160_000}, wantSpacing: 2_560_000},
		// A rate above 1/ns still moves forward.
		{name: "absurd rate", start: 0, rate: 1e12, conns: 1, g: 0, wantDue: []int64{0, 1, 2}, wantSpacing: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSchedule(tc.start, tc.rate, tc.conns, tc.g)
			for i, want := range tc.wantDue {
				if got := s.due(); got != want {
					t.Fatalf("request %d due at %d, want %d", i, got, want)
				}
				s.advance()
			}
			// No drift: request k is due at first + k·interval, to the ns.
			s0 := newSchedule(tc.start, tc.rate, tc.conns, tc.g)
			first := s0.due()
			s.k = 1_000_000
			if got, want := s.due(), first+1_000_000*tc.wantSpacing; got != want {
				t.Errorf("request 1,000,000 due at %d, want %d", got, want)
			}
		})
	}
}

// TestSchedulesInterleave checks that the connections' schedules together
// make the total rate, evenly spaced.
func TestSchedulesInterleave(t *testing.T) {
	const conns, rate = 8, 20000.0 // one request every 50 µs in all
	var dues []int64
	for g := range conns {
		s := newSchedule(0, rate, conns, g)
		for range 100 {
			dues = append(dues, s.due())
			s.advance()
		}
	}
	slices.Sort(dues)
	for i := 1; i < len(dues); i++ {
		if gap := dues[i] - dues[i-1]; gap != 50_000 {
			t.Fatalf("requests %d and %d are %d ns apart, want 50 µs", i-1, i, gap)
		}
	}
}

func TestSendRule(t *testing.T) {
	const us = int64(time.Microsecond)
	for _, tc := range []struct {
		name       string
		due, now   int64
		send       bool
		wantOrigin int64 // when sent at now
	}{
		{name: "on time", due: 1000 * us, now: 1000 * us, send: true, wantOrigin: 1000 * us},
		// Late: it leaves at once, and its latency counts from when it was
		// due (the coordinated-omission correction).
		{name: "late", due: 1000 * us, now: 1300 * us, send: true, wantOrigin: 1000 * us},
		{name: "very late", due: 0, now: 10_000 * us, send: true, wantOrigin: 0},
		// Early by less than the slack: it leaves now, and its latency
		// counts from now, not from the later due instant.
		{name: "early within slack", due: 1000 * us, now: 960 * us, send: true, wantOrigin: 960 * us},
		{name: "early by the slack", due: 1000 * us, now: 950 * us, send: true, wantOrigin: 950 * us},
		{name: "early beyond slack", due: 1000 * us, now: 949 * us, send: false, wantOrigin: 0},
		{name: "far ahead", due: 1000 * us, now: 0, send: false, wantOrigin: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sendNow(tc.due, tc.now); got != tc.send {
				t.Fatalf("sendNow(due %d, now %d) = %v", tc.due, tc.now, got)
			}
			if !tc.send {
				// It sleeps until the slack before the due instant, and then
				// sends.
				if w := wakeAt(tc.due); w <= tc.now || !sendNow(tc.due, w) || sendNow(tc.due, w-1) {
					t.Errorf("wakeAt(%d) = %d", tc.due, w)
				}
				return
			}
			if got := latencyOrigin(tc.due, tc.now); got != tc.wantOrigin {
				t.Errorf("latency origin %d, want %d", got, tc.wantOrigin)
			}
		})
	}
}

func TestConnHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h connHeap
	var in []*lconn
	check := func() {
		t.Helper()
		for i, c := range h.s {
			if c.heapIdx != i {
				t.Fatalf("heap slot %d holds a connection that thinks it is at %d", i, c.heapIdx)
			}
		}
	}
	for round := range 20 {
		for range rng.IntN(50) {
			c := &lconn{wake: rng.Int64N(1000), heapIdx: -1}
			h.push(c)
			in = append(in, c)
			check()
		}
		pops := rng.IntN(h.len() + 1)
		if round == 19 {
			pops = h.len()
		}
		for range pops {
			want := slices.MinFunc(in, func(a, b *lconn) int { return int(a.wake - b.wake) }).wake
			if h.min().wake != want {
				t.Fatalf("min %d, want %d", h.min().wake, want)
			}
			c := h.pop()
			if c.wake != want || c.heapIdx != -1 {
				t.Fatalf("popped wake %d (index %d), want %d", c.wake, c.heapIdx, want)
			}
			in = slices.DeleteFunc(in, func(o *lconn) bool { return o == c })
			check()
		}
	}
	if h.len() != 0 || len(in) != 0 {
		t.Fatalf("%d left in the heap, %d outside", h.len(), len(in))
	}
}
