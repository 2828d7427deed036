package cluster

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

const ms = int64(time.Millisecond)

type step struct {
	at      int64 // ns
	key     int
	granted bool
}

// Hand-computed: gcra burst 2, 10 per second (one token per 100 ms).
func TestOracleGCRA(t *testing.T) {
	rc := &config.Resource{Kind: config.KindGCRA, Burst: 2, Count: 10, Period: time.Second}
	cases := []struct {
		name  string
		steps []step
		false int
	}{
		// two tokens at 0; a denial at 0 after two grants is right.
		{"burst spent", []step{{0, 0, true}, {0, 0, true}, {0, 0, false}}, 0},
		// one grant at 0: a token is left, so a denial is false.
		{"token left", []step{{0, 0, true}, {10 * ms, 0, false}}, 1},
		// burst spent at 0: at 100 ms one token is back.
		{"refill", []step{{0, 0, true}, {0, 0, true}, {99 * ms, 0, false}, {100 * ms, 0, false}}, 1},
		// over-admission is committed: three grants at 0 leave the bucket
		// 100 ms in debt, so a denial at 100 ms is right.
		{"over-admitted", []step{{0, 0, true}, {0, 0, true}, {0, 0, true}, {100 * ms, 0, false}, {200 * ms, 0, false}}, 1},
		// keys are apart.
		{"keys", []step{{0, 0, true}, {0, 0, true}, {0, 1, false}}, 1},
	}
	for _, c := range cases {
		o := newOracle(rc, 2, 0, int64(time.Second))
		for _, s := range c.steps {
			o.decided(s.key, s.at, s.granted)
		}
		if o.falseDenials != c.false {
			t.Errorf("%s: %d false denials, want %d", c.name, o.falseDenials, c.false)
		}
	}
}

// Hand-computed: one tier of 2 hits in an active second, cooldown 1 s.
func TestOracleTiers(t *testing.T) {
	rc := &config.Resource{Kind: config.KindTiers, Tiers: []config.Tier{{Limit: 2, Window: time.Second, Active: time.Second, Cooldown: time.Second}}}
	cases := []struct {
		name  string
		steps []step
		false int
	}{
		{"room", []step{{0, 0, true}, {500 * ms, 0, false}}, 1},
		{"full", []step{{0, 0, true}, {1 * ms, 0, true}, {500 * ms, 0, false}}, 0},
		{"cooling", []step{{0, 0, true}, {1500 * ms, 0, false}}, 0},
		{"cooled", []step{{0, 0, true}, {2000 * ms, 0, false}}, 1},
		{"nothing yet", []step{{0, 0, false}}, 1},
	}
	for _, c := range cases {
		o := newOracle(rc, 1, 0, int64(3*time.Second))
		for _, s := range c.steps {
			o.decided(s.key, s.at, s.granted)
		}
		if o.falseDenials != c.false {
			t.Errorf("%s: %d false denials, want %d", c.name, o.falseDenials, c.false)
		}
	}
}

// Windows: aligned from warm, ÷ limit; the worst and the mean over windows
// with requests.
func TestOracleWindows(t *testing.T) {
	rc := &config.Resource{Kind: config.KindGCRA, Burst: 4, Count: 4, Period: time.Second}
	o := newOracle(rc, 2, int64(time.Second), int64(3500*time.Millisecond))
	// before the warm-up: not counted
	o.decided(0, 500*ms, true)
	// window 0 [1s, 2s): key 0 gets 6 grants (over-admitted), key 1 one denial
	for i := range 6 {
		o.decided(0, 1000*ms+int64(i)*ms, true)
	}
	o.decided(1, 1500*ms, false)
	// window 1 [2s, 3s): key 0 gets 2
	o.decided(0, 2100*ms, true)
	o.decided(0, 2200*ms, true)
	// [3s, 3.5s) is not a whole window: not counted
	o.decided(0, 3100*ms, true)
	var r Result
	o.close(&r)
	if r.Windows != 3 || r.WorstWindowRatio != 1.5 || r.MeanWindowRatio != (1.5+0+0.5)/3 {
		t.Errorf("windows %d worst %.3f mean %.3f; want 3, 1.5, %.3f", r.Windows, r.WorstWindowRatio, r.MeanWindowRatio, (1.5+0+0.5)/3)
	}
}

// Hand-computed: one exact bucket fed every request (burst 2, 2 per second,
// a token per 500 ms), beside what the mesh granted.
func TestOracleSolo(t *testing.T) {
	rc := &config.Resource{Kind: config.KindGCRA, Burst: 2, Count: 2, Period: time.Second}
	o := newOracle(rc, 1, 0, int64(2*time.Second))
	// window 0: the mesh grants all five; one bucket grants two at 0 and
	// one at 500 ms (its TAT then 1.5 s), denies the third at 0 and 999 ms.
	for _, at := range []int64{0, 0, 0, 500 * ms, 999 * ms} {
		o.decided(0, at, true)
	}
	// window 1: the bucket grants 1000 ms (TAT 2 s) and denies 1100 ms.
	o.decided(0, 1000*ms, false)
	o.decided(0, 1100*ms, false)
	var r Result
	o.close(&r)
	if r.WorstWindowRatio != 2.5 || r.SoloWorstWindowRatio != 1.5 {
		t.Errorf("worst %.3f solo %.3f; want 2.5 and 1.5", r.WorstWindowRatio, r.SoloWorstWindowRatio)
	}
}
