package local

import (
	"errors"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func tiers(spec ...config.Tier) []config.Tier { return spec }

func tier(limit int, window, active, cooldown time.Duration, skippable bool) config.Tier {
	return config.Tier{Limit: limit, Window: window, Active: active, Cooldown: cooldown, Skippable: skippable}
}

const s = time.Second

func engine(t *testing.T, cfg *config.Config) *Engine {
	t.Helper()
	return New(normal(cfg))
}

// normal returns cfg normalized in place, as config.Parse returns every
// config: the engine takes config's defaults and lowered limits as they
// are, so a config a test writes out goes through normalization too.
func normal(cfg *config.Config) *config.Config {
	cfg.Normalize()
	return cfg
}

func one(name string, r *config.Resource) *config.Config {
	return normal(&config.Config{Resources: map[string]*config.Resource{name: r}})
}

type step struct {
	at           int
	domain       string
	copies, min  int
	wantGranted  int
	wantRetry    time.Duration
	checkRetry   bool
	wantTier     int
	checkTier    bool
	wantErr      error
	wantShadow   bool
	wantLenient  bool
	wantRemains  int
	checkRemains bool
}

func run(t *testing.T, e *Engine, res string, steps []step) {
	t.Helper()
	for i, st := range steps {
		d, err := e.Request(at(st.at), res, st.domain, st.copies, st.min)
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("step %d (t=%dms): err %v, want %v", i, st.at, err, st.wantErr)
		}
		if err != nil {
			continue
		}
		if d.Granted != st.wantGranted {
			t.Errorf("step %d (t=%dms): granted %d, want %d (%+v)", i, st.at, d.Granted, st.wantGranted, d)
		}
		if st.checkRetry && d.RetryAfter != st.wantRetry {
			t.Errorf("step %d (t=%dms): retry_after %v, want %v", i, st.at, d.RetryAfter, st.wantRetry)
		}
		if st.checkTier && d.Tier != st.wantTier {
			t.Errorf("step %d (t=%dms): tier %d, want %d", i, st.at, d.Tier, st.wantTier)
		}
		if d.Shadow != st.wantShadow || d.Lenient != st.wantLenient {
			t.Errorf("step %d (t=%dms): shadow %v lenient %v, want %v %v", i, st.at, d.Shadow, d.Lenient, st.wantShadow, st.wantLenient)
		}
		if st.checkRemains && d.Remaining != st.wantRemains {
			t.Errorf("step %d (t=%dms): remaining %d, want %d", i, st.at, d.Remaining, st.wantRemains)
		}
	}
}

