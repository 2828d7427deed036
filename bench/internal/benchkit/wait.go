package benchkit

import (
	"context"
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
