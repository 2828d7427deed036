package reconcile

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// TestDriftAbsentIsDefaultZeroShipsEveryHit: "`drift` absent is 0.05;
// `drift: 0` ships every hit at once." The flush threshold of a key is
// max(1, drift·limit/N); with drift 0 it is one hit.
func TestDriftAbsentIsDefaultZeroShipsEveryHit(t *testing.T) {
	tiers := []config.Tier{{Limit: 1000, Window: time.Second, Active: time.Second}}
	for _, tc := range []struct {
		name  string
		drift *float64
		want  int64 // threshold of the tier slot at N = 1
	}{
		{name: "absent", drift: nil, want: 50},
		{name: "zero", drift: config.Fraction(0), want: 1},
		{name: "0.1", drift: config.Fraction(0.1), want: 100},
	} {
		rc := &config.Resource{Kind: config.KindTiers, Tiers: tiers, Drift: tc.drift}
		rc.Normalize() // as Parse does: an absent drift becomes the default
		p := paramsOf(local.ClusterSpecOf(rc), nil)
		if got := threshold(p.drift, p.limit[1], 1); got != tc.want {
			t.Errorf("%s: threshold %d, want %d", tc.name, got, tc.want)
		}
	}
}
