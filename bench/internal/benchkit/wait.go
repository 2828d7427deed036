package benchkit

import (
	"context"
	"fmt"
	"os"
	"time"
)

// SleepUntil waits for t or ctx's end, whichever comes first, and returns
// ctx's error (nil when t came first). A t already past returns at once.
func SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TimeoutError is Poll's error when limit passed before try succeeded:
// Last is try's last error.
type TimeoutError struct {
	Limit time.Duration
	Last  error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("not within %v: %v", e.Limit, e.Last)
}

func (e *TimeoutError) Unwrap() error { return e.Last }

// stopError is a try's error that ends Poll at once.
type stopError struct{ err error }

func (e stopError) Error() string { return e.err.Error() }

// Stop wraps err, a try's error, so that Poll returns err at once instead
// of trying again (the child being waited for has exited, say).
func Stop(err error) error { return stopError{err} }

// Poll calls try, then again every interval after each failure, until it
// returns nil, for at most limit: it returns nil once try has; err when try
// returns Stop(err); ctx's error when ctx ends first; a *TimeoutError with
// try's last error when limit passes. try is called at least once unless
// ctx has ended. Poll is for what gives no event to wait on: a process
// coming up on a socket or a port it owns.
func Poll(ctx context.Context, limit, interval time.Duration, try func() error) error {
	deadline := time.Now().Add(limit)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := try()
		if err == nil {
			return nil
		}
		if s, ok := err.(stopError); ok {
			return s.err
		}
		if !time.Now().Before(deadline) {
			return &TimeoutError{Limit: limit, Last: err}
		}
		next := time.Now().Add(interval)
		if next.After(deadline) {
			next = deadline
		}
		_ = SleepUntil(ctx, next)
	}
}

// WaitSocket waits, for at most limit, until path is a Unix socket (the
// process that listens on it has started to).
func WaitSocket(ctx context.Context, path string, limit time.Duration) error {
	return Poll(ctx, limit, 10*time.Millisecond, func() error {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if st.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%s is not a socket (%v)", path, st.Mode().Type())
		}
		return nil
	})
}
