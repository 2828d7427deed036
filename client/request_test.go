package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/clock"
)

func TestRequestGrantsAndRejects(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()

	type step struct {
		resource, domain string
		opts             []Option
		want             Decision
	}
	steps := []step{
		{resource: "t/one", domain: "d1",
			want: Decision{Granted: 1, RetryAfter: time.Second, Reply: Reply{Granted: 1, RetryAfterMs: 1000, ResetAfterMs: 1000, HardLimit: NoLimit, GlobalLimit: NoLimit}}},
		{resource: "t/one", domain: "d1",
			want: Decision{Granted: 0, RetryAfter: time.Second, Reply: Reply{RetryAfterMs: 1000, ResetAfterMs: 1000, HardLimit: NoLimit, GlobalLimit: NoLimit}}},
		{resource: "t/one", domain: "d1", opts: []Option{Copies(0)}, // a peek
			want: Decision{RetryAfter: time.Second, Reply: Reply{RetryAfterMs: 1000, ResetAfterMs: 1000, HardLimit: NoLimit, GlobalLimit: NoLimit}}},
		{resource: "t/gcra", domain: "d1", opts: []Option{Copies(5)},
			want: Decision{Granted: 5, Remaining: 15, Reply: Reply{Granted: 5, Remaining: 15, ResetAfterMs: 250, HardLimit: NoLimit, GlobalLimit: NoLimit}}},
		{resource: "t/tiers", domain: "d1", opts: []Option{Copies(60), MinCopies(1)},
			want: Decision{Granted: 55, RetryAfter: 5 * time.Second, Reply: Reply{Granted: 55, RetryAfterMs: 5000, ResetAfterMs: 20000,
				Tier: 2, TierLimit: 50, TierHits: 50, Burst: true, HardLimit: 100, DomainHitsLastSecond: 55, GlobalHitsLastSecond: 55, GlobalLimit: NoLimit}}},
		{resource: "t/none", domain: "d1",
			want: Decision{RetryAfter: Never, Reply: Reply{RetryAfterMs: -1, HardLimit: NoLimit, GlobalLimit: NoLimit}}},
		{resource: "t/shadow", domain: "d1",
			want: Decision{Granted: 1, RetryAfter: time.Second, Reply: Reply{Granted: 1, RetryAfterMs: 1000, ResetAfterMs: 1000, HardLimit: NoLimit, GlobalLimit: NoLimit}}},
		{resource: "t/shadow", domain: "d1",
			want: Decision{Granted: 1, Shadow: true, RetryAfter: time.Second,
				Reply: Reply{Granted: 1, Shadow: true, RetryAfterMs: 1000, ResetAfterMs: 1000, HardLimit: NoLimit, GlobalLimit: NoLimit}}},
	}
	for i, s := range steps {
		got, err := c.Request(ctx, s.resource, s.domain, s.opts...)
		if err != nil {
			t.Fatalf("step %d: Request(%s): %v", i, s.resource, err)
		}
		if got != s.want {
			t.Errorf("step %d: Request(%s, %s) =\n %+v\nwant\n %+v", i, s.resource, s.domain, got, s.want)
		}
	}
	// An unconfigured resource of a namespace that allows it: lenient.
	if d, err := c.Request(ctx, "open/anything", "d1"); err != nil || d.Granted != 1 || !d.Reply.Lenient {
		t.Errorf("Request(open/anything) = %+v, %v; want a lenient grant", d, err)
	}
	steps = append(steps, step{})
	if st := c.Stats(); st.Calls != uint64(len(steps)) || st.Degraded != 0 || st.Errors != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestMaxWaitWaitsThenSucceeds(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	if d, err := c.Request(ctx, "t/one", "d"); err != nil || d.Granted != 1 {
		t.Fatalf("first Request = %+v, %v", d, err)
	}
	done := make(chan Decision, 1)
	go func() {
		d, err := c.Request(ctx, "t/one", "d", MaxWait(2*time.Second))
		if err != nil {
			t.Errorf("Request: %v", err)
		}
		done <- d
	}()
	if err := fc.BlockUntil(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	// The first backoff (about 10 ms) is shorter than retry_after: the
	// client sleeps exactly retry_after.
	if next, _ := fc.Next(); !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("sleeps until %v, want t0+1s", next.Sub(t0))
	}
	fc.Advance(time.Second)
	d := <-done
	if d.Granted != 1 || d.Retries != 1 || d.Degraded {
		t.Fatalf("Request with MaxWait = %+v, want granted after 1 retry", d)
	}
	if st := c.Stats(); st.Retries != 1 {
		t.Errorf("Stats.Retries = %d, want 1", st.Retries)
	}
}

func TestMaxWaitReturnsAtOnceWhenNoGrantFits(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	c.Request(ctx, "t/one", "d")
	for _, tc := range []struct {
		name     string
		resource string
		wait     time.Duration
	}{
		{name: "retry_after longer than the wait", resource: "t/one", wait: 500 * time.Millisecond},
		{name: "no wait would do", resource: "t/none", wait: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := c.Request(ctx, tc.resource, "d", MaxWait(tc.wait))
			if err != nil || d.Granted != 0 || d.Retries != 0 {
				t.Fatalf("Request = %+v, %v; want a rejection at once", d, err)
			}
			if n := fc.Waiters(); n != 0 {
				t.Fatalf("%d sleepers", n)
			}
		})
	}
}

