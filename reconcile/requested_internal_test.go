package reconcile

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/local"
)

// A limit set by a request, whatever its window, leaves the flush gap to
// the configured resources; Unregister takes a resource's window out of it.
func TestRequestedLimitLeavesTheFlushGap(t *testing.T) {
	c := New(Options{Name: "a"})
	tenMs := local.ClusterSpec{Spans: []local.Span{{Hits: 10}}}
	second := local.ClusterSpec{Spans: []local.Span{{Hits: 1000}}}
	c.Register("t/conf", second, nil)
	if g := c.gap(); g != 10*time.Millisecond {
		t.Fatalf("a 1 s window: gap %v, want 10ms (a hundredth)", g)
	}
	req := tenMs
	req.Requested = true
	c.Register(local.LimitedName("rq/x", "gcra:1/1/10ms"), req, nil)
	if g := c.gap(); g != 10*time.Millisecond {
		t.Fatalf("with a limit set by a request of 10 ms: gap %v, want 10ms still", g)
	}
	c.Register("t/short", tenMs, nil)
	if g := c.gap(); g != 100*time.Microsecond {
		t.Fatalf("a configured 10 ms window: gap %v, want 100µs", g)
	}
	c.Unregister("t/short")
	if g := c.gap(); g != 10*time.Millisecond {
		t.Fatalf("after Unregister: gap %v, want 10ms", g)
	}
}

// countingResolver refuses every name, counting the asks.
type countingResolver struct {
	local.Applier
	asked int
}

func (r *countingResolver) Resolve(string) bool { r.asked++; return false }

// A name no applier makes is asked about once per refuseFor, not once per
// count that names it.
func TestResolveRemembersRefusals(t *testing.T) {
	c := New(Options{Name: "a"})
	rv := &countingResolver{}
	c.Register("t/conf", local.ClusterSpec{}, rv)
	name := local.LimitedName("closed/x", "gcra:1/1/1s")
	for now := int64(0); now < 3*refuseFor; now += refuseFor / 4 {
		if r := c.resolve(name, now); r != nil {
			t.Fatalf("resolve made %q", name)
		}
	}
	if rv.asked != 3 {
		t.Fatalf("asked %d times in 3 refuseFor periods, want 3", rv.asked)
	}
}
