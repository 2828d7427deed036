package adaptive

import (
	"testing"
	"time"
)

// TestConfigWithDefaults: WithDefaults fills each zero parameter with its
// Default… constant, the values the docs give, keeps what is set (even an
// invalid value, which Validate refuses), and is idempotent.
func TestConfigWithDefaults(t *testing.T) {
	if DefaultGrowEvery != 10 || DefaultMargin != 10 || DefaultTimeout != 30*time.Second || DefaultHeadroom != 0.9 {
		t.Fatalf("defaults %d %d %v %v, want 10 10 30s 0.9 (docs/adaptive.md)", DefaultGrowEvery, DefaultMargin, DefaultTimeout, DefaultHeadroom)
	}
	for _, tc := range []struct {
		name    string
		in, out Config
	}{
		{"zero", Config{MinWindow: 1, MaxWindow: 2},
			Config{MinWindow: 1, MaxWindow: 2, GrowEvery: DefaultGrowEvery, Margin: DefaultMargin, Timeout: DefaultTimeout, Headroom: DefaultHeadroom}},
		{"set", Config{MinWindow: 3, MaxWindow: 4, GrowEvery: 1, Margin: 2, Timeout: time.Second, Rules: Predictive, Headroom: 0.5},
			Config{MinWindow: 3, MaxWindow: 4, GrowEvery: 1, Margin: 2, Timeout: time.Second, Rules: Predictive, Headroom: 0.5}},
		{"invalid kept", Config{GrowEvery: -1, Margin: -2, Timeout: -3, Headroom: 2},
			Config{GrowEvery: -1, Margin: -2, Timeout: -3, Headroom: 2}},
	} {
		got := tc.in.WithDefaults()
		if got != tc.out {
			t.Errorf("%s: WithDefaults(%+v) = %+v, want %+v", tc.name, tc.in, got, tc.out)
		}
		if again := got.WithDefaults(); again != got {
			t.Errorf("%s: not idempotent: %+v, then %+v", tc.name, got, again)
		}
	}
}

// TestPacerConfigWithDefaults: the same for PacerConfig; MinSleep's
// default is Period/Limit of the filled-in values, a negative Jitter (none)
// stays, and Clock and Rand are left to NewPacerGroup.
func TestPacerConfigWithDefaults(t *testing.T) {
	if DefaultLimit != 4500 || DefaultPeriod != time.Hour || DefaultMultiplier != 1.2 || DefaultJitter != 0.1 {
		t.Fatalf("defaults %d %v %v %v, want 4500 1h 1.2 0.1 (docs/adaptive.md)", DefaultLimit, DefaultPeriod, DefaultMultiplier, DefaultJitter)
	}
	for _, tc := range []struct {
		name    string
		in, out PacerConfig
	}{
		{"zero", PacerConfig{},
			PacerConfig{Limit: 4500, Period: time.Hour, MinSleep: 800 * time.Millisecond, Multiplier: 1.2, Jitter: 0.1}},
		{"min_sleep of the set limit and period", PacerConfig{Strategy: ProportionalRemaining, Limit: 100, Period: time.Minute},
			PacerConfig{Strategy: ProportionalRemaining, Limit: 100, Period: time.Minute, MinSleep: 600 * time.Millisecond, Multiplier: 1.2, Jitter: 0.1}},
		{"set", PacerConfig{Limit: 3, Period: time.Second, MinSleep: time.Millisecond, Multiplier: 2, Jitter: 0.5, StartSleep: time.Second},
			PacerConfig{Limit: 3, Period: time.Second, MinSleep: time.Millisecond, Multiplier: 2, Jitter: 0.5, StartSleep: time.Second}},
		{"negative jitter is none", PacerConfig{Jitter: -1},
			PacerConfig{Limit: 4500, Period: time.Hour, MinSleep: 800 * time.Millisecond, Multiplier: 1.2, Jitter: -1}},
		{"invalid kept", PacerConfig{Limit: -1, Period: -1, Multiplier: 0.5, Jitter: 2},
			PacerConfig{Limit: -1, Period: -1, MinSleep: 1, Multiplier: 0.5, Jitter: 2}},
	} {
		got := tc.in.WithDefaults()
		if got != tc.out {
			t.Errorf("%s: WithDefaults(%+v) = %+v, want %+v", tc.name, tc.in, got, tc.out)
		}
		if again := got.WithDefaults(); again != got {
			t.Errorf("%s: not idempotent: %+v, then %+v", tc.name, got, again)
		}
	}
}

// TestNegativeJitterIsNone: a pacer whose Jitter is negative never
// lengthens a sleep (the filled-in config keeps the negative value, which
// means none).
func TestNegativeJitterIsNone(t *testing.T) {
	p := newPacer(t, PacerConfig{Strategy: ProportionalRemaining, Jitter: -1, StartSleep: time.Second})
	for range 20 {
		if d := p.Delay(t0); d != time.Second {
			t.Fatalf("Delay = %v, want exactly 1s (no jitter)", d)
		}
		p.ObserveAt(t0, 200, 0)
	}
}