// rejecter is a stub agent that rejects the first n requests with
// retry_after_ms retry, then grants.
func rejecter(t *testing.T, n int, retry int) (sock string, seen func() int) {
	var count int
	done := make(chan struct{}, 1)
	done <- struct{}{}
	sock = startStub(t, func(ctx *fasthttp.RequestCtx) {
		<-done
		count++
		k := count
		done <- struct{}{}
		ctx.SetContentType("application/json")
		if k <= n {
			ctx.SetBodyString(`{"granted":0,"remaining":0,"retry_after_ms":` + itoa(retry) + `,"reset_after_ms":5,"shadow":false}`)
			return
		}
		ctx.SetBodyString(`{"granted":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":5,"shadow":false}`)
	})
	return sock, func() int { <-done; defer func() { done <- struct{}{} }(); return count }
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestMaxWaitBackoffSchedule(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rejects int
		retryMs int
		wait    time.Duration
		granted bool
	}{
		{name: "exponential, capped by the wait", rejects: 100, retryMs: 0, wait: 100 * time.Millisecond},
		{name: "granted on the fourth try", rejects: 3, retryMs: 0, wait: time.Second, granted: true},
		{name: "never below retry_after", rejects: 3, retryMs: 30, wait: time.Second, granted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock, _ := rejecter(t, tc.rejects, tc.retryMs)
			fc := fakeClock()
			c, _ := newClient(t, Config{Socket: sock, Clock: fc, Rand: rand.New(rand.NewPCG(7, 7))})
			// The expected schedule, drawn from the same seed.
			ref := rand.New(rand.NewPCG(7, 7))
			done := make(chan Decision, 1)
			go func() {
				d, _ := c.Request(context.Background(), "r/x", "d", MaxWait(tc.wait))
				done <- d
			}()
			elapsed := time.Duration(0)
			for i := 0; ; i++ {
				if d, ok := sleepOrDone(t, fc, done); ok {
					if got := d.Granted == 1; got != tc.granted {
						t.Fatalf("granted = %v after %d retries, want %v", got, d.Retries, tc.granted)
					}
					if d.Retries != i {
						t.Fatalf("Retries = %d, want %d", d.Retries, i)
					}
					if !tc.granted && elapsed != tc.wait {
						t.Fatalf("gave up after %v, want the whole wait %v", elapsed, tc.wait)
					}
					return
				}
				left := tc.wait - elapsed
				v := 10 * time.Millisecond
				for j := 0; j < i && v < left; j++ {
					v *= 2
				}
				want := max(min(left, jitter(v, ref)), time.Duration(tc.retryMs)*time.Millisecond)
				next, _ := fc.Next()
				if got := next.Sub(t0.Add(elapsed)); got != want {
					t.Fatalf("retry %d sleeps %v, want %v", i, got, want)
				}
				if want < v-v/4 && want != left {
					t.Fatalf("retry %d: %v is below the jitter band of %v", i, want, v)
				}
				fc.Advance(want)
				elapsed += want
			}
		})
	}
}

