package local

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// TestObjectsAreCapped is the regression test of the hardening issue's fifth
// attack: 1M sessions cost 270 MB and lived 24 h, 500k transfers 157 MB more,
// and transfers orphaned by their session's end kept copies counted for
// their whole TTL. Each cap, when full, refuses the call that would pass it
// with ErrTooMany naming the cap, and changes nothing else; a session's end
// releases the transfers staged from it that nobody seized.
func TestObjectsAreCapped(t *testing.T) {
	e := engine(t, one("c/jobs", &config.Resource{Kind: config.KindCopies}))
	e.SetCaps(Caps{Sessions: 3, Holds: 5, Transfers: 4, HoldsPerSession: 3, TransfersPerSession: 2})
	tooMany := func(err error, what string) {
		t.Helper()
		if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), what) {
			t.Errorf("err = %v, want too many naming %q", err, what)
		}
	}

	// Sessions: the fourth is refused; ending one makes room.
	var sids []string
	for range 3 {
		sid, err := e.OpenSession(at(0), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, sid)
	}
	_, err := e.OpenSession(at(0), time.Minute)
	tooMany(err, "sessions: the agent has 3 open, its cap")

	// Holds per session, then per agent.
	for range 3 {
		if r, err := e.Reserve(at(0), "c/jobs", "a", 1, 1, sids[0]); err != nil || r.Granted != 1 {
			t.Fatal(r, err)
		}
	}
	_, err = e.Reserve(at(0), "c/jobs", "a", 1, 1, sids[0])
	tooMany(err, "has 3, its cap")
	if r, err := e.Reserve(at(0), "c/jobs", "a", 0, 0, sids[0]); err != nil || r.Granted != 0 {
		t.Errorf("a peek is not a hold and needs no room: %+v %v", r, err)
	}
	var h1 []string
	for range 2 {
		r, err := e.Reserve(at(0), "c/jobs", "b", 2, 2, sids[1])
		if err != nil {
			t.Fatal(err)
		}
		h1 = append(h1, r.Hold)
	}
	_, err = e.Reserve(at(0), "c/jobs", "c", 1, 1, sids[2])
	tooMany(err, "holds: the agent has 5, its cap")

	// Transfers per session; a transfer takes no hold.
	for _, h := range h1 {
		if _, err := e.Transfer(at(0), h, 1, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	_, err = e.Transfer(at(0), h1[0], 1, time.Hour)
	tooMany(err, "has 2 staged, its cap")

	// A refused call changed nothing: 3 + 4 copies held or staged.
	if _, holds, transfers := e.Sessions(); holds != 5 || transfers != 2 {
		t.Errorf("holds %d transfers %d, want 5 and 2", holds, transfers)
	}
	if u := e.Usage()[0]; u.Holds != 7 {
		t.Errorf("copies counted: %d, want 7", u.Holds)
	}

	// Ending session 1 releases its holds and the transfers staged from it
	// (nobody seized them): before, they stayed counted for their hour.
	freed, err := e.EndSession(at(1), sids[1])
	if err != nil || freed != 4 {
		t.Errorf("EndSession = %d, %v; want 4 freed (2 held + 2 staged)", freed, err)
	}
	if u := e.Usage()[0]; u.Holds != 3 {
		t.Errorf("copies counted after the session ended: %d, want 3", u.Holds)
	}
	if _, holds, transfers := e.Sessions(); holds != 3 || transfers != 0 {
		t.Errorf("holds %d transfers %d, want 3 and 0", holds, transfers)
	}
	// A seized transfer outlives the session that staged it.
	sid, _ := e.OpenSession(at(2), time.Minute)
	r, _ := e.Reserve(at(2), "c/jobs", "d", 2, 2, sid)
	x, _ := e.Transfer(at(2), r.Hold, 2, time.Hour)
	if _, err := e.Seize(at(2), x, sids[2]); err != nil {
		t.Fatal(err)
	}
	if freed, _ := e.EndSession(at(3), sid); freed != 0 {
		t.Errorf("ending the staging session freed %d seized copies", freed)
	}
	if u := e.Usage()[0]; u.Holds != 5 {
		t.Errorf("copies counted: %d, want 5", u.Holds)
	}
}

// TestKeepaliveLoopDoesNotGrowTheHeap: a keepalive leaves the old deadline
// to be skipped; a client renewing in a loop must not grow the heap without
// bound.
func TestKeepaliveLoopDoesNotGrowTheHeap(t *testing.T) {
	e := engine(t, one("c/jobs", &config.Resource{Kind: config.KindCopies}))
	sid, _ := e.OpenSession(at(0), time.Hour)
	for i := range 100_000 {
		if _, err := e.KeepAlive(at(i%1000), sid); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.book.deadlines); n > 2*1+1024+1 {
		t.Errorf("%d deadlines for one session", n)
	}
}

// TestUnconfiguredResourcesExpireWhenIdle: a namespace that allows
// unconfigured resources records up to MaxUnconfigured of them; an empty one
// is forgotten after unconfiguredIdle, so a client inventing names cannot
// fill the table for good, and one in use is kept.
func TestUnconfiguredResourcesExpireWhenIdle(t *testing.T) {
	e := engine(t, &config.Config{Namespaces: map[string]*config.Namespace{"sb": {AllowUnconfigured: true}},
		Resources: map[string]*config.Resource{}})
	for i := range 100 {
		if d, err := e.Request(at(0), "sb/r"+strings.Repeat("x", i%50)+string(rune('a'+i%26)), "d", 1, 1); err != nil || d.Granted != 1 {
			t.Fatal(d, err)
		}
	}
	sid, _ := e.OpenSession(at(0), time.Hour)
	if _, err := e.Reserve(at(0), "sb/jobs", "d", 1, 1, sid); err != nil {
		t.Fatal(err)
	}
	n := func() int { e.dynMu.RLock(); defer e.dynMu.RUnlock(); return len(e.dyn) }
	before := n()
	for s := 1; s <= 62; s++ {
		e.Step(at(s * 1000))
	}
	if got := n(); got != 1 || before < 50 {
		t.Errorf("after a minute idle: %d unconfigured resources (from %d), want 1 (sb/jobs holds a copy)", got, before)
	}
	e.EndSession(at(63_000), sid)
	for s := 64; s <= 126; s++ {
		e.Step(at(s * 1000))
	}
	if got := n(); got != 0 {
		t.Errorf("%d unconfigured resources left, want 0", got)
	}
}

// BenchmarkEndSessionAtTheHoldCap ends a session holding the most holds a
// session may have (DefaultCaps.HoldsPerSession): the longest the copies
// lock is held by one call. Before the cap, a session of 500k holds held it
// for 0.4 s.
func BenchmarkEndSessionAtTheHoldCap(b *testing.B) {
	e := New(one("c/jobs", &config.Resource{Kind: config.KindCopies}))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		sid, _ := e.OpenSession(at(0), time.Hour)
		for range DefaultCaps.HoldsPerSession {
			if _, err := e.Reserve(at(0), "c/jobs", "d", 1, 1, sid); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if n, err := e.EndSession(at(0), sid); err != nil || n != DefaultCaps.HoldsPerSession {
			b.Fatal(n, err)
		}
	}
}
