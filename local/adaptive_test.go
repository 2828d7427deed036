package local

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
)

func adaptiveConfigFor(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`
namespaces:
  open: {allow_unconfigured: true}
  off: {ignore_configured: true}
resources:
  a/login: {kind: adaptive, min_window: 1, max_window: 3, grow_every: 1, margin: 1, timeout: 10s}
  a/shadow: {kind: adaptive, min_window: 1, max_window: 1, shadow: true}
  a/gcra: {kind: gcra, burst: 1, count: 1, period: 1s}
  a/jobs: {kind: copies, domain_limit: 1}
  off/login: {kind: adaptive, min_window: 1, max_window: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestAdaptiveAdmitComplete(t *testing.T) {
	e := New(adaptiveConfigFor(t))
	// t0: three admitted, the fourth rejected.
	var tickets []string
	for i := range 3 {
		a, err := e.Admit(at(0), "a/login")
		if err != nil || !a.Admitted || a.Position != i+1 || a.Window != 3 || a.Shadow || a.Lenient {
			t.Fatalf("admit %d: %+v %v", i, a, err)
		}
		tk := a.Ticket()
		if !strings.HasPrefix(tk, "a/login#") || string(a.AppendTicket([]byte("x"))) != "x"+tk {
			t.Fatalf("ticket %q", tk)
		}
		tickets = append(tickets, tk)
	}
	a, err := e.Admit(at(0), "a/login")
	if err != nil || a.Admitted || a.Ticket() != "" || a.Window != 3 || a.Position != 4 {
		t.Fatalf("the fourth: %+v %v", a, err)
	}
	// t1: the third backs off at position 3: window 3 − 1 = 2.
	if w, err := e.Complete(at(100), tickets[2], adaptive.Backoff); err != nil || w != 2 {
		t.Fatalf("backoff: window %d, %v", w, err)
	}
	// t2: the first succeeds (grow_every 1): 3.
	if w, err := e.Complete(at(200), tickets[0], adaptive.Success); err != nil || w != 3 {
		t.Fatalf("success: window %d, %v", w, err)
	}
	// Completing twice, a made-up ticket, a ticket of another resource.
	for _, tk := range []string{tickets[0], "a/login#1.1", "nope", "a/gcra#1.1", "zz/zz#1.1", "a/login#", "a/login#x.y"} {
		if _, err := e.Complete(at(300), tk, adaptive.Success); !errors.Is(err, ErrUnknownTicket) || !strings.Contains(err.Error(), tk) {
			t.Errorf("complete %q: %v, want ErrUnknownTicket naming it", tk, err)
		}
	}
	if _, err := e.Complete(at(300), tickets[1], 0); !errors.Is(err, ErrBadRequest) {
		t.Errorf("an outcome of 0: %v", err)
	}
	if w, o, ok := e.AdaptiveWindow("a/login"); !ok || w != 3 || o != 1 {
		t.Fatalf("window %d outstanding %d %v", w, o, ok)
	}
}

func TestAdaptiveStepSweepsTimeouts(t *testing.T) {
	e := New(adaptiveConfigFor(t))
	a, _ := e.Admit(at(0), "a/login")
	b, _ := e.Admit(at(0), "a/login")
	e.Step(at(9999))
	if _, o, _ := e.AdaptiveWindow("a/login"); o != 2 {
		t.Fatalf("outstanding %d before the timeout, want 2", o)
	}
	// At t0 + timeout both expire: backoffs at positions 1 and 2 → the floor.
	e.Step(at(10000))
	if w, o, _ := e.AdaptiveWindow("a/login"); o != 0 || w != 1 {
		t.Fatalf("after the sweep: window %d outstanding %d, want 1 and 0", w, o)
	}
	for _, tk := range []string{a.Ticket(), b.Ticket()} {
		if _, err := e.Complete(at(10001), tk, adaptive.Success); !errors.Is(err, ErrUnknownTicket) {
			t.Fatalf("an expired ticket: %v", err)
		}
	}
}

func TestAdaptiveShadowAndLenient(t *testing.T) {
	e := New(adaptiveConfigFor(t))
	first, _ := e.Admit(at(0), "a/shadow")
	second, err := e.Admit(at(0), "a/shadow")
	if err != nil || !first.Admitted || first.Shadow || !second.Admitted || !second.Shadow || second.Position != 2 || second.Window != 1 {
		t.Fatalf("shadow: %+v %+v %v", first, second, err)
	}
	if w, err := e.Complete(at(1), second.Ticket(), adaptive.Backoff); err != nil || w != 1 {
		t.Fatalf("completing a shadow ticket: %d %v", w, err)
	}
	if _, o, _ := e.AdaptiveWindow("a/shadow"); o != 1 {
		t.Fatalf("outstanding %d: the shadow ticket counted", o)
	}
	for _, res := range []string{"open/anything", "off/login"} {
		l, err := e.Admit(at(0), res)
		if err != nil || !l.Admitted || !l.Lenient || l.Window != 0 || l.Ticket() != res+"#l" {
			t.Fatalf("%s: %+v %v", res, l, err)
		}
		if _, err := e.Complete(at(1), l.Ticket(), adaptive.Success); err != nil {
			t.Fatalf("completing a lenient ticket: %v", err)
		}
	}
}

func TestAdaptiveWrongKindAndUnknown(t *testing.T) {
	e := New(adaptiveConfigFor(t))
	cases := []struct {
		name string
		call func() error
		want error
		says string
	}{
		{name: "admit on gcra", call: func() error { _, err := e.Admit(at(0), "a/gcra"); return err }, want: ErrWrongKind, says: `"a/gcra" is a gcra resource; admit is for adaptive resources`},
		{name: "admit on copies", call: func() error { _, err := e.Admit(at(0), "a/jobs"); return err }, want: ErrWrongKind, says: "admit is for adaptive resources"},
		{name: "request on adaptive", call: func() error { _, err := e.Request(at(0), "a/login", "d", 1, 1); return err }, want: ErrWrongKind, says: `"a/login" is an adaptive resource; request is for tiers and gcra resources`},
		{name: "refund on adaptive", call: func() error { _, err := e.Refund(at(0), "a/login", "d", 1); return err }, want: ErrWrongKind, says: "is an adaptive resource; refund"},
		{name: "reserve on adaptive", call: func() error {
			sid, _ := e.OpenSession(at(0), time.Minute)
			_, err := e.Reserve(at(0), "a/login", "d", 1, 1, sid)
			return err
		}, want: ErrWrongKind, says: "reserve is for copies resources"},
		{name: "admit unknown", call: func() error { _, err := e.Admit(at(0), "nope/x"); return err }, want: ErrUnknownResource, says: `"nope/x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want %v saying %q", err, tc.want, tc.says)
			}
		})
	}
}