// sleepOrDone waits until the client sleeps on fc (false) or done has its
// result (true).
func sleepOrDone[T any](t *testing.T, fc *clock.Fake, done chan T) (T, bool) {
	return sleepersOrDone(t, fc, 1, done)
}

// sleepersOrDone waits until n sleepers wait on fc (false) or done has its
// result (true).
func sleepersOrDone[T any](t *testing.T, fc *clock.Fake, n int, done chan T) (T, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(waitCtx(t))
	defer cancel()
	blocked := make(chan error, 1)
	go func() { blocked <- fc.BlockUntil(ctx, n) }()
	select {
	case v := <-done:
		return v, true
	case err := <-blocked:
		if err != nil {
			t.Fatal(err)
		}
		var zero T
		return zero, false
	}
}

func TestBackoff(t *testing.T) {
	c := &Client{retryBase: 10 * time.Millisecond, rand: rand.New(rand.NewPCG(1, 1))}
	for _, tc := range []struct {
		name       string
		i          int
		left       time.Duration
		retryAfter time.Duration
		lo, hi     time.Duration // the sleep is in [lo, hi)
		ok         bool
	}{
		{name: "first", i: 0, left: time.Second, lo: 7500 * time.Microsecond, hi: 12500 * time.Microsecond, ok: true},
		{name: "third", i: 2, left: time.Second, lo: 30 * time.Millisecond, hi: 50 * time.Millisecond, ok: true},
		{name: "capped by what is left", i: 10, left: 50 * time.Millisecond, lo: 50 * time.Millisecond, hi: 50*time.Millisecond + 1, ok: true},
		{name: "huge i does not overflow", i: 1000, left: time.Hour, lo: 45 * time.Minute, hi: time.Hour + 1, ok: true},
		{name: "raised to retry_after", i: 0, left: time.Second, retryAfter: 300 * time.Millisecond, lo: 300 * time.Millisecond, hi: 300*time.Millisecond + 1, ok: true},
		{name: "retry_after past the wait", i: 0, left: time.Second, retryAfter: 2 * time.Second},
		{name: "never", i: 0, left: time.Second, retryAfter: Never},
		{name: "nothing left", i: 0, left: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 100 {
				d, ok := c.backoff(tc.i, tc.left, tc.retryAfter)
				if ok != tc.ok || (ok && (d < tc.lo || d >= tc.hi)) {
					t.Fatalf("backoff(%d, %v, %v) = %v, %v; want [%v, %v), %v", tc.i, tc.left, tc.retryAfter, d, ok, tc.lo, tc.hi, tc.ok)
				}
			}
		})
	}
}

func TestJitterIsUniformInBand(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	v := 100 * time.Millisecond
	var below, above int
	for range 10000 {
		j := jitter(v, r)
		if j < 75*time.Millisecond || j >= 125*time.Millisecond {
			t.Fatalf("jitter(%v) = %v, outside [75ms, 125ms)", v, j)
		}
		if j < v {
			below++
		} else {
			above++
		}
	}
	if below < 4500 || above < 4500 {
		t.Errorf("jitter is lopsided: %d below, %d above", below, above)
	}
	if got := jitter(3, r); got != 3 {
		t.Errorf("jitter(3ns) = %v, want 3ns (no room to jitter)", got)
	}
}

