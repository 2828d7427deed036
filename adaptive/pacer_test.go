package adaptive

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/clock"
)

func newPacer(t *testing.T, cfg PacerConfig) *Pacer {
	t.Helper()
	p, err := NewPacer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func near(a, b time.Duration) bool { return math.Abs(float64(a-b)) < float64(time.Microsecond) }

// pacerStep is one step of a pacer test: the delay Delay must return at
// ms(at), then the reply observed (status 0 = none).
type pacerStep struct {
	at        int
	wantDelay time.Duration
	status    int
	remaining int
}

func runPacer(t *testing.T, p *Pacer, steps []pacerStep) {
	t.Helper()
	for i, st := range steps {
		if d := p.Delay(ms(st.at)); !near(d, st.wantDelay) {
			t.Fatalf("step %d (t=%dms): delay %v, want %v", i, st.at, d, st.wantDelay)
		}
		if st.status != 0 {
			p.ObserveAt(ms(st.at), st.status, st.remaining)
		}
	}
}

func TestExponentialBackoff(t *testing.T) {
	// No jitter: the sleeps are rate_throttle_client's exactly.
	p := newPacer(t, PacerConfig{Strategy: ExponentialBackoff, Jitter: -1, StartSleep: time.Hour})
	runPacer(t, p, []pacerStep{
		{at: 0, wantDelay: 0, status: 200, remaining: 5}, // no sleep before a call (StartSleep ignored)
		{at: 1, wantDelay: 0, status: 429},               // a 429…
		{at: 2, wantDelay: sec(0.8), status: 429},        // …sleeps MinSleep
		{at: 3, wantDelay: sec(0.96), status: 429},       // ×1.2
		{at: 4, wantDelay: sec(1.152), status: 200},      // ×1.2, then a success ends the call
		{at: 5, wantDelay: 0, status: 429},               // the next call starts afresh
		{at: 6, wantDelay: sec(0.8), status: 200, remaining: 0},
	})
	if got := p.Group().MaxSleep(); !near(got, sec(1.152)) {
		t.Fatalf("max sleep %v, want 1.152s", got)
	}
}

func TestProportionalRemaining(t *testing.T) {
	p := newPacer(t, PacerConfig{Strategy: ProportionalRemaining, Jitter: -1, StartSleep: time.Second})
	runPacer(t, p, []pacerStep{
		{at: 0, wantDelay: sec(1), status: 429},                      // every call sleeps first
		{at: 1, wantDelay: sec(1.8), status: 429},                    // +MinSleep, then ×1.2 → 2.16
		{at: 2, wantDelay: sec(2.96), status: 200, remaining: 2250},  // 2.16 + 0.8; ×1.2 → 3.552; −3.552·2250/4500
		{at: 3, wantDelay: sec(1.776), status: 200, remaining: 4500}, // −1.776·4500/4500 → 0
		{at: 4, wantDelay: 0, status: 200, remaining: -1},            // no remaining: no decrease
		{at: 5, wantDelay: 0},
	})
}

func TestProportionalRemainingSharedByAGroup(t *testing.T) {
	// Two threads of one process share the sleep, as rate_throttle_client's
	// throttle object is shared: a call starts from the shared value and
	// writes its own back when it ends in a success.
	g, err := NewPacerGroup(PacerConfig{Strategy: ProportionalRemaining, Jitter: -1, StartSleep: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a, b := g.Pacer(), g.Pacer()
	if d := a.Delay(ms(0)); !near(d, sec(1)) {
		t.Fatalf("a: %v", d)
	}
	if d := b.Delay(ms(0)); !near(d, sec(1)) {
		t.Fatalf("b: %v", d)
	}
	a.ObserveAt(ms(1000), 429, 0) // a's own sleep: 1.8, then 2.16
	b.ObserveAt(ms(1000), 200, 0) // b writes back 1 (nothing remaining)
	if d := a.Delay(ms(1000)); !near(d, sec(1.8)) {
		t.Fatalf("a after its 429: %v, want its own 1.8s", d)
	}
	if d := b.Delay(ms(1000)); !near(d, sec(1)) {
		t.Fatalf("b's next call: %v, want the shared 1s", d)
	}
	a.ObserveAt(ms(2800), 200, 0) // a writes back 2.16
	if d := a.Delay(ms(2800)); !near(d, sec(2.16)) {
		t.Fatalf("a's next call: %v, want 2.16s", d)
	}
}

func TestKeepReserve(t *testing.T) {
	g, err := NewPacerGroup(PacerConfig{Strategy: KeepReserve, Jitter: -1})
	if err != nil {
		t.Fatal(err)
	}
	a, b := g.Pacer(), g.Pacer()
	// Nothing known: no pacing.
	if d := a.Delay(ms(0)); d != 0 {
		t.Fatalf("a's first request waits %v", d)
	}
	if d := b.Delay(ms(0)); d != 0 {
		t.Fatalf("b's first request waits %v", d)
	}
	// An empty bucket: S = the refill (1.25/s) shared by 2 members; at
	// r = 0 each member's rate is S·exp(−22.5/20), the group's twice that.
	a.ObserveAt(ms(100), 429, 0)
	b.ObserveAt(ms(100), 429, 0) // sent before S was set: no cut
	// The slots follow the last one (at t0), 1/groupRate apart.
	slot := sec(1 / (1.25 * math.Exp(-22.5/20)))
	da := a.Delay(ms(100))
	db := b.Delay(ms(100))
	if !near(da, slot-100*time.Millisecond) || !near(db, 2*slot-100*time.Millisecond) {
		t.Fatalf("delays %v, %v; want the next two slots %v, %v after t0", da, db, slot, 2*slot)
	}
	// A 429 for a request sent after S was set cuts S by a fifth.
	s := g.reserve.scale
	a.ObserveAt(ms(200), 429, 0)
	if got := g.reserve.scale; math.Abs(got-s*reserveCut) > 1e-9 {
		t.Fatalf("scale %v after a 429, want %v", got, s*reserveCut)
	}
	// A full bucket: unpaced, whatever slots were handed out before.
	a.ObserveAt(ms(300), 200, 4000)
	if d := a.Delay(ms(300)); d != 0 {
		t.Fatalf("delay %v with 4000 remaining", d)
	}
	g.mu.Lock()
	unpaced := math.IsInf(g.reserve.rate(&g.cfg, 4000), 1)
	g.mu.Unlock()
	if !unpaced {
		t.Fatal("a full bucket is paced")
	}
}

// TestKeepReserveSettles runs three pacers against a refilling bucket and
// checks they settle near the reserve without 429s, with equal shares.
func TestKeepReserveSettles(t *testing.T) {
	g, _ := NewPacerGroup(PacerConfig{Strategy: KeepReserve, Rand: rand.New(rand.NewPCG(1, 1))})
	pacers := []*Pacer{g.Pacer(), g.Pacer(), g.Pacer()}
	next := []time.Time{t0, t0, t0}
	counts := make([]int, 3)
	bucket, last := 0.0, t0
	limited := 0
	end := t0.Add(30 * time.Minute)
	for {
		i := 0
		for j := range next {
			if next[j].Before(next[i]) {
				i = j
			}
		}
		now := next[i]
		if !now.Before(end) {
			break
		}
		bucket = min(bucket+now.Sub(last).Seconds()*1.25, 4500)
		last = now
		status := 200
		if bucket >= 1 {
			bucket--
		} else {
			status = 429
			if now.Sub(t0) > 5*time.Minute {
				limited++
			}
		}
		counts[i]++
		reply := now.Add(100 * time.Millisecond)
		pacers[i].ObserveAt(reply, status, int(bucket))
		next[i] = reply.Add(pacers[i].Delay(reply))
	}
	if limited > 0 {
		t.Errorf("%d 429s after the first five minutes", limited)
	}
	for _, c := range counts {
		if c < counts[0]-5 || c > counts[0]+5 {
			t.Errorf("request counts %v are not about equal", counts)
			break
		}
	}
	if bucket > 60 {
		t.Errorf("the bucket holds %.0f at the end: the clients under-use it", bucket)
	}
}

func TestPacerWaitOnTheClock(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPacer(t, PacerConfig{Strategy: ProportionalRemaining, Jitter: -1, StartSleep: 2 * time.Second, Clock: clk})
	done := make(chan error, 1)
	go func() { done <- p.Wait(context.Background()) }()
	if err := clk.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	select {
	case <-done:
		t.Fatal("Wait returned after 1s of a 2s sleep")
	default:
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.Observe(http.StatusTooManyRequests, 0)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- p.Wait(ctx) }()
	if err := clk.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context: %v", err)
	}
}

func TestPacerConfigValidate(t *testing.T) {
	err := PacerConfig{Strategy: 7, Limit: -1, Period: -1, MinSleep: -1, Multiplier: 0.5, Jitter: 2, StartSleep: -1}.Validate()
	if !errors.Is(err, ErrPacerConfig) {
		t.Fatalf("%v does not wrap ErrPacerConfig", err)
	}
	for _, f := range []string{"Strategy", "Limit", "Period", "MinSleep", "Multiplier", "Jitter", "StartSleep"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s not named in %v", f, err)
		}
	}
	if _, err := NewPacer(PacerConfig{}); err != nil {
		t.Fatalf("the zero config: %v", err)
	}
}

func TestRemaining(t *testing.T) {
	cases := []struct {
		name    string
		headers map[string][]string
		want    int
		ok      bool
	}{
		{name: "none", headers: nil, ok: false},
		{name: "RateLimit-Remaining", headers: map[string][]string{"Ratelimit-Remaining": {"42"}}, want: 42, ok: true},
		{name: "X-RateLimit-Remaining", headers: map[string][]string{"X-Ratelimit-Remaining": {"7"}}, want: 7, ok: true},
		{name: "a list: the smallest", headers: map[string][]string{"Ratelimit-Remaining": {"9, 3"}}, want: 3, ok: true},
		{name: "structured r=", headers: map[string][]string{"Ratelimit": {`"api/search";r=4;t=1`}}, want: 4, ok: true},
		{name: "structured, two policies", headers: map[string][]string{"Ratelimit": {`"day";r=100;t=3600, "second";r=2;t=1`}}, want: 2, ok: true},
		{name: "structured, a quoted ; and ,", headers: map[string][]string{"Ratelimit": {`"a;r=1,b";r=8`}}, want: 8, ok: true},
		{name: "structured wins over the plain field", headers: map[string][]string{"Ratelimit": {`"p";r=5`}, "Ratelimit-Remaining": {"50"}}, want: 5, ok: true},
		{name: "dictionary remaining=", headers: map[string][]string{"Ratelimit": {"limit=10, remaining=6, reset=2"}}, want: 6, ok: true},
		{name: "r as a key is not a parameter", headers: map[string][]string{"Ratelimit": {"r=6"}}, ok: false},
		{name: "malformed values are skipped", headers: map[string][]string{"Ratelimit": {`"p";r=-1`}, "Ratelimit-Remaining": {"x", "12"}}, want: 12, ok: true},
		{name: "too long", headers: map[string][]string{"Ratelimit-Remaining": {"1234567890123456789"}}, ok: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Remaining(http.Header(tc.headers))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Remaining = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPacerStatus(t *testing.T) {
	inf := math.Inf(1)
	t.Run("keep reserve", func(t *testing.T) {
		p := newPacer(t, PacerConfig{Strategy: KeepReserve, Jitter: -1})
		if st := p.Status(ms(0)); st.Wait != 0 || st.Rate != inf || st.Remaining != -1 {
			t.Fatalf("fresh: %+v, want no wait, unpaced, nothing seen", st)
		}
		p.Delay(ms(0))
		p.ObserveAt(ms(100), 429, -1) // empty: S = the whole refill, 1.25/s
		rate := 1.25 * math.Exp(-22.5/20)
		slot := sec(1 / rate)
		st := p.Status(ms(100))
		if math.Abs(st.Rate-rate) > 1e-9 || !near(st.Wait, slot-100*time.Millisecond) || st.Remaining != 0 {
			t.Fatalf("after a 429: %+v, want rate %v, wait %v, remaining 0", st, rate, slot-100*time.Millisecond)
		}
		// Status takes no slot: Delay then gives the same wait, once.
		if d := p.Delay(ms(100)); !near(d, st.Wait) {
			t.Fatalf("Delay after Status = %v, want %v", d, st.Wait)
		}
		if st := p.Status(ms(100)); !near(st.Wait, 2*slot-100*time.Millisecond) {
			t.Fatalf("after taking the slot: wait %v, want %v", st.Wait, 2*slot-100*time.Millisecond)
		}
		p.ObserveAt(ms(200), 200, 4000)
		if st := p.Status(ms(200)); st.Rate != inf || st.Wait != 0 || st.Remaining != 4000 {
			t.Fatalf("full bucket: %+v", st)
		}
		p.ObserveAt(ms(300), 200, -1) // no count: the last one stays
		if st := p.Status(ms(300)); st.Remaining != 4000 {
			t.Fatalf("remaining %d after a reply without a count, want 4000 kept", st.Remaining)
		}
	})
	t.Run("proportional remaining", func(t *testing.T) {
		p := newPacer(t, PacerConfig{Strategy: ProportionalRemaining, Jitter: -1, StartSleep: 2 * time.Second})
		if st := p.Status(ms(0)); st.Wait != 2*time.Second || st.Rate != 0.5 {
			t.Fatalf("fresh: %+v, want the start sleep and 0.5/s", st)
		}
		p.Delay(ms(0))
		p.ObserveAt(ms(10), 429, -1) // sleep 2 + 0.8 = 2.8 s for the retry
		if st := p.Status(ms(10)); !near(st.Wait, sec(2.8)) || st.Remaining != 0 {
			t.Fatalf("after a 429: %+v, want a 2.8s wait", st)
		}
	})
	t.Run("exponential backoff", func(t *testing.T) {
		p := newPacer(t, PacerConfig{Strategy: ExponentialBackoff, Jitter: -1})
		p.Delay(ms(0))
		p.ObserveAt(ms(10), 429, -1)
		if st := p.Status(ms(10)); !near(st.Wait, sec(0.8)) || st.Rate != inf {
			t.Fatalf("after a 429: %+v, want a 0.8s wait, unpaced", st)
		}
	})
}

func TestParseRateLimit(t *testing.T) {
	cases := []struct {
		v    string
		want int
		ok   bool
	}{
		{v: `"default";r=4;t=1`, want: 4, ok: true},
		{v: ` "default" ; r=4 ; t=1 `, want: 4, ok: true},
		{v: `"day";r=100;t=3600, "second";r=2;t=1`, want: 2, ok: true},
		{v: `"a;r=1,b";r=8;t=1`, want: 8, ok: true},
		{v: `"p";r=-1;t=1, "q";r=3`, want: 3, ok: true},
		{v: `limit=10, remaining=6, reset=2`, want: 6, ok: true},
		{v: `"default";r=0;t=30`, want: 0, ok: true},
		{v: `"default";q=100;w=60`, want: 0, ok: false}, // a policy, not a RateLimit value
		{v: `r=6`, want: 0, ok: false},
		{v: `"p";r=abc`, want: 0, ok: false},
		{v: ``, want: 0, ok: false},
		{v: `"p";r=1234567890123456789`, want: 0, ok: false},
	}
	for _, tc := range cases {
		if got, ok := ParseRateLimit(tc.v); got != tc.want || ok != tc.ok {
			t.Errorf("ParseRateLimit(%q) = %d, %v; want %d, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseRateLimitRemaining(t *testing.T) {
	cases := []struct {
		v    string
		want int
		ok   bool
	}{
		{v: `42`, want: 42, ok: true},
		{v: ` 42 `, want: 42, ok: true},
		{v: `9, 3`, want: 3, ok: true},
		{v: `0`, want: 0, ok: true},
		{v: `x, 12`, want: 12, ok: true},
		{v: `-1`, want: 0, ok: false},
		{v: `4.5`, want: 0, ok: false},
		{v: `1e3`, want: 0, ok: false},
		{v: ``, want: 0, ok: false},
		{v: `"p";r=4`, want: 0, ok: false},
		{v: `999999999999999999`, want: 999999999999999999, ok: true},
		{v: `1234567890123456789`, want: 0, ok: false},
	}
	for _, tc := range cases {
		if got, ok := ParseRateLimitRemaining(tc.v); got != tc.want || ok != tc.ok {
			t.Errorf("ParseRateLimitRemaining(%q) = %d, %v; want %d, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseRateLimit: the parsers never panic, and a count they return is
// non-negative and written in the value as it is returned.
func FuzzParseRateLimit(f *testing.F) {
	for _, s := range []string{`"default";r=4;t=1`, `"a;r=1,b";r=8`, `limit=10, remaining=6, reset=2`, `9, 3`, `"p";r=-1`, `"\"";r=2`, `"unterminated;r=3`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for name, parse := range map[string]func(string) (int, bool){"ParseRateLimit": ParseRateLimit, "ParseRateLimitRemaining": ParseRateLimitRemaining} {
			n, ok := parse(v)
			if !ok {
				if n != 0 {
					t.Fatalf("%s(%q) = %d with ok false", name, v, n)
				}
				continue
			}
			if n < 0 || !strings.Contains(v, strconv.Itoa(n)) {
				t.Fatalf("%s(%q) = %d, which the value does not say", name, v, n)
			}
		}
	})
}
