package adaptive

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/obol-dev/obol/internal/clock"
)

// ErrRejected is returned by Limiter.Run when the call was not run: its
// position was beyond the window when it asked, or it was dropped when it
// reached the head of the queue (it had likely timed out already). The
// caller may retry.
var ErrRejected = errors.New("adaptive: rejected")

// ErrBackoff is what the work given to Limiter.Run returns (or wraps) to
// report a backoff: it finished, but too late to be of use (the client had
// gone: writing its reply failed). Run returns it to the caller as is.
var ErrBackoff = errors.New("adaptive: backoff")

// LimiterConfig configures a Limiter.
type LimiterConfig struct {
	Config
	// Workers is how many calls run at once; 0 means 1 (OpenZiti's one
	// worker). The queue is one FIFO in front of them.
	Workers int
	// Clock is what Run reads to time the calls; nil means the wall clock.
	// Run never sleeps on it.
	Clock clock.Clock
}

// Limiter is the executing form of the adaptive window: Run queues the work
// in one FIFO and runs it, Workers at a time, on the caller's goroutine when
// its turn comes. How the work ended tells the window what to do:
//
//   - it returned nil: a success;
//   - it returned ErrBackoff (or an error wrapping it): a backoff;
//   - the caller's context ended while the work was still queued: a backoff
//     (the caller gave up), and the work is never run;
//   - any other error: neither; the window does not change.
//
// Make one with NewLimiter; the zero value is not usable. Safe for
// concurrent use; it starts no goroutine and needs no Close.
type Limiter struct {
	mu      sync.Mutex
	win     *Window
	clock   clock.Clock
	workers int
	running int
	queue   []*waiter
	head    int
	stats   LimiterStats
}

// LimiterStats counts what a Limiter did.
type LimiterStats struct {
	Rejected  int // calls refused at admission
	Dropped   int // calls dropped at the head of the queue
	Abandoned int // calls whose context ended while queued
	Succeeded int
	BackedOff int // calls whose work returned ErrBackoff
	Failed    int // calls whose work returned another error
}

type waiterState uint8

const (
	queued waiterState = iota
	running
	dropped
	abandoned
)

type waiter struct {
	call  Call
	ctx   context.Context
	ready chan struct{} // closed when the waiter leaves the queue
	state waiterState   // written under the limiter's lock before ready closes
}

// NewLimiter returns a limiter of cfg, or cfg's problems (ErrConfig).
func NewLimiter(cfg LimiterConfig) (*Limiter, error) {
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("%w: Workers: must be ≥ 0, got %d", ErrConfig, cfg.Workers)
	}
	w, err := NewWindow(cfg.Config)
	if err != nil {
		return nil, err
	}
	l := &Limiter{win: w, clock: cfg.Clock, workers: max(cfg.Workers, 1)}
	if l.clock == nil {
		l.clock = clock.Real{}
	}
	return l, nil
}

// Run runs f when its turn comes, if the window admits it, and returns f's
// error; ErrRejected when it was not admitted or was dropped at the head of
// the queue; ctx.Err() when ctx ended while it waited (f then never runs).
// A panic in f is passed on after the limiter is told the call failed.
func (l *Limiter) Run(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	now := l.clock.Now()
	c, ok := l.win.Admit(now)
	if !ok {
		l.stats.Rejected++
		pos, w := l.win.Outstanding()+1, l.win.Size()
		l.mu.Unlock()
		return fmt.Errorf("%w: position %d is beyond the window of %d", ErrRejected, pos, w)
	}
	wt := &waiter{call: c, ctx: ctx, ready: make(chan struct{})}
	l.queue = append(l.queue, wt)
	l.dispatch()
	l.mu.Unlock()

	select {
	case <-wt.ready:
	case <-ctx.Done():
		l.mu.Lock()
		if wt.state == queued {
			wt.state = abandoned
			l.stats.Abandoned++
			l.win.Backoff(wt.call, l.clock.Now())
			l.mu.Unlock()
			return ctx.Err()
		}
		l.mu.Unlock()
		<-wt.ready // it left the queue already: ready is closed
	}
	switch wt.state {
	case dropped:
		return fmt.Errorf("%w: dropped at the head of the queue (admitted at position %d)", ErrRejected, wt.call.Pos)
	case abandoned:
		return ctx.Err()
	}
	done := false
	defer func() {
		if !done {
			l.finish(wt, errors.New("adaptive: the work panicked"))
		}
	}()
	err := f()
	done = true
	l.finish(wt, err)
	return err
}

// finish records how a running call ended and lets the next one in.
func (l *Limiter) finish(wt *waiter, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	switch {
	case err == nil:
		l.stats.Succeeded++
		l.win.Success(wt.call, now)
	case errors.Is(err, ErrBackoff):
		l.stats.BackedOff++
		l.win.Backoff(wt.call, now)
	default:
		l.stats.Failed++
		l.win.Release(wt.call)
	}
	l.running--
	l.dispatch()
}

// dispatch lets queued calls run while a worker is free, dropping the stale
// and skipping the abandoned. The caller holds l.mu.
func (l *Limiter) dispatch() {
	now := l.clock.Now()
	for l.running < l.workers && l.head < len(l.queue) {
		wt := l.queue[l.head]
		l.queue[l.head] = nil
		l.head++
		switch {
		case wt.state == abandoned:
			// counted as a backoff when its caller left
		case wt.ctx.Err() != nil:
			wt.state = abandoned
			l.stats.Abandoned++
			l.win.Backoff(wt.call, now)
			close(wt.ready)
		case l.win.Stale(wt.call, now):
			wt.state = dropped
			l.stats.Dropped++
			l.win.Release(wt.call)
			close(wt.ready)
		default:
			wt.state = running
			l.running++
			close(wt.ready)
		}
	}
	if l.head == len(l.queue) {
		l.queue, l.head = l.queue[:0], 0
	} else if l.head > 64 && l.head > len(l.queue)/2 {
		n := copy(l.queue, l.queue[l.head:])
		clear(l.queue[n:])
		l.queue, l.head = l.queue[:n], 0
	}
}

// Window returns the window now.
func (l *Limiter) Window() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.win.Size()
}

// Outstanding returns the calls admitted and not finished: queued and
// running.
func (l *Limiter) Outstanding() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.win.Outstanding()
}

// Stats returns the limiter's counts so far.
func (l *Limiter) Stats() LimiterStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}
