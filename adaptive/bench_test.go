package adaptive

import (
	"context"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/clock"
)

func BenchmarkWindowAdmitSuccess(b *testing.B) {
	for _, rules := range []Rules{OpenZiti, Predictive} {
		b.Run(rules.String(), func(b *testing.B) {
			w, _ := NewWindow(Config{MinWindow: 5, MaxWindow: 250, Rules: rules})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				c, ok := w.Admit(now)
				if !ok {
					b.Fatal("rejected")
				}
				w.Success(c, now.Add(time.Millisecond))
				i++
			}
		})
	}
}

func BenchmarkTrackerAdmitComplete(b *testing.B) {
	tr, _ := NewTracker(Config{MinWindow: 5, MaxWindow: 250, Timeout: time.Minute})
	// Keep some tickets open, as under load.
	for range 100 {
		tr.Admit(t0)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		tk, _, _, ok := tr.Admit(now)
		if !ok {
			b.Fatal("rejected")
		}
		if _, err := tr.Complete(tk, Success, now); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkTrackerAdmitRejected(b *testing.B) {
	tr, _ := NewTracker(Config{MinWindow: 5, MaxWindow: 5, Timeout: time.Hour})
	for range 5 {
		tr.Admit(t0)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, ok := tr.Admit(t0); ok {
			b.Fatal("admitted")
		}
	}
}

func BenchmarkLimiterRun(b *testing.B) {
	l, _ := NewLimiter(LimiterConfig{Config: Config{MinWindow: 5, MaxWindow: 250}, Clock: clock.NewFake(t0)})
	ctx := context.Background()
	work := func() error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Run(ctx, work); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPacer(b *testing.B) {
	for _, s := range []Strategy{KeepReserve, ProportionalRemaining, ExponentialBackoff} {
		b.Run(s.String(), func(b *testing.B) {
			p, _ := NewPacer(PacerConfig{Strategy: s})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now := t0.Add(time.Duration(i) * time.Second)
				p.Delay(now)
				p.ObserveAt(now, 200, 30)
				i++
			}
		})
	}
}

// BenchmarkParseRateLimit reads a draft-11 RateLimit value with two
// policies, the agent's work on a raw POST /v1/observe.
func BenchmarkParseRateLimit(b *testing.B) {
	v := `"day";r=4000;t=3600, "second";r=9;t=1`
	b.ReportAllocs()
	for b.Loop() {
		if n, ok := ParseRateLimit(v); !ok || n != 9 {
			b.Fatal(n, ok)
		}
	}
}
