package adaptive

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// ms returns the instant t0 + n milliseconds.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// op is one step of a window test: an admission, or the end of the call
// admitted at step `call`, at instant ms(at).
type op struct {
	at      int
	do      string // "admit", "success", "backoff", "release", "stale"
	call    int    // the step whose call ends (success, backoff, release, stale)
	wantOK  bool   // admit: admitted; stale: stale
	wantPos int    // admit
	wantWin int    // the window after the step
}

func runOps(t *testing.T, w *Window, ops []op) {
	t.Helper()
	calls := map[int]Call{}
	for i, o := range ops {
		now := ms(o.at)
		switch o.do {
		case "admit":
			c, ok := w.Admit(now)
			if ok != o.wantOK || c.Pos != o.wantPos {
				t.Fatalf("step %d (t=%dms) admit: pos %d ok %v, want pos %d ok %v", i, o.at, c.Pos, ok, o.wantPos, o.wantOK)
			}
			calls[i] = c
		case "success":
			w.Success(calls[o.call], now)
		case "backoff":
			w.Backoff(calls[o.call], now)
		case "release":
			w.Release(calls[o.call])
		case "stale":
			if got := w.Stale(calls[o.call], now); got != o.wantOK {
				t.Fatalf("step %d (t=%dms) stale(%d): %v, want %v", i, o.at, o.call, got, o.wantOK)
			}
		default:
			t.Fatalf("step %d: unknown op %q", i, o.do)
		}
		if o.wantWin != 0 && w.Size() != o.wantWin {
			t.Fatalf("step %d (t=%dms) %s: window %d, want %d", i, o.at, o.do, w.Size(), o.wantWin)
		}
	}
}

