package adaptive

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/clock"
)

// job is a call running through a Limiter in its own goroutine; the test
// decides when its work returns.
type job struct {
	started chan struct{} // closed when the work starts
	finish  chan error    // the work returns what is sent
	done    chan error    // Run's result
	cancel  context.CancelFunc
}

func start(t *testing.T, l *Limiter) *job {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	j := &job{started: make(chan struct{}), finish: make(chan error, 1), done: make(chan error, 1), cancel: cancel}
	go func() {
		j.done <- l.Run(ctx, func() error {
			close(j.started)
			return <-j.finish
		})
	}()
	t.Cleanup(cancel)
	return j
}

func (j *job) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-j.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the work did not start")
	}
}

func (j *job) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-j.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func (j *job) notStarted(t *testing.T) {
	t.Helper()
	select {
	case <-j.started:
		t.Fatal("the work started out of turn")
	default:
	}
}

// waitOutstanding waits until the limiter has n calls outstanding (the
// goroutines of start have reached the queue).
func waitOutstanding(t *testing.T, l *Limiter, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.Outstanding() != n {
		if time.Now().After(deadline) {
			t.Fatalf("outstanding %d, want %d", l.Outstanding(), n)
		}
		runtime.Gosched() // waiting for goroutines, not for time to pass
	}
}

func newLimiter(t *testing.T, cfg Config, clk clock.Clock) *Limiter {
	t.Helper()
	l, err := NewLimiter(LimiterConfig{Config: cfg, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLimiterRunsInOrderOneAtATime(t *testing.T) {
	clk := clock.NewFake(t0)
	l := newLimiter(t, Config{MinWindow: 1, MaxWindow: 3, GrowEvery: 1}, clk)
	a := start(t, l)
	a.waitStarted(t)
	b := start(t, l)
	waitOutstanding(t, l, 2)
	c := start(t, l)
	waitOutstanding(t, l, 3)
	// The window is full: a fourth call is rejected at once.
	if err := l.Run(context.Background(), func() error { t.Error("ran"); return nil }); !errors.Is(err, ErrRejected) {
		t.Fatalf("a fourth call: %v, want ErrRejected", err)
	}
	b.notStarted(t)
	clk.Advance(25 * time.Millisecond)
	a.finish <- nil
	if err := a.result(t); err != nil {
		t.Fatal(err)
	}
	b.waitStarted(t)
	c.notStarted(t)
	b.finish <- nil
	c.waitStarted(t)
	c.finish <- nil
	if err := b.result(t); err != nil {
		t.Fatal(err)
	}
	if err := c.result(t); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Succeeded != 3 || st.Rejected != 1 || l.Outstanding() != 0 {
		t.Fatalf("stats %+v outstanding %d", st, l.Outstanding())
	}
}

func TestLimiterBackoffShrinksAndDropsAtHead(t *testing.T) {
	clk := clock.NewFake(t0)
	l := newLimiter(t, Config{MinWindow: 1, MaxWindow: 30, Margin: 2}, clk)
	jobs := []*job{start(t, l)}
	jobs[0].waitStarted(t)
	for i := 1; i < 6; i++ { // positions 2…6 queued
		jobs = append(jobs, start(t, l))
		waitOutstanding(t, l, i+1)
	}
	// The first call's work reports a backoff at position 1: the window
	// drops to the floor, 1. Positions 2 and 3 are still within 1 + margin.
	jobs[0].finish <- ErrBackoff
	if err := jobs[0].result(t); !errors.Is(err, ErrBackoff) {
		t.Fatalf("Run returned %v, want the work's ErrBackoff", err)
	}
	if l.Window() != 1 {
		t.Fatalf("window %d after a backoff at position 1, want 1", l.Window())
	}
	jobs[1].waitStarted(t)
	jobs[1].finish <- nil
	jobs[2].waitStarted(t)
	jobs[2].finish <- nil
	// Positions 4, 5, 6 are beyond 1 + 2: dropped without running.
	for _, j := range jobs[3:] {
		if err := j.result(t); !errors.Is(err, ErrRejected) {
			t.Fatalf("a stale call: %v, want ErrRejected", err)
		}
		j.notStarted(t)
	}
	if st := l.Stats(); st.Dropped != 3 || st.BackedOff != 1 || l.Outstanding() != 0 {
		t.Fatalf("stats %+v outstanding %d", st, l.Outstanding())
	}
}

func TestLimiterCallerGivesUp(t *testing.T) {
	clk := clock.NewFake(t0)
	l := newLimiter(t, Config{MinWindow: 1, MaxWindow: 50, Margin: 1}, clk)
	a := start(t, l)
	a.waitStarted(t)
	var waiting []*job
	for i := range 20 {
		waiting = append(waiting, start(t, l))
		waitOutstanding(t, l, i+2)
	}
	// The caller at position 21 gives up: a backoff at 21 → window 20.
	clk.Advance(5 * time.Second)
	waiting[19].cancel()
	if err := waiting[19].result(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v", err)
	}
	if l.Window() != 20 || l.Outstanding() != 20 {
		t.Fatalf("window %d outstanding %d, want 20 and 20", l.Window(), l.Outstanding())
	}
	// The rest run in order; the abandoned work never does.
	a.finish <- nil
	for _, j := range waiting[:19] {
		j.waitStarted(t)
		j.finish <- nil
		if err := j.result(t); err != nil {
			t.Fatal(err)
		}
	}
	waiting[19].notStarted(t)
	if st := l.Stats(); st.Abandoned != 1 || st.Succeeded != 20 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLimiterOtherErrorsAndPanics(t *testing.T) {
	l := newLimiter(t, Config{MinWindow: 1, MaxWindow: 5}, clock.NewFake(t0))
	boom := errors.New("boom")
	if err := l.Run(context.Background(), func() error { return boom }); err != boom {
		t.Fatalf("Run returned %v, want the work's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic was swallowed")
			}
		}()
		_ = l.Run(context.Background(), func() error { panic("work") })
	}()
	if st := l.Stats(); st.Failed != 2 || l.Window() != 5 || l.Outstanding() != 0 {
		t.Fatalf("stats %+v window %d outstanding %d, want 2 failures and nothing changed", st, l.Window(), l.Outstanding())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Run(ctx, func() error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("a done context: %v", err)
	}
}
