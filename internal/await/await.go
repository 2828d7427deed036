// This file has one job: waiting for a condition, on an event (Signal,
// Until) or, where none exists, by polling (Poll).

package await

import (
	"sync"
	"testing"
	"time"
)

// Signal is an event a test waits on: whoever changes the state a condition
// reads calls Notify. The zero value is ready to use. Safe for concurrent
// use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{} // closed by the next Notify; nil until first asked for
}

// Notify wakes every waiter of C.
func (s *Signal) Notify() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

// C returns a channel closed by the next Notify. Read the state after
// taking the channel, so that a change between the two is not missed.
func (s *Signal) C() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Until returns once cond holds, re-checking it each time s is notified.
// It fails t, naming what it waited for, when d passes first.
func Until(t testing.TB, d time.Duration, what string, s *Signal, cond func() bool) {
	t.Helper()
	if !UntilOK(d, s, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// UntilOK is Until without a test: it reports whether cond held within d.
func UntilOK(d time.Duration, s *Signal, cond func() bool) bool {
	timeout := time.NewTimer(max(d, 0))
	defer timeout.Stop()
	for {
		changed := s.C()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-timeout.C:
			return cond()
		}
	}
}

// Poll returns once cond holds, re-checking it after 1 ms, then at
// intervals that double up to 50 ms. It fails t, naming what it waited for,
// when d passes first. Use it only for state no event announces, and say
// why in a comment where it is called.
func Poll(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !PollOK(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// PollOK is Poll without a test: it reports whether cond held within d.
func PollOK(d time.Duration, cond func() bool) bool {
	timeout := time.NewTimer(max(d, 0))
	defer timeout.Stop()
	every := time.Millisecond
	tick := time.NewTimer(every)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
			every = min(2*every, maxPoll)
			tick.Reset(every)
		case <-timeout.C:
			return cond()
		}
	}
	return true
}

// maxPoll is Poll's longest interval between two checks.
const maxPoll = 50 * time.Millisecond