func newWindow(t *testing.T, cfg Config) *Window {
	t.Helper()
	w, err := NewWindow(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWindowOpenZitiRules(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		ops  []op
	}{
		{
			name: "starts at max and rejects beyond it",
			cfg:  Config{MinWindow: 1, MaxWindow: 2},
			ops: []op{
				{at: 0, do: "admit", wantOK: true, wantPos: 1, wantWin: 2},
				{at: 0, do: "admit", wantOK: true, wantPos: 2, wantWin: 2},
				{at: 0, do: "admit", wantOK: false, wantPos: 0, wantWin: 2},
				{at: 5, do: "release", call: 0, wantWin: 2},
				{at: 5, do: "admit", wantOK: true, wantPos: 2, wantWin: 2}, // one outstanding: position 2
			},
		},
		{
			name: "backoff at p drops the window to p − margin, never raises it, floors at min",
			cfg:  Config{MinWindow: 5, MaxWindow: 30},
			ops: []op{
				{at: 0, do: "admit", wantOK: true, wantPos: 1}, // 0
				{at: 0, do: "admit", wantOK: true, wantPos: 2}, // 1
				{at: 0, do: "admit", wantOK: true, wantPos: 3}, // 2
				{at: 1, do: "backoff", call: 2, wantWin: 5},    // 3 − 10 < 5: min
				{at: 2, do: "backoff", call: 1, wantWin: 5},    // at min: nothing
				{at: 3, do: "success", call: 0, wantWin: 5},    // one success: no growth yet
				{at: 4, do: "admit", wantOK: true, wantPos: 1}, // 7
				{at: 4, do: "backoff", call: 7, wantWin: 5},    // never below min
			},
		},
		{
			name: "a backoff above the window changes nothing",
			cfg:  Config{MinWindow: 1, MaxWindow: 100},
			ops: func() []op {
				var o []op
				for range 40 {
					o = append(o, op{do: "admit", wantOK: true, wantPos: len(o) + 1})
				}
				o = append(o,
					op{at: 10, do: "backoff", call: 29, wantWin: 20}, // 30 − 10
					op{at: 11, do: "backoff", call: 39, wantWin: 20}, // 40 − 10 > 20: unchanged
					op{at: 12, do: "backoff", call: 24, wantWin: 15}, // 25 − 10
				)
				return o
			}(),
		},
		{
			name: "grows one per grow_every successes, only below max",
			cfg:  Config{MinWindow: 1, MaxWindow: 3, GrowEvery: 2, Margin: 1},
			ops: []op{
				{at: 0, do: "admit", wantOK: true, wantPos: 1}, // 0
				{at: 0, do: "admit", wantOK: true, wantPos: 2}, // 1
				{at: 0, do: "admit", wantOK: true, wantPos: 3}, // 2
				{at: 1, do: "success", call: 0, wantWin: 3},    // at max: not counted
				{at: 2, do: "backoff", call: 2, wantWin: 2},    // 3 − 1
				{at: 3, do: "success", call: 1, wantWin: 2},    // counter 1
				{at: 4, do: "admit", wantOK: true, wantPos: 1}, // 6
				{at: 5, do: "success", call: 6, wantWin: 3},    // counter 2: +1
				{at: 6, do: "admit", wantOK: true, wantPos: 1}, // 8
				{at: 7, do: "success", call: 8, wantWin: 3},    // at max again
			},
		},
		{
			name: "queued work beyond window + margin is stale at the head",
			cfg:  Config{MinWindow: 1, MaxWindow: 30, Margin: 5},
			ops: func() []op {
				var o []op
				for range 30 {
					o = append(o, op{do: "admit", wantOK: true, wantPos: len(o) + 1})
				}
				o = append(o,
					op{at: 1, do: "backoff", call: 14, wantWin: 10}, // 15 − 5
					op{at: 1, do: "stale", call: 15, wantOK: true},  // 16 > 10 + 5
					op{at: 1, do: "stale", call: 14, wantOK: false}, // 15 is not
					op{at: 1, do: "stale", call: 0, wantOK: false},
				)
				return o
			}(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runOps(t, newWindow(t, tc.cfg), tc.ops)
		})
	}
}

// TestWindowOpenZitiSawtooth drives the rules the way OpenZiti's synthetic
// test does (a full queue, one worker, 25 ms per call, callers giving up
// after 5 s) and checks the window settles where the published run saw it.
func TestWindowOpenZitiSawtooth(t *testing.T) {
	w := newWindow(t, Config{MinWindow: 5, MaxWindow: 250})
	var queue []Call
	now := t0
	fill := func() {
		for {
			c, ok := w.Admit(now)
			if !ok {
				return
			}
			queue = append(queue, c)
		}
	}
	fill()
	lo, hi := 1<<30, 0
	for i := 0; i < 4000; i++ {
		c := queue[0]
		queue = queue[1:]
		if w.Stale(c, now) {
			w.Release(c)
			fill()
			continue
		}
		now = now.Add(25 * time.Millisecond)
		if now.Sub(c.At) > 5*time.Second {
			w.Backoff(c, now)
		} else {
			w.Success(c, now)
		}
		fill()
		if now.Sub(t0) > 20*time.Second {
			lo, hi = min(lo, w.Size()), max(hi, w.Size())
		}
	}
	if lo < 185 || hi > 225 {
		t.Errorf("window ranged %d–%d, want within OpenZiti's 190–220 (±5)", lo, hi)
	}
}

func TestWindowPredictive(t *testing.T) {
	cfg := Config{MinWindow: 1, MaxWindow: 100, Rules: Predictive, GrowEvery: 1, Margin: 1}
	w := newWindow(t, cfg)
	// Ten calls at t0: positions 1…10, each taking 100 ms of queue.
	var calls []Call
	for range 10 {
		c, _ := w.Admit(t0)
		calls = append(calls, c)
	}
	if w.Deadline() != 0 || w.PerPosition() != 0 {
		t.Fatalf("learned %v/%v before any outcome", w.Deadline(), w.PerPosition())
	}
	for i := range 5 {
		w.Success(calls[i], ms(100*(i+1))) // latency = position × 100 ms
	}
	if got := w.PerPosition(); got != 100*time.Millisecond {
		t.Fatalf("per position %v, want 100ms", got)
	}
	if w.Size() != 100 {
		t.Fatalf("window %d, want 100 (nothing known of the callers' patience)", w.Size())
	}
	// The caller at position 6 gives up after 550 ms: patience ≈ 550 ms.
	w.Backoff(calls[5], ms(550))
	if got := w.Deadline(); got != 550*time.Millisecond {
		t.Fatalf("deadline %v, want 550ms", got)
	}
	// The cap: ⌊0.9 · 550 / 100⌋ = 4 positions.
	if w.Size() != 4 {
		t.Fatalf("window %d, want the cap 4", w.Size())
	}
	// Growth stops at the cap however many successes (these finish within
	// the patience, so they do not raise it).
	for i := 6; i < 10; i++ {
		w.Success(calls[i], ms(500))
	}
	if want := int(0.9 * 0.550 / w.PerPosition().Seconds()); w.Size() > want {
		t.Fatalf("window %d grew past the cap %d", w.Size(), want)
	}
	// A queued call is stale once it could only finish after the patience:
	// waited + one position ≥ 550 ms.
	c, ok := w.Admit(ms(1000))
	if !ok {
		t.Fatal("not admitted")
	}
	edge := ms(1000).Add(w.Deadline() - w.PerPosition())
	if w.Stale(c, edge.Add(-time.Millisecond)) {
		t.Fatal("stale 1 ms before it would finish at the patience")
	}
	if !w.Stale(c, edge) {
		t.Fatal("not stale when it would finish at the patience")
	}
	w.Release(c)
	// A success at a longer latency raises the patience.
	c, _ = w.Admit(ms(2000))
	w.Success(c, ms(2700))
	if got := w.Deadline(); got < 700*time.Millisecond {
		t.Fatalf("deadline %v after a success at 700ms, want ≥ 700ms", got)
	}
}

func TestWindowPredictiveRelaxes(t *testing.T) {
	w := newWindow(t, Config{MinWindow: 1, MaxWindow: 1000, Rules: Predictive, GrowEvery: 1})
	c, _ := w.Admit(t0)
	w.Success(c, ms(10)) // 10 ms per position
	c, _ = w.Admit(ms(10))
	w.Backoff(c, ms(1010)) // patience 1 s
	d := w.Deadline()
	for i := range relaxEvery(&w.cfg) {
		c, _ := w.Admit(ms(2000 + i))
		w.Success(c, ms(2000+i+10))
	}
	if got := w.Deadline(); got <= d {
		t.Fatalf("deadline %v did not relax from %v after %d quiet successes", got, d, relaxEvery(&w.cfg))
	}
}

func TestWindowReconfigure(t *testing.T) {
	w := newWindow(t, Config{MinWindow: 5, MaxWindow: 50})
	c, _ := w.Admit(t0)
	if err := w.Reconfigure(Config{MinWindow: 1, MaxWindow: 20}); err != nil {
		t.Fatal(err)
	}
	if w.Size() != 20 || w.Outstanding() != 1 {
		t.Fatalf("after shrinking max: window %d outstanding %d, want 20 and 1", w.Size(), w.Outstanding())
	}
	if err := w.Reconfigure(Config{MinWindow: 30, MaxWindow: 40}); err != nil {
		t.Fatal(err)
	}
	if w.Size() != 30 {
		t.Fatalf("window %d, want raised to the new min 30", w.Size())
	}
	w.Success(c, ms(1))
	if err := w.Reconfigure(Config{}); err == nil {
		t.Fatal("a bad config was accepted")
	}
	if w.Size() != 30 {
		t.Fatalf("a refused config changed the window to %d", w.Size())
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{MinWindow: 0, MaxWindow: -1, GrowEvery: -1, Margin: -2, Timeout: -1, Rules: 9, Headroom: 2}.Validate()
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("error %v does not wrap ErrConfig", err)
	}
	for _, field := range []string{"MinWindow", "MaxWindow", "GrowEvery", "Margin", "Timeout", "Rules", "Headroom"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("%q is not named in %v", field, err)
		}
	}
	if err := (Config{MinWindow: 1, MaxWindow: 1}).Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	w := newWindow(t, Config{MinWindow: 1, MaxWindow: 1})
	if got := w.Config(); got.GrowEvery != DefaultGrowEvery || got.Margin != DefaultMargin || got.Timeout != DefaultTimeout || got.Headroom != DefaultHeadroom {
		t.Fatalf("defaults not filled in: %+v", got)
	}
}