func TestMaxWaitHonorsContext(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	c.Request(context.Background(), "t/one", "d")
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		d   Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := c.Request(ctx, "t/one", "d", MaxWait(time.Minute))
		done <- result{d, err}
	}()
	if err := fc.BlockUntil(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	r := <-done
	if !errors.Is(r.err, context.Canceled) || r.d.Granted != 0 || r.d.RetryAfter != time.Second {
		t.Fatalf("Request = %+v, %v; want the last rejection and context.Canceled", r.d, r.err)
	}
	if st := c.Stats(); st.Errors != 0 {
		t.Errorf("a cancelled wait counted as a client error: %+v", st)
	}
	// A context already done is not sent at all.
	if _, err := c.Request(ctx, "t/gcra", "d"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Request on a done ctx = %v", err)
	}
	if n := a.count("/v1/request"); n != 2 {
		t.Errorf("agent saw %d requests, want 2", n)
	}
}

func TestCheckCarriesRateLimitFields(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	d, err := c.Check(ctx, "t/gcra", "d", Copies(5))
	if err != nil {
		t.Fatal(err)
	}
	// t is the bucket's effective window: the next token is 50 ms away,
	// rounded up to a second. It is not when the bucket is full again.
	want := Decision{Granted: 5, Remaining: 15, RateLimitPolicy: `"gcra";q=20;w=1`, RateLimit: `"gcra";r=15;t=1`,
		RateLimitWindow: time.Second, Reply: Reply{Granted: 5, Remaining: 15, HardLimit: NoLimit, GlobalLimit: NoLimit}}
	if d != want {
		t.Fatalf("Check = %+v\nwant %+v", d, want)
	}
	c.Check(ctx, "t/one", "d")
	d, err = c.Check(ctx, "t/one", "d")
	if err != nil || d.Granted != 0 || d.RetryAfter != time.Second || d.RateLimit != `"gcra";r=0;t=1` || d.RateLimitWindow != time.Second {
		t.Fatalf("Check rejected = %+v, %v", d, err)
	}
	if _, err := c.Check(ctx, "t/one", "d", Copies(2), MinCopies(1)); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("Check with MinCopies = %v, want ErrBadRequest", err)
	}
	// Seven hits of 5,1,1,0,50,5,5,15 burst into tier 2: 48 left under it,
	// and none of it comes back before its 15 s cooldown ends, 20 s on.
	for range 6 {
		c.Request(ctx, "t/tiers", "b")
	}
	d, err = c.Check(ctx, "t/tiers", "b")
	if err != nil || d.Granted != 1 || d.Remaining != 48 || d.RateLimit != `"t2";r=48;t=20` ||
		d.RateLimitWindow != 20*time.Second || d.Reply.ResetAfterMs != 0 {
		t.Fatalf("Check in tier 2 = %+v, %v", d, err)
	}
	// A limit of 0: the field has no t, and nothing ever will be granted.
	d, err = c.Check(ctx, "t/none", "d")
	if err != nil || d.Granted != 0 || d.RetryAfter != Never || d.RateLimit != `"t0";r=0` || d.RateLimitWindow != 0 {
		t.Fatalf("Check on no tier = %+v, %v", d, err)
	}
}

