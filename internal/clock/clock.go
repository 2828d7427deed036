package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock is a source of time for background loops. Implementations are safe
// for concurrent use.
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// Sleep waits for d, or until ctx is done, and returns ctx.Err() in that
	// case. A d ≤ 0 returns at once (nil unless ctx is already done).
	Sleep(ctx context.Context, d time.Duration) error
	// After returns a channel that receives the instant once d has passed.
	// The channel has a buffer of one and is never closed.
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Sleep waits for d or until ctx is done.
func (Real) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fake is a manual clock: its time moves only through Advance and Set. The
// zero value is not usable; use NewFake. Safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
	changed chan struct{} // closed and replaced whenever waiters change
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock reading t.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives the fake time once Advance has
// carried it to now+d or beyond. A d ≤ 0 fires at once.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, &waiter{at: f.now.Add(d), ch: ch})
	f.notifyLocked()
	return ch
}

// Sleep waits until the fake time reaches now+d or ctx is done.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	ch := f.After(d)
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		f.remove(ch)
		return ctx.Err()
	}
}

func (f *Fake) remove(ch <-chan time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, w := range f.waiters {
		if w.ch == ch {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			f.notifyLocked()
			return
		}
	}
}

// Advance moves the fake time forward by d (d < 0 is treated as 0) and wakes,
// in deadline order, every sleeper and timer whose deadline it reaches.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		d = 0
	}
	f.mu.Lock()
	f.setLocked(f.now.Add(d))
	f.mu.Unlock()
}

// Set moves the fake time to t if t is later than the current time.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	if t.After(f.now) {
		f.setLocked(t)
	}
	f.mu.Unlock()
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	sort.SliceStable(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	n := 0
	for _, w := range f.waiters {
		if w.at.After(t) {
			break
		}
		w.ch <- t
		n++
	}
	if n > 0 {
		f.waiters = append(f.waiters[:0], f.waiters[n:]...)
		f.notifyLocked()
	}
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Waiters returns how many sleepers and timers are pending.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// Next returns the earliest pending deadline, and false when nothing waits.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.waiters) == 0 {
		return time.Time{}, false
	}
	min := f.waiters[0].at
	for _, w := range f.waiters[1:] {
		if w.at.Before(min) {
			min = w.at
		}
	}
	return min, true
}

// BlockUntil waits until at least n sleepers or timers are pending, or ctx is
// done; tests use it to know a goroutine has gone to sleep before they
// Advance.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.waiters) >= n {
			f.mu.Unlock()
			return nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