func TestAdaptiveReloadKeepsTheWindow(t *testing.T) {
	cfg := adaptiveConfigFor(t)
	e := New(cfg)
	a, _ := e.Admit(at(0), "a/login")
	b, _ := e.Admit(at(0), "a/login")
	c, _ := e.Admit(at(0), "a/login")
	if _, err := e.Complete(at(1), c.Ticket(), adaptive.Backoff); err != nil { // window 2
		t.Fatal(err)
	}
	// The same config: the window, the open tickets and their epoch carry over.
	n, ch := e.Reload(adaptiveConfigFor(t))
	if len(ch.Changed)+len(ch.KindChanged)+len(ch.Added)+len(ch.Removed) != 0 {
		t.Fatalf("changes %+v", ch)
	}
	if w, o, _ := n.AdaptiveWindow("a/login"); w != 2 || o != 2 {
		t.Fatalf("after the reload: window %d outstanding %d, want 2 and 2", w, o)
	}
	if _, err := n.Complete(at(2), a.Ticket(), adaptive.Success); err != nil {
		t.Fatalf("a ticket from before the reload: %v", err)
	}
	// New limits: the window is clamped into them, tickets still complete.
	cfg2 := adaptiveConfigFor(t)
	cfg2.Resources["a/login"].MinWindow, cfg2.Resources["a/login"].MaxWindow = 5, 8
	n2, ch := n.Reload(cfg2)
	if len(ch.Changed) != 1 || ch.Changed[0] != "a/login" {
		t.Fatalf("changes %+v", ch)
	}
	if w, _, _ := n2.AdaptiveWindow("a/login"); w != 5 {
		t.Fatalf("window %d, want clamped to the new min 5", w)
	}
	if _, err := n2.Complete(at(3), b.Ticket(), adaptive.Success); err != nil {
		t.Fatalf("a ticket from before the second reload: %v", err)
	}
	// A change of kind starts afresh: old tickets are unknown.
	d, _ := n2.Admit(at(4), "a/login")
	cfg3 := adaptiveConfigFor(t)
	cfg3.Resources["a/login"] = &config.Resource{Kind: config.KindGCRA, Burst: 1, Count: 1, Period: time.Second}
	cfg3.Resources["a/login"].Normalize()
	cfg4 := adaptiveConfigFor(t)
	n3, _ := n2.Reload(cfg3)
	n4, _ := n3.Reload(cfg4)
	if _, err := n4.Complete(at(5), d.Ticket(), adaptive.Success); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("a ticket from before a change of kind: %v", err)
	}
}