func TestSFParam(t *testing.T) {
	for _, tc := range []struct {
		v    string
		name byte
		want int64
		ok   bool
	}{
		{v: `"t1";r=4;t=1`, name: 'r', want: 4, ok: true},
		{v: `"t1";r=4;t=1`, name: 't', want: 1, ok: true},
		{v: `"t0";r=0`, name: 't', want: 0, ok: false},
		{v: `"a;r=9";r=4;t=12`, name: 'r', want: 4, ok: true},
		{v: `"a\";r=9";r=4;t=12`, name: 'r', want: 4, ok: true},
		{v: `"a\\";r=4`, name: 'r', want: 4, ok: true},
		{v: `  "gcra"; r=20; t=1`, name: 't', want: 1, ok: true},
		{v: `"t1";r=4;t=1, "t2";r=0;t=9`, name: 't', want: 1, ok: true}, // the first member
		{v: `hard;r=0;t=3`, name: 't', want: 3, ok: true},               // a token item
		{v: `"x";pk=:abc=:;r=1`, name: 'r', want: 0, ok: false},         // a byte sequence: not read
		{v: `"x";n="a;r=2";r=1`, name: 'r', want: 1, ok: true},
		{v: `"x";r=-1`, name: 'r', want: -1, ok: true},
		{v: `"x";r=1;r=2`, name: 'r', want: 2, ok: true},
		{v: `"x"`, name: 'r', want: 0, ok: false},
		{v: ``, name: 'r', want: 0, ok: false},
		{v: `"x";r=abc`, name: 'r', want: 0, ok: false},
		{v: `"x";r="4"`, name: 'r', want: 0, ok: false},
		{v: `"x";r=4.5`, name: 'r', want: 0, ok: false},
		{v: `"x";r=1234567890123456`, name: 'r', want: 0, ok: false},
		{v: `"x";R=4`, name: 'r', want: 0, ok: false},
		{v: `"x" ;r=4`, name: 'r', want: 0, ok: false},
		{v: `"x`, name: 'r', want: 0, ok: false},
		{v: `"x\q";r=4`, name: 'r', want: 0, ok: false},
		{v: `"x";r=4x`, name: 'r', want: 0, ok: false},
		{v: `4;r=4`, name: 'r', want: 0, ok: false},
		{v: `"x";r`, name: 'r', want: 0, ok: false},
	} {
		if got, ok := sfParam(tc.v, tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("sfParam(%q, %c) = %d, %v; want %d, %v", tc.v, tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzSFParam checks sfParam on any value (it must not panic) and on
// every value the agent could write: a string item with any name, r and
// an optional t, alone or first in a list, read back exactly.
func FuzzSFParam(f *testing.F) {
	f.Add("t1", int64(4), int64(1), true, "")
	f.Add(`a"b\\;r=9`, int64(0), int64(-1), false, `, "x";r=1;t=2`)
	f.Fuzz(func(t *testing.T, name string, r, tv int64, hasT bool, rest string) {
		sfParam(name, 'r') // any bytes at all
		sfParam(rest, 't')
		r, tv = r%1e15, tv%1e15
		v := `"`
		for i := 0; i < len(name); i++ {
			switch c := name[i]; {
			case c == '"' || c == '\\':
				v += `\` + string(c)
			case c >= 0x20 && c <= 0x7e:
				v += string(c)
			}
		}
		v += `";r=` + strconv.FormatInt(r, 10)
		if hasT {
			v += ";t=" + strconv.FormatInt(tv, 10)
		}
		v += rest
		if !strings.HasPrefix(rest, ",") && !strings.HasPrefix(rest, " ") {
			v = strings.TrimSuffix(v, rest)
		}
		if got, ok := sfParam(v, 'r'); !ok || got != r {
			t.Fatalf("sfParam(%q, r) = %d, %v; want %d", v, got, ok, r)
		}
		if got, ok := sfParam(v, 't'); ok != hasT || hasT && got != tv {
			t.Fatalf("sfParam(%q, t) = %d, %v; want %d, %v", v, got, ok, tv, hasT)
		}
	})
}

func TestRefund(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	c.Request(ctx, "t/gcra", "d", Copies(10))
	n, err := c.Refund(ctx, "t/gcra", "d", 4)
	if err != nil || n != 14 {
		t.Fatalf("Refund = %d, %v; want 14", n, err)
	}
	if _, err := c.Refund(ctx, "t/tiers", "d", 1); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("Refund on tiers = %v, want ErrWrongKind", err)
	}
}
