package reconcile

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
)

// Kicked reports a drift threshold reached once, then clears it.
func TestKicked(t *testing.T) {
	cfg, err := config.Parse([]byte("resources:\n  t/r:\n    kind: gcra\n    burst: 100\n    count: 100\n    period: 1s\n    drift: 0.05\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	c := New(Options{Name: "a", Clock: clock.NewFake(now)})
	e := local.New(cfg)
	e.Attach(c)
	if c.Kicked() {
		t.Fatal("kicked before any hit")
	}
	// threshold max(1, 0.05·100/1) = 5 hits
	for i := range 4 {
		if _, err := e.Request(now, "t/r", "d", 1, 1); err != nil {
			t.Fatal(err)
		}
		if c.Kicked() {
			t.Fatalf("kicked after %d hits, threshold 5", i+1)
		}
	}
	if _, err := e.Request(now, "t/r", "d", 1, 1); err != nil {
		t.Fatal(err)
	}
	if !c.Kicked() {
		t.Fatal("not kicked at the threshold")
	}
	if c.Kicked() {
		t.Fatal("kicked twice for one threshold")
	}
}

func TestBucketWidths(t *testing.T) {
	rc, err := config.ParseResource([]byte(`{"kind":"tiers","tiers":"10,1,1,0"}`))
	if err != nil {
		t.Fatal(err)
	}
	if w := BucketWidths(rc); len(w) != 2 || w[0] != 20 || w[1] != 20 {
		t.Errorf("tiers of a 1 s window: widths %v, want [20 20] (a fiftieth)", w)
	}
}
