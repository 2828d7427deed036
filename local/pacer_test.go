package local

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

const pacerYAML = `
namespaces:
  open: {allow_unconfigured: true}
  off: {ignore_configured: true}
resources:
  p/keep: {kind: pacer, quota: 4500, period: 1h, jitter: 0}
  p/prop: {kind: pacer, quota: 4500, period: 1h, jitter: 0, strategy: proportional_remaining, start_sleep: 1s}
  p/exp: {kind: pacer, quota: 4500, period: 1h, jitter: 0, strategy: exponential_backoff}
  p/gcra: {kind: gcra, burst: 1, count: 1, period: 1s}
  off/pace: {kind: pacer, quota: 10, period: 1s}
`

func pacerConfigFor(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// nearDur reports whether a and b are within a microsecond.
func nearDur(a, b time.Duration) bool { return math.Abs(float64(a-b)) < float64(time.Microsecond) }

func TestPacerKeepReserve(t *testing.T) {
	e := New(pacerConfigFor(t, pacerYAML))
	inf := math.Inf(1)
	// t0: nothing known, the first call goes at once.
	p, err := e.Pace(at(0), "p/keep")
	if err != nil || p.Wait != 0 || p.Rate != inf || p.Remaining != -1 || p.Lenient {
		t.Fatalf("first pace: %+v %v", p, err)
	}
	// 100 ms: a 429. The pacer now assumes it may use the whole refill,
	// 4500/h = 1.25/s, and paces at 1.25·exp(−22.5/20) at an empty quota:
	// the next slot is one interval after the first call, at t0.
	rate := 1.25 * math.Exp(-22.5/20)
	slot := time.Duration(float64(time.Second) / rate)
	o, err := e.Observe(at(100), "p/keep", 429, -1)
	if err != nil || math.Abs(o.Rate-rate) > 1e-9 || o.Remaining != 0 || !nearDur(o.Wait, slot-100*time.Millisecond) {
		t.Fatalf("observe 429: %+v %v; want rate %v, remaining 0, wait %v", o, err, rate, slot-100*time.Millisecond)
	}
	// The wait Observe announced is what Pace then gives, and it counts:
	// the next Pace gets the slot after.
	if p, _ := e.Pace(at(100), "p/keep"); !nearDur(p.Wait, slot-100*time.Millisecond) {
		t.Fatalf("pace after the 429: %v, want %v", p.Wait, slot-100*time.Millisecond)
	}
	if p, _ := e.Pace(at(100), "p/keep"); !nearDur(p.Wait, 2*slot-100*time.Millisecond) {
		t.Fatalf("a second caller: %v, want the next slot %v", p.Wait, 2*slot-100*time.Millisecond)
	}
	// A full quota: no pacing.
	if o, _ := e.Observe(at(200), "p/keep", 200, 4000); o.Wait != 0 || o.Rate != inf || o.Remaining != 4000 {
		t.Fatalf("observe 4000 left: %+v", o)
	}
	if s, ok := e.PacerStatus(at(200), "p/keep"); !ok || s.Remaining != 4000 || s.Wait != 0 {
		t.Fatalf("status %+v %v", s, ok)
	}
}

func TestPacerBaselines(t *testing.T) {
	e := New(pacerConfigFor(t, pacerYAML))
	// proportional_remaining: every call first sleeps the shared sleep,
	// 1 s to start with; a success with 4499 of 4500 left cuts it by
	// 4499/4500, to 1/4500 s.
	if p, err := e.Pace(at(0), "p/prop"); err != nil || p.Wait != time.Second {
		t.Fatalf("pace: %+v %v, want the 1s start sleep", p, err)
	}
	o, err := e.Observe(at(1100), "p/prop", 200, 4499)
	if want := time.Second / 4500; err != nil || !nearDur(o.Wait, want) || math.Abs(o.Rate-4500) > 1e-6 || o.Remaining != 4499 {
		t.Fatalf("observe: %+v %v; want wait %v at 4500/s", o, err, want)
	}
	// exponential_backoff: no wait until a 429, then min_sleep (3600 s /
	// 4500 = 0.8 s), ×1.2 per further 429 of the same call.
	if p, _ := e.Pace(at(0), "p/exp"); p.Wait != 0 {
		t.Fatalf("exp pace: %v", p.Wait)
	}
	if o, _ := e.Observe(at(10), "p/exp", 429, -1); o.Wait != 800*time.Millisecond {
		t.Fatalf("exp after a 429: %+v", o)
	}
	if p, _ := e.Pace(at(10), "p/exp"); p.Wait != 800*time.Millisecond {
		t.Fatalf("exp retry: %v, want 800ms", p.Wait)
	}
	if o, _ := e.Observe(at(820), "p/exp", 429, -1); !nearDur(o.Wait, 960*time.Millisecond) {
		t.Fatalf("exp after a second 429: %+v, want 960ms", o)
	}
}

func TestPacerErrors(t *testing.T) {
	e := New(pacerConfigFor(t, pacerYAML))
	for _, tc := range []struct {
		name string
		err  error
		want error
		says string
	}{
		{name: "status 99", err: errOf(e.Observe(at(0), "p/keep", 99, 1)), want: ErrBadRequest, says: "status: must be an HTTP status code in [100, 599], got 99"},
		{name: "status 600", err: errOf(e.Observe(at(0), "p/keep", 600, 1)), want: ErrBadRequest, says: "got 600"},
		{name: "remaining too large", err: errOf(e.Observe(at(0), "p/keep", 200, MaxRemaining+1)), want: ErrBadRequest, says: "remaining: must be at most 999999999999999999"},
		{name: "pace on gcra", err: errOf(e.Pace(at(0), "p/gcra")), want: ErrWrongKind, says: `"p/gcra" is a gcra resource; pace is for pacer resources`},
		{name: "observe on gcra", err: errOf(e.Observe(at(0), "p/gcra", 200, 1)), want: ErrWrongKind, says: "observe is for pacer resources"},
		{name: "request on a pacer", err: errOf(e.Request(at(0), "p/keep", "d", 1, 1)), want: ErrWrongKind, says: `"p/keep" is a pacer resource; request is for tiers and gcra resources`},
		{name: "admit on a pacer", err: errOf(e.Admit(at(0), "p/keep")), want: ErrWrongKind, says: "admit is for adaptive resources"},
		{name: "refund on a pacer", err: errOf(e.Refund(at(0), "p/keep", "d", 1)), want: ErrWrongKind, says: "refund is for gcra resources"},
		{name: "unknown", err: errOf(e.Pace(at(0), "zz/x")), want: ErrUnknownResource, says: `"zz/x" has no config`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) || !strings.Contains(tc.err.Error(), tc.says) {
				t.Fatalf("%v, want %v saying %q", tc.err, tc.want, tc.says)
			}
		})
	}
	sid, _ := e.OpenSession(at(0), time.Minute)
	if _, err := e.Reserve(at(0), "p/keep", "d", 1, 1, sid); !errors.Is(err, ErrWrongKind) {
		t.Errorf("reserve on a pacer: %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }

func TestPacerLenient(t *testing.T) {
	e := New(pacerConfigFor(t, pacerYAML))
	for _, name := range []string{"open/anything", "off/pace"} {
		for range 3 {
			p, err := e.Pace(at(0), name)
			if err != nil || !p.Lenient || p.Wait != 0 || p.Remaining != -1 {
				t.Fatalf("%s: pace %+v %v, want a lenient 0", name, p, err)
			}
			o, err := e.Observe(at(1), name, 429, -1)
			if err != nil || !o.Lenient || o.Wait != 0 {
				t.Fatalf("%s: observe %+v %v, want lenient", name, o, err)
			}
		}
		if _, ok := e.PacerStatus(at(1), name); ok {
			t.Errorf("%s has a pacer status", name)
		}
	}
	// A bad status is refused even where nothing would be recorded.
	if _, err := e.Observe(at(1), "open/anything", 0, -1); !errors.Is(err, ErrBadRequest) {
		t.Errorf("status 0 on a lenient resource: %v", err)
	}
}

func TestPacerReload(t *testing.T) {
	e := New(pacerConfigFor(t, pacerYAML))
	if _, err := e.Observe(at(0), "p/keep", 200, 4000); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Observe(at(0), "p/prop", 200, 7); err != nil {
		t.Fatal(err)
	}
	// The same config: every pacer keeps what it saw.
	n, ch := e.Reload(pacerConfigFor(t, pacerYAML))
	if len(ch.Changed)+len(ch.KindChanged)+len(ch.Added)+len(ch.Removed) != 0 {
		t.Fatalf("changes %+v, want none", ch)
	}
	if s, _ := n.PacerStatus(at(1), "p/keep"); s.Remaining != 4000 {
		t.Fatalf("after an identical reload: remaining %d, want 4000 kept", s.Remaining)
	}
	// p/keep's quota changes: a fresh pacer; p/prop is untouched and keeps its state.
	n2, ch := n.Reload(pacerConfigFor(t, strings.Replace(pacerYAML, "p/keep: {kind: pacer, quota: 4500", "p/keep: {kind: pacer, quota: 5000", 1)))
	if len(ch.Changed) != 1 || ch.Changed[0] != "p/keep" {
		t.Fatalf("changes %+v, want p/keep changed", ch)
	}
	if s, _ := n2.PacerStatus(at(2), "p/keep"); s.Remaining != -1 {
		t.Fatalf("after a change of quota: remaining %d, want -1 (a fresh pacer)", s.Remaining)
	}
	if s, _ := n2.PacerStatus(at(2), "p/prop"); s.Remaining != 7 {
		t.Fatalf("an unchanged pacer: remaining %d, want 7 kept", s.Remaining)
	}
}

func BenchmarkPacerPaceObserve(b *testing.B) {
	cfg := &config.Config{Resources: map[string]*config.Resource{
		"b/api": {Kind: config.KindPacer, Quota: 4500, Period: time.Hour},
	}}
	cfg.Normalize()
	e := New(cfg)
	t0 := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now := t0.Add(time.Duration(i) * time.Second)
		if _, err := e.Pace(now, "b/api"); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Observe(now, "b/api", 200, 30); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
