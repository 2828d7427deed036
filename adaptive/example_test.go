package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/obol-dev/obol/adaptive"
)

func ExampleLimiter() {
	l, err := adaptive.NewLimiter(adaptive.LimiterConfig{Config: adaptive.Config{MinWindow: 5, MaxWindow: 250}})
	if err != nil {
		panic(err)
	}
	// A handler runs its work through the limiter; the caller's context
	// carries its patience: if it ends while the work is queued, the work
	// never runs and the window learns of the backoff.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = l.Run(ctx, func() error {
		// ... the work; return adaptive.ErrBackoff if the reply could not
		// be written because the client had gone.
		return nil
	})
	switch {
	case errors.Is(err, adaptive.ErrRejected):
		fmt.Println("429: try again")
	case err != nil:
		fmt.Println("failed:", err)
	default:
		fmt.Println("done; window", l.Window())
	}
	// Output: done; window 250
}

func ExampleTracker() {
	tr, err := adaptive.NewTracker(adaptive.Config{MinWindow: 1, MaxWindow: 20, Timeout: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tk, pos, window, ok := tr.Admit(t0)
	fmt.Println(pos, window, ok)
	// The caller at position 1 gave up: the window drops to
	// max(MinWindow, 1 − Margin).
	window, err = tr.Complete(tk, adaptive.Backoff, t0.Add(6*time.Second))
	fmt.Println(window, err)
	// Output:
	// 1 20 true
	// 1 <nil>
}

func ExamplePacer() {
	p, err := adaptive.NewPacer(adaptive.PacerConfig{Limit: 4500, Period: time.Hour})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		if err := p.Wait(ctx); err != nil {
			return
		}
		// resp, err := client.Do(req) ...
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Ratelimit": {`"api";r=4000;t=1`}}}
		remaining, ok := adaptive.Remaining(resp.Header)
		if !ok {
			remaining = -1
		}
		p.Observe(resp.StatusCode, remaining)
	}
	fmt.Println("paced")
	// Output: paced
}