func BenchmarkAdaptiveAdmitComplete(b *testing.B) {
	cfg := &config.Config{Resources: map[string]*config.Resource{
		"b/login": {Kind: config.KindAdaptive, MinWindow: 5, MaxWindow: 1000, GrowEvery: 10, Margin: 10, Timeout: time.Minute},
	}}
	e := New(normal(cfg))
	t0 := time.Unix(1_700_000_000, 0)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		a, err := e.Admit(now, "b/login")
		if err != nil || !a.Admitted {
			b.Fatalf("%+v %v", a, err)
		}
		buf = a.AppendTicket(buf[:0])
		if _, err := e.Complete(now, string(buf), adaptive.Success); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAdaptiveAdmit(b *testing.B) {
	cfg := &config.Config{Resources: map[string]*config.Resource{
		"b/login": {Kind: config.KindAdaptive, MinWindow: 5, MaxWindow: 10, GrowEvery: 10, Margin: 10, Timeout: time.Minute},
	}}
	e := New(normal(cfg))
	t0 := time.Unix(1_700_000_000, 0)
	for range 10 { // a full window: every further admit is a rejection
		_, _ = e.Admit(t0, "b/login")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if a, _ := e.Admit(t0, "b/login"); a.Admitted {
			b.Fatal("admitted")
		}
	}
}

// rulesConfig has two adaptive resources that differ only in their rules.
func rulesConfig(t *testing.T, predRules string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`
resources:
  a/ziti: {kind: adaptive, min_window: 1, max_window: 50, grow_every: 1, margin: 1, timeout: 10s}
  a/pred: {kind: adaptive, min_window: 1, max_window: 50, grow_every: 1, margin: 1, timeout: 10s, rules: ` + predRules + `}
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestAdaptiveRules: twenty calls admitted at t0; the first succeeds at
// 100 ms (one position takes 100 ms), the last backs off at 1 s (callers
// wait 1 s). OpenZiti's rules drop the window to 20 − margin = 19; the
// Predictive ones cap it at 0.9 · 1 s / 100 ms = 9.
func TestAdaptiveRules(t *testing.T) {
	e := New(rulesConfig(t, "predictive"))
	tickets := map[string][]string{}
	for _, name := range []string{"a/ziti", "a/pred"} {
		for range 20 {
			a, err := e.Admit(at(0), name)
			if err != nil || !a.Admitted {
				t.Fatalf("%s: %+v %v", name, a, err)
			}
			tickets[name] = append(tickets[name], a.Ticket())
		}
		if _, err := e.Complete(at(100), tickets[name][0], adaptive.Success); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Complete(at(1000), tickets[name][19], adaptive.Backoff); err != nil {
			t.Fatal(err)
		}
	}
	if w, _, _ := e.AdaptiveWindow("a/ziti"); w != 19 {
		t.Errorf("openziti window %d, want 19", w)
	}
	if w, _, _ := e.AdaptiveWindow("a/pred"); w != 9 {
		t.Errorf("predictive window %d, want 9", w)
	}

	// A reload to openziti keeps the window and the tickets; a success
	// then grows the window, which the Predictive cap would not allow.
	n, ch := e.Reload(rulesConfig(t, "openziti"))
	if len(ch.Changed) != 1 || ch.Changed[0] != "a/pred" || len(ch.KindChanged) != 0 {
		t.Fatalf("changes %+v, want a/pred changed", ch)
	}
	if w, o, _ := n.AdaptiveWindow("a/pred"); w != 9 || o != 18 {
		t.Fatalf("after the switch: window %d outstanding %d, want 9 and 18", w, o)
	}
	if w, err := n.Complete(at(1000), tickets["a/pred"][1], adaptive.Success); err != nil || w != 10 {
		t.Fatalf("a success under openziti: window %d, %v; want 10", w, err)
	}
	// Back to predictive: what it had learned (1 s patience, 100 ms a
	// position: a cap of 9) is forgotten, so a success grows the window
	// again instead of clamping it.
	n2, _ := n.Reload(rulesConfig(t, "predictive"))
	if w, err := n2.Complete(at(1100), tickets["a/pred"][2], adaptive.Success); err != nil || w != 11 {
		t.Fatalf("a success after switching back: window %d, %v; want 11", w, err)
	}
}

// TestAdaptiveStateAndExpired steps an adaptive resource through admits,
// a timeout and a reload, and checks State and AdaptiveState at each step.
func TestAdaptiveStateAndExpired(t *testing.T) {
	e := New(adaptiveConfigFor(t))
	type want struct {
		window, outstanding int
		expired             uint64
	}
	check := func(step string, e *Engine, ms int, w want) {
		t.Helper()
		ks, err := e.State(at(ms), "a/login", "")
		if err != nil || ks.Kind != config.KindAdaptive || !ks.Tracked || ks.Adaptive == nil {
			t.Fatalf("%s: state %+v %v", step, ks, err)
		}
		got := *ks.Adaptive
		if got.Window != w.window || got.Outstanding != w.outstanding || got.Expired != w.expired ||
			got.MinWindow != 1 || got.MaxWindow != 3 || got.Timeout != 10*time.Second {
			t.Fatalf("%s: %+v, want window %d outstanding %d expired %d, bounds 1..3, timeout 10s", step, got, w.window, w.outstanding, w.expired)
		}
		if st, ok := e.AdaptiveState("a/login"); !ok || st != got {
			t.Fatalf("%s: AdaptiveState %+v %v, State %+v", step, st, ok, got)
		}
	}
	check("fresh", e, 0, want{3, 0, 0})
	e.Admit(at(0), "a/login")
	e.Admit(at(5000), "a/login")
	check("two admitted", e, 5000, want{3, 2, 0})
	// At 10 s the first has been outstanding for the timeout: State sweeps
	// it, a backoff at position 1 (the window falls to the minimum).
	check("the first expired", e, 10000, want{1, 1, 1})
	n, _ := e.Reload(adaptiveConfigFor(t))
	check("a reload keeps the count", n, 15000, want{1, 0, 2})

	for _, c := range []struct{ resource, why string }{{"a/gcra", "not adaptive"}, {"off/login", "no window"}, {"zz/none", "unknown"}} {
		if st, ok := n.AdaptiveState(c.resource); ok {
			t.Errorf("AdaptiveState(%s), %s: %+v", c.resource, c.why, st)
		}
	}
	if ks, err := n.State(at(0), "off/login", ""); err != nil || ks.Tracked || ks.Adaptive != nil {
		t.Errorf("state of an adaptive resource its namespace ignores: %+v %v", ks, err)
	}
}