func TestWindowReconfigureRules(t *testing.T) {
	// Predictive learns the callers' patience from a backoff; a change of
	// rules keeps the window and forgets it; keeping the rules keeps it.
	cfg := Config{MinWindow: 1, MaxWindow: 50, Margin: 1, Rules: Predictive}
	w := newWindow(t, cfg)
	var calls []Call
	for range 20 {
		c, ok := w.Admit(t0)
		if !ok {
			t.Fatal("not admitted")
		}
		calls = append(calls, c)
	}
	w.Success(calls[0], ms(100))   // perPos 100 ms
	w.Backoff(calls[19], ms(1000)) // patience 1 s at position 20
	learned := w.Deadline()
	if learned != time.Second || w.PerPosition() != 100*time.Millisecond {
		t.Fatalf("learned deadline %v per position %v, want 1s and 100ms", learned, w.PerPosition())
	}
	size := w.Size()
	if err := w.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if w.Deadline() != learned || w.Size() != size {
		t.Fatalf("same rules: deadline %v window %d, want %v and %d kept", w.Deadline(), w.Size(), learned, size)
	}
	cfg.Rules = OpenZiti
	if err := w.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if w.Deadline() != 0 || w.PerPosition() != 0 || w.Size() != size || w.Outstanding() != 18 {
		t.Fatalf("to openziti: deadline %v per position %v window %d outstanding %d, want 0, 0, %d, 18",
			w.Deadline(), w.PerPosition(), w.Size(), w.Outstanding(), size)
	}
	cfg.Rules = Predictive
	if err := w.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if w.Deadline() != 0 || w.Size() != size {
		t.Fatalf("back to predictive: deadline %v window %d, want 0 (relearned from scratch) and %d", w.Deadline(), w.Size(), size)
	}
}
