package reconcile_test

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
)

// A settle reaches every node: a tiers grant settled for less is taken
// back where peers counted it, one settled for more is charged there too;
// a gcra settle travels as a refund or a spend.
func TestSettleReachesPeers(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b")
	a, b := nodes[0], nodes[1]
	for _, tc := range []struct {
		res               string
		est, real, remain int
	}{
		{"t/one", 20, 5, 25},   // 30 a second: 5 left counted
		{"t/one", 4, 12, 13},   // 5 + 12 counted
		{"g/bucket", 8, 3, 7},  // burst 10: 3 spent
		{"g/bucket", 2, 9, -1}, // 3 + 9 spent: over the burst
	} {
		var d local.Decision
		tk, err := a.e.DecideSettle(&d, fc.Now(), tc.res, "u", tc.est, tc.est)
		if err != nil || tk == "" {
			t.Fatalf("%s: DecideSettle: %v, ticket %q", tc.res, err, tk)
		}
		fc.Advance(10 * time.Millisecond)
		step(fc, nodes)
		if _, err := a.e.Settle(fc.Now(), tk, tc.real); err != nil {
			t.Fatal(err)
		}
		fc.Advance(10 * time.Millisecond)
		step(fc, nodes)
		da, db := req(t, a, fc.Now(), tc.res, "u", 0), req(t, b, fc.Now(), tc.res, "u", 0)
		want := tc.remain
		if want < 0 {
			want = 0
		}
		if da.Remaining != want || db.Remaining != want {
			t.Errorf("%s settled %d of %d: remaining a %d, b %d, want %d on both", tc.res, tc.real, tc.est, da.Remaining, db.Remaining, want)
		}
	}
}