// "Reading the simulator presets with these rules: 5,1,1,0 grants 5 per
// second; 5,1,1,0,50,5,5,15 lets a domain burst to 50 per 5 s once every
// 20 s; 5,1,1,0,1,15,15,0 grants the bursting request then nothing for 15 s;
// 50,15,15,30 grants 50 in 15 s, then nothing for 30 s."
func TestSimulatorPresets(t *testing.T) {
	grants := func(e *Engine, from, to, every int) int {
		n := 0
		for ms := from; ms < to; ms += every {
			d, err := e.Request(at(ms), "p/r", "u", 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			n += d.Granted
		}
		return n
	}
	cases := []struct {
		name  string
		tiers []config.Tier
		check func(t *testing.T, e *Engine)
	}{
		{name: "5,1,1,0 grants 5 per second", tiers: tiers(tier(5, s, s, 0, false)), check: func(t *testing.T, e *Engine) {
			for sec := 0; sec < 3; sec++ {
				if n := grants(e, sec*1000, sec*1000+1000, 10); n != 5 {
					t.Errorf("second %d: %d grants, want 5", sec, n)
				}
			}
		}},
		{name: "5,1,1,0,50,5,5,15 bursts to 50 per 5 s once every 20 s", tiers: tiers(tier(5, s, s, 0, false), tier(50, 5*s, 5*s, 15*s, false)), check: func(t *testing.T, e *Engine) {
			// 4 s of 1 request every 10 ms: 5 in tier 1, then the burst tier's 50.
			if n := grants(e, 0, 5000, 10); n != 55 {
				t.Errorf("first 5 s: %d grants, want 55 (5 + 50)", n)
			}
			// Until t=20 s the burst tier cools down: only tier 1's 5 per second.
			if n := grants(e, 5000, 20000, 10); n != 5*15 {
				t.Errorf("5 s–20 s: %d grants, want 75", n)
			}
			// At 20 s the burst is there again.
			if n := grants(e, 20000, 25000, 10); n != 55 {
				t.Errorf("20 s–25 s: %d grants, want 55", n)
			}
		}},
		{name: "5,1,1,0,1,15,15,0 grants the bursting request then nothing for 15 s", tiers: tiers(tier(5, s, s, 0, false), tier(1, 15*s, 15*s, 0, false)), check: func(t *testing.T, e *Engine) {
			if n := grants(e, 0, 1000, 10); n != 6 {
				t.Errorf("first second: %d grants, want 6 (5 + the bursting one)", n)
			}
			d, _ := e.Request(at(1000), "p/r", "u", 1, 1)
			// The bursting request came at 50 ms: prison until 15.05 s.
			if d.Granted != 0 || d.RetryAfter != 14050*time.Millisecond {
				t.Errorf("t=1s: granted %d retry %v, want 0 and 14.05s", d.Granted, d.RetryAfter)
			}
			if n := grants(e, 1000, 15000, 10); n != 0 {
				t.Errorf("1 s–15 s: %d grants, want 0", n)
			}
			if n := grants(e, 15000, 16000, 10); n != 6 {
				t.Errorf("15 s–16 s: %d grants, want 6", n)
			}
		}},
		{name: "50,15,15,30 grants 50 in 15 s, then nothing for 30 s", tiers: tiers(tier(50, 15*s, 15*s, 30*s, false)), check: func(t *testing.T, e *Engine) {
			if n := grants(e, 0, 15000, 100); n != 50 {
				t.Errorf("first 15 s: %d grants, want 50", n)
			}
			if n := grants(e, 15000, 45000, 100); n != 0 {
				t.Errorf("15 s–45 s: %d grants, want 0", n)
			}
			if n := grants(e, 45000, 46000, 100); n != 10 {
				t.Errorf("45 s–46 s: %d grants, want 10", n)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.check(t, engine(t, one("p/r", &config.Resource{Kind: config.KindTiers, Tiers: c.tiers})))
		})
	}
}

func TestTiersRules(t *testing.T) {
	cases := []struct {
		name  string
		res   *config.Resource
		steps []step
	}{
		{
			// "n = 0 is valid: every request is rejected."
			name:  "no tiers rejects every request, forever",
			res:   &config.Resource{Kind: config.KindTiers},
			steps: []step{{at: 0, domain: "a", copies: 1, min: 1, wantGranted: 0, wantRetry: Never, checkRetry: true}},
		},
		{
			// "q = 0 is a peek: nothing changes, the response describes the state."
			name: "a peek changes nothing",
			res:  &config.Resource{Kind: config.KindTiers, Tiers: tiers(tier(2, s, s, 0, false))},
			steps: []step{
				{at: 0, domain: "a", copies: 0, min: 0, wantGranted: 0, wantRemains: 2, checkRemains: true, wantRetry: 0, checkRetry: true},
				{at: 0, domain: "a", copies: 2, min: 2, wantGranted: 2},
				{at: 1, domain: "a", copies: 0, min: 0, wantGranted: 0, wantRemains: 0, checkRemains: true, wantRetry: 999 * time.Millisecond, checkRetry: true},
			},
		},
		{
			// "reject (change nothing) if granted < m": all or nothing by default.
			name: "min_copies: all or nothing, or a partial grant",
			res:  &config.Resource{Kind: config.KindTiers, Tiers: tiers(tier(3, s, s, 0, false))},
			steps: []step{
				{at: 0, domain: "a", copies: 5, min: 5, wantGranted: 0},
				{at: 0, domain: "a", copies: 5, min: 2, wantGranted: 3},
				{at: 1, domain: "a", copies: 1, min: 1, wantGranted: 0},
			},
		},
		{
			// "if tier j is in cooldown: if S_j: j += 1 (skippable: burst past it) else: break (burst blocked)".
			name: "a non-skippable tier in cooldown blocks the burst",
			res:  &config.Resource{Kind: config.KindTiers, Tiers: tiers(tier(1, s, s, 0, false), tier(1, s, s, 10*s, false), tier(5, s, s, 0, false))},
			steps: []step{
				{at: 0, domain: "a", copies: 2, min: 2, wantGranted: 2, wantTier: 2, checkTier: true},
				{at: 1000, domain: "a", copies: 2, min: 2, wantGranted: 0},
				{at: 1000, domain: "a", copies: 1, min: 1, wantGranted: 1, wantTier: 1, checkTier: true},
			},
		},
		{
			// A per-domain override "replaces the default for that domain, whole".
			name: "override replaces the default whole",
			res: &config.Resource{Kind: config.KindTiers, HardLimit: config.Limit(1), Tiers: tiers(tier(1, s, s, 0, false)),
				Domains: map[string]*config.Override{"big": {Tiers: tiers(tier(10, s, s, 0, false))}}},
			steps: []step{
				{at: 0, domain: "small", copies: 2, min: 1, wantGranted: 1},
				// The override sets no hard_limit: the default's 1 does not apply.
				{at: 0, domain: "big", copies: 5, min: 5, wantGranted: 5},
			},
		},
		{
			// "A resource may set shadow: true: decisions are computed, recorded
			// and reported, but rejections are returned as grants marked shadow."
			name: "shadow turns rejections into marked grants and charges nothing",
			res:  &config.Resource{Kind: config.KindTiers, Shadow: true, Tiers: tiers(tier(1, s, s, 0, false))},
			steps: []step{
				{at: 0, domain: "a", copies: 1, min: 1, wantGranted: 1},
				{at: 1, domain: "a", copies: 3, min: 3, wantGranted: 3, wantShadow: true},
				{at: 2, domain: "a", copies: 0, min: 0, wantGranted: 0, wantRemains: 0, checkRemains: true},
				{at: 1000, domain: "a", copies: 1, min: 1, wantGranted: 1},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { run(t, engine(t, one("t/r", c.res)), "t/r", c.steps) })
	}
}

func TestGCRARules(t *testing.T) {
	res := &config.Resource{Kind: config.KindGCRA, Burst: 2, Count: 1, Period: s}
	e := engine(t, one("g/r", res))
	run(t, e, "g/r", []step{
		// "q > burst is a client error"
		{at: 0, domain: "a", copies: 3, min: 3, wantErr: ErrCostOverBurst},
		{at: 0, domain: "a", copies: 2, min: 1, wantGranted: 2},
		{at: 0, domain: "a", copies: 1, min: 1, wantGranted: 0, wantRetry: s, checkRetry: true},
		{at: 500, domain: "a", copies: 1, min: 1, wantGranted: 0, wantRetry: 500 * time.Millisecond, checkRetry: true},
		{at: 1000, domain: "a", copies: 2, min: 1, wantGranted: 1},
	})
	// "refund(q): tat = max(tat − q·EI, t); refunding a full bucket changes nothing."
	if rem, err := e.Refund(at(1000), "g/r", "a", 5); err != nil || rem != 2 {
		t.Fatalf("refund: %d %v, want 2 remaining", rem, err)
	}
	if rem, err := e.Refund(at(1000), "g/r", "fresh", 5); err != nil || rem != 2 {
		t.Fatalf("refund of a full bucket: %d %v, want 2", rem, err)
	}
	if e.Keys("g/r") != 0 {
		t.Fatalf("a refund that fills the bucket must drop the key; %d keys", e.Keys("g/r"))
	}
}

func TestNamespacesAndErrors(t *testing.T) {
	cfg := &config.Config{
		Namespaces: map[string]*config.Namespace{
			"open":   {AllowUnconfigured: true},
			"ignore": {IgnoreConfigured: true},
		},
		Resources: map[string]*config.Resource{
			"ignore/r": {Kind: config.KindTiers, Tiers: tiers(tier(1, s, s, 0, false))},
			"api/r":    {Kind: config.KindTiers, Tiers: tiers(tier(1, s, s, 0, false))},
			"api/jobs": {Kind: config.KindCopies, DomainLimit: config.Limit(1)},
			"api/g":    {Kind: config.KindGCRA, Burst: 1, Count: 1, Period: s},
		},
	}
	e := engine(t, cfg)
	// "allow_unconfigured (an unknown resource behaves as the most permissive config and is recorded"
	run(t, e, "open/anything", []step{
		{at: 0, domain: "a", copies: 1000, min: 1000, wantGranted: 1000, wantLenient: true},
	})
	if d, _ := e.Request(at(1), "open/anything", "a", 0, 0); d.DomainHitsLastSecond != 1000 {
		t.Errorf("unconfigured resource not recorded: domain hits %d, want 1000", d.DomainHitsLastSecond)
	}
	// "otherwise it is a client error unknown_resource"
	if _, err := e.Request(at(0), "api/nope", "a", 1, 1); !errors.Is(err, ErrUnknownResource) {
		t.Errorf("unknown resource: %v", err)
	}
	// "ignore_configured (every request is granted, and still recorded)"
	run(t, e, "ignore/r", []step{
		{at: 0, domain: "a", copies: 5, min: 5, wantGranted: 5, wantLenient: true},
		{at: 1, domain: "a", copies: 5, min: 5, wantGranted: 5, wantLenient: true},
	})
	// "Asking a copies resource for a rate decision (or the reverse) is a client error wrong_kind."
	if _, err := e.Request(at(0), "api/jobs", "a", 1, 1); !errors.Is(err, ErrWrongKind) {
		t.Errorf("rate call on copies: %v", err)
	}
	sid, _ := e.OpenSession(at(0), s)
	if _, err := e.Reserve(at(0), "api/r", "a", 1, 1, sid); !errors.Is(err, ErrWrongKind) {
		t.Errorf("reserve on tiers: %v", err)
	}
	if _, err := e.Refund(at(0), "api/r", "a", 1); !errors.Is(err, ErrWrongKind) {
		t.Errorf("refund on tiers: %v", err)
	}
	// 0 ≤ m ≤ q
	for _, bad := range [][2]int{{-1, 0}, {1, 2}, {MaxCopies + 1, 1}, {1, -1}} {
		if _, err := e.Request(at(0), "api/r", "a", bad[0], bad[1]); !errors.Is(err, ErrBadRequest) {
			t.Errorf("copies %d min %d: %v, want bad request", bad[0], bad[1], err)
		}
	}
}

// TestMaxKeysStillLimits: past max_keys a new key is no longer granted
// leniently: it is decided on its overflow state, and refused once over.
func TestMaxKeysStillLimits(t *testing.T) {
	e := engine(t, one("m/r", &config.Resource{Kind: config.KindGCRA, Burst: 1, Count: 1, Period: s, MaxKeys: 2}))
	run(t, e, "m/r", []step{
		{at: 0, domain: "a", copies: 1, min: 1, wantGranted: 1},
		{at: 0, domain: "b", copies: 1, min: 1, wantGranted: 1},
		{at: 0, domain: "c", copies: 1, min: 1, wantGranted: 1},
		{at: 0, domain: "c", copies: 1, min: 1, wantGranted: 0},
		{at: 0, domain: "a", copies: 1, min: 1, wantGranted: 0},
	})
	if n := e.Stats().Overflowed.Load(); n != 2 {
		t.Errorf("overflowed decisions counted %d, want 2", n)
	}
	// Once a and b reset, Step drops them and c is tracked again.
	e.Step(at(1000))
	if k := e.Keys("m/r"); k != 0 {
		t.Fatalf("after reset and Step: %d keys, want 0", k)
	}
	run(t, e, "m/r", []step{
		{at: 1000, domain: "c", copies: 1, min: 1, wantGranted: 1},
		{at: 1000, domain: "c", copies: 1, min: 1, wantGranted: 0},
	})
}

func TestStepDropsResetKeys(t *testing.T) {
	e := engine(t, one("k/r", &config.Resource{Kind: config.KindTiers, Tiers: tiers(tier(5, s, 2*s, 3*s, false))}))
	for i := 0; i < 100; i++ {
		if _, err := e.Request(at(0), "k/r", string(rune('a'+i%26))+string(rune('a'+i/26)), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Request(at(0), "k/r", "peeker-never-stored", 0, 0); err != nil {
		t.Fatal(err)
	}
	if k := e.Keys("k/r"); k != 100 {
		t.Fatalf("%d keys, want 100 (a peek must not store a key)", k)
	}
	e.Step(at(4999)) // tiers are in cooldown until 5 s
	if k := e.Keys("k/r"); k != 100 {
		t.Fatalf("before reset: %d keys, want 100", k)
	}
	e.Step(at(5000))
	if k := e.Keys("k/r"); k != 0 {
		t.Fatalf("after reset: %d keys, want 0", k)
	}
}
