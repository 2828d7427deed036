package local

import (
	"testing"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
)

// TestClientShareBoundsAHoarder is a regression test of the hardening
// issue's ninth item: one client that admits calls and never completes them
// filled an adaptive window for everyone. With client_share 0.5 it holds at
// most half the window; another client still gets in; its tickets expire
// after the timeout and its share comes back.
func TestClientShareBoundsAHoarder(t *testing.T) {
	cfg, err := config.Parse([]byte(`resources:
  a/w: {kind: adaptive, min_window: 1, max_window: 10, timeout: 10s, client_share: 0.5}
  a/open: {kind: adaptive, min_window: 1, max_window: 10, timeout: 10s}
`))
	if err != nil {
		t.Fatal(err)
	}
	e := New(cfg)
	admitted := func(res, client string, ms int) Admission {
		t.Helper()
		a, err := e.AdmitAs(at(ms), res, client)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	var hoarded []string
	for i := range 5 {
		a := admitted("a/w", "pid:666", 0)
		if !a.Admitted {
			t.Fatalf("hoarder's call %d refused: %+v", i, a)
		}
		hoarded = append(hoarded, a.Ticket())
	}
	if a := admitted("a/w", "pid:666", 0); a.Admitted || !a.ClientShare {
		t.Errorf("the hoarder's sixth call: %+v, want refused for its share (5 of 10)", a)
	}
	for i := range 5 {
		if a := admitted("a/w", "pid:42", 0); !a.Admitted {
			t.Errorf("another client's call %d refused: %+v", i, a)
		}
	}
	// Completing gives the place back.
	if _, err := e.Complete(at(100), hoarded[0], adaptive.Success); err != nil {
		t.Fatal(err)
	}
	if a := admitted("a/w", "pid:666", 100); !a.Admitted {
		t.Errorf("after a completion the hoarder may take one more: %+v", a)
	}
	// A client without an identity ("") and a resource without a share are
	// not bounded.
	for i := range 10 {
		if a := admitted("a/open", "pid:666", 0); !a.Admitted {
			t.Fatalf("unbounded resource, call %d: %+v", i, a)
		}
	}
	// After the timeout the hoarder's tickets are gone: its share is back,
	// whatever the window became.
	e.Step(at(10_100))
	if a := admitted("a/w", "pid:666", 10_100); !a.Admitted {
		t.Errorf("after the timeout: %+v", a)
	}
}
