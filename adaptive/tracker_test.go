package adaptive

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func newTracker(t *testing.T, cfg Config) *Tracker {
	t.Helper()
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTrackerSteps(t *testing.T) {
	tr := newTracker(t, Config{MinWindow: 1, MaxWindow: 3, GrowEvery: 1, Margin: 1, Timeout: time.Second})
	type admit struct {
		tk       Ticket
		pos, win int
		ok       bool
	}
	do := func(at int) admit {
		tk, pos, win, ok := tr.Admit(ms(at))
		return admit{tk, pos, win, ok}
	}
	// t0: three admitted, the fourth rejected.
	a := do(0)
	b := do(0)
	c := do(0)
	if !a.ok || !b.ok || !c.ok || a.pos != 1 || b.pos != 2 || c.pos != 3 || c.win != 3 {
		t.Fatalf("admissions %+v %+v %+v", a, b, c)
	}
	if r := do(0); r.ok || r.tk != 0 || r.pos != 4 || r.win != 3 {
		t.Fatalf("a fourth call: %+v, want rejected at position 4 with window 3", r)
	}
	// t1 = 100 ms: c backs off at position 3 → window 2.
	if w, err := tr.Complete(c.tk, Backoff, ms(100)); err != nil || w != 2 {
		t.Fatalf("backoff: window %d err %v, want 2", w, err)
	}
	// Completing it again is an unknown ticket, and changes nothing.
	if w, err := tr.Complete(c.tk, Success, ms(100)); !errors.Is(err, ErrUnknownTicket) || w != 2 {
		t.Fatalf("second completion: window %d err %v, want ErrUnknownTicket and 2", w, err)
	}
	if _, err := tr.Complete(999, Success, ms(100)); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("a ticket never issued: %v", err)
	}
	// t2 = 200 ms: a succeeds → +1 (grow_every 1) → 3.
	if w, err := tr.Complete(a.tk, Success, ms(200)); err != nil || w != 3 {
		t.Fatalf("success: window %d err %v, want 3", w, err)
	}
	// t3 = 999 ms: b (admitted at t0) is still live.
	if n := tr.Sweep(ms(999)); n != 0 || tr.Outstanding() != 1 {
		t.Fatalf("sweep at 999ms expired %d (outstanding %d), want 0 and 1", n, tr.Outstanding())
	}
	// t4 = 1000 ms = t0 + timeout: b expires as a backoff at position 2 → 1.
	if n := tr.Sweep(ms(1000)); n != 1 || tr.Outstanding() != 0 || tr.Window() != 1 {
		t.Fatalf("sweep at 1000ms expired %d, outstanding %d, window %d; want 1, 0, 1", n, tr.Outstanding(), tr.Window())
	}
	if _, err := tr.Complete(b.tk, Success, ms(1001)); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("completing an expired ticket: %v, want ErrUnknownTicket", err)
	}
}

func TestTrackerCompleteSweepsFirst(t *testing.T) {
	tr := newTracker(t, Config{MinWindow: 1, MaxWindow: 50, Timeout: time.Second})
	tk, _, _, _ := tr.Admit(t0)
	// No Sweep in between: completing at the timeout finds it expired.
	if _, err := tr.Complete(tk, Success, ms(1000)); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("complete at the timeout: %v, want ErrUnknownTicket (expired)", err)
	}
	if tr.Outstanding() != 0 {
		t.Fatalf("outstanding %d", tr.Outstanding())
	}
}

// TestTrackerManyTickets completes tickets in random order, some never,
// and checks that every ticket is accounted for exactly once and the
// admission log stays bounded.
func TestTrackerManyTickets(t *testing.T) {
	tr := newTracker(t, Config{MinWindow: 1000, MaxWindow: 1000, Timeout: time.Minute})
	rng := rand.New(rand.NewPCG(1, 2))
	var open []Ticket
	stuck, _, _, _ := tr.Admit(t0) // never completed until it expires
	completed := 0
	for i := range 100000 {
		now := ms(i / 10)
		if tk, _, _, ok := tr.Admit(now); ok {
			open = append(open, tk)
		}
		for len(open) > 50 {
			j := rng.IntN(len(open))
			if _, err := tr.Complete(open[j], Success, now); err != nil {
				t.Fatalf("ticket %d: %v", open[j], err)
			}
			completed++
			open[j] = open[len(open)-1]
			open = open[:len(open)-1]
		}
		if len(tr.order)-tr.head > 4*len(tr.open)+64+1 {
			t.Fatalf("admission log %d entries for %d open tickets", len(tr.order)-tr.head, len(tr.open))
		}
	}
	if tr.Outstanding() != len(open)+1 {
		t.Fatalf("outstanding %d, want %d", tr.Outstanding(), len(open)+1)
	}
	if n := tr.Sweep(t0.Add(time.Minute)); n != 1 {
		t.Fatalf("the stuck ticket: swept %d", n)
	}
	if _, err := tr.Complete(stuck, Success, t0.Add(time.Minute)); !errors.Is(err, ErrUnknownTicket) {
		t.Fatal("the stuck ticket completed after expiring")
	}
}

func TestTrackerReconfigure(t *testing.T) {
	tr := newTracker(t, Config{MinWindow: 1, MaxWindow: 10})
	tk, _, _, _ := tr.Admit(t0)
	if err := tr.Reconfigure(Config{MinWindow: 1, MaxWindow: 4}); err != nil {
		t.Fatal(err)
	}
	if tr.Window() != 4 {
		t.Fatalf("window %d, want 4", tr.Window())
	}
	if _, err := tr.Complete(tk, Success, ms(1)); err != nil {
		t.Fatalf("a ticket from before the reconfiguration: %v", err)
	}
}

// TestTrackerExpired checks that Expired counts the tickets of every
// sweep: Admit's, Complete's and Sweep's, each once.
func TestTrackerExpired(t *testing.T) {
	tr := newTracker(t, Config{MinWindow: 10, MaxWindow: 10, Timeout: time.Second})
	steps := []struct {
		name string
		do   func()
		want uint64
	}{
		{name: "three admitted at 0 ms", do: func() {
			for range 3 {
				tr.Admit(ms(0))
			}
		}, want: 0},
		{name: "one admitted at 500 ms", do: func() { tr.Admit(ms(500)) }, want: 0},
		{name: "an admit at 1000 ms sweeps the three of 0 ms", do: func() { tr.Admit(ms(1000)) }, want: 3},
		{name: "a complete of an unknown ticket at 1500 ms sweeps the one of 500 ms", do: func() { _, _ = tr.Complete(999, Success, ms(1500)) }, want: 4},
		{name: "a sweep at 1999 ms finds none", do: func() { tr.Sweep(ms(1999)) }, want: 4},
		{name: "a sweep at 2000 ms finds the one of 1000 ms", do: func() { tr.Sweep(ms(2000)) }, want: 5},
		{name: "sweeping again counts nothing twice", do: func() { tr.Sweep(ms(5000)) }, want: 5},
	}
	for _, s := range steps {
		s.do()
		if got := tr.Expired(); got != s.want {
			t.Fatalf("%s: expired %d, want %d", s.name, got, s.want)
		}
	}
}
