package local

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

func copiesEngine(t *testing.T) *Engine {
	return engine(t, one("c/jobs", &config.Resource{
		Kind: config.KindCopies, DomainLimit: config.Limit(5), GlobalLimit: config.Limit(8),
		Groups: []config.Group{
			{Name: "ent", Limit: config.Limit(4), Domains: []string{"acme", "globex"}},
			{Name: "eu", Limit: config.Limit(3), Domains: []string{"acme"}},
		},
		Domains: map[string]*config.Override{"whale": {DomainLimit: config.Limit(50)}},
	}))
}

func TestCopiesRules(t *testing.T) {
	e := copiesEngine(t)
	sid, err := e.OpenSession(at(0), 10*s)
	if err != nil {
		t.Fatal(err)
	}
	// "a domain in several groups takes one copy from each group's pool"
	r, err := e.Reserve(at(0), "c/jobs", "acme", 5, 1, sid)
	if err != nil || r.Granted != 3 || r.Hold == "" {
		t.Fatalf("acme: %+v %v, want 3 granted (eu pool of 3)", r, err)
	}
	if len(r.Groups) != 2 || r.Groups[0].Holds != 3 || r.Groups[1].Holds != 3 {
		t.Fatalf("acme groups: %+v", r.Groups)
	}
	// globex shares the ent pool (4): 1 left.
	if r, _ := e.Reserve(at(0), "c/jobs", "globex", 2, 2, sid); r.Granted != 0 || r.Hold != "" {
		t.Fatalf("globex all-or-nothing 2: %+v, want rejected with no hold", r)
	}
	// "A limit above G is lowered to G (effective limit)": whale's 50 → 8.
	r2, _ := e.Reserve(at(0), "c/jobs", "whale", 50, 1, sid)
	if r2.Granted != 5 || r2.DomainLimit != 8 || r2.GlobalHolds != 8 {
		t.Fatalf("whale: %+v, want 5 granted (global 8 − 3), limit 8", r2)
	}
	// "release(hold, n) returns n copies; releasing more than held is a client error.
	// A hold may be released in parts."
	if _, _, err := e.Release(at(1), r.Hold, 4); !errors.Is(err, ErrOverRelease) {
		t.Fatalf("over release: %v", err)
	}
	if rel, held, err := e.Release(at(1), r.Hold, 1); err != nil || rel != 1 || held != 2 {
		t.Fatalf("partial release: %d %d %v", rel, held, err)
	}
	// "transfer(hold, n, ttl) moves n copies into a staging area ... they stay counted."
	x, err := e.Transfer(at(2), r.Hold, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Release(at(2), r.Hold, 1); !errors.Is(err, ErrUnknownHold) {
		t.Fatalf("an emptied hold must be gone: %v", err)
	}
	if ks, _ := e.State(at(2), "c/jobs", "acme"); ks.Holds != 2 {
		t.Fatalf("staged copies must stay counted: %d holds", ks.Holds)
	}
	sid2, _ := e.OpenSession(at(3), 10*s)
	sz, err := e.Seize(at(3), x, sid2)
	if err != nil || sz.Copies != 2 || sz.Domain != "acme" || len(sz.Groups) != 2 {
		t.Fatalf("seize: %+v %v", sz, err)
	}
	// "Seizing an unknown or expired id is a client error."
	if _, err := e.Seize(at(3), x, sid2); !errors.Is(err, ErrUnknownTransfer) {
		t.Fatalf("second seize: %v", err)
	}
	x2, _ := e.Transfer(at(3), sz.Hold, 1, time.Second)
	// "Unseized copies are released after ttl."
	if ks, _ := e.State(at(1002), "c/jobs", "acme"); ks.Holds != 2 {
		t.Fatalf("before the transfer ttl: %d holds, want 2", ks.Holds)
	}
	if ks, _ := e.State(at(1003), "c/jobs", "acme"); ks.Holds != 1 {
		t.Fatalf("after the transfer ttl: %d holds, want 1", ks.Holds)
	}
	if _, err := e.Seize(at(1003), x2, sid2); !errors.Is(err, ErrUnknownTransfer) {
		t.Fatalf("seize after ttl: %v", err)
	}
	// "When a session ends — explicitly, by expiry ... — every copy it holds is released."
	if n, err := e.EndSession(at(1004), sid2); err != nil || n != 1 {
		t.Fatalf("end session: %d %v, want 1 released", n, err)
	}
	if _, err := e.EndSession(at(1004), sid2); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("end twice: %v", err)
	}
	// sid holds whale's 5; a keepalive at 9 s moves its expiry to 19 s.
	if _, err := e.KeepAlive(at(9000), sid); err != nil {
		t.Fatal(err)
	}
	if ks, _ := e.State(at(18999), "c/jobs", "whale"); ks.Holds != 5 {
		t.Fatalf("renewed session lost its holds: %d", ks.Holds)
	}
	if ks, _ := e.State(at(19000), "c/jobs", "whale"); ks.Holds != 0 {
		t.Fatalf("expired session kept its holds: %d", ks.Holds)
	}
	if _, err := e.Reserve(at(19000), "c/jobs", "whale", 1, 1, sid); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("reserve on an expired session: %v", err)
	}
}

// copiesModel is the test's own account of what is held.
type copiesModel struct {
	sessions  map[string]int64 // id → expiry (ns)
	ttl       map[string]int64
	holds     map[string]*mHold
	transfers map[string]*mHold // n, domain; session: the one that staged it (its end releases it); expiry in exp
}

type mHold struct {
	domain  string
	n       int
	session string
	exp     int64
}

// TestCopiesProperty drives random sequences of session start, keepalive,
// end and expiry, reserve, release, transfer, seize and transfer expiry, and
// checks after every step that the engine's counts equal the sum of what the
// model holds (nothing leaked, nothing released twice), that no limit is
// exceeded, and that every count is back to zero once every session has ended
// and every transfer has expired.
func TestCopiesProperty(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	domains := []string{"acme", "globex", "whale", "solo", "other"}
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		e := copiesEngine(t)
		cr := e.res["c/jobs"].k.(*copiesRes)
		m := copiesModel{sessions: map[string]int64{}, ttl: map[string]int64{}, holds: map[string]*mHold{}, transfers: map[string]*mHold{}}
		now := int64(0)
		pick := func(keys map[string]*mHold) string {
			for k := range keys { // random enough: map order
				return k
			}
			return "nope"
		}
		expire := func() {
			for id, exp := range m.sessions {
				if exp <= now {
					delete(m.sessions, id)
					for h, mh := range m.holds {
						if mh.session == id {
							delete(m.holds, h)
						}
					}
					for x, mx := range m.transfers {
						if mx.session == id {
							delete(m.transfers, x)
						}
					}
				}
			}
			for id, x := range m.transfers {
				if x.exp <= now {
					delete(m.transfers, id)
				}
			}
		}
		for stepN := 0; stepN < 200; stepN++ {
			now += int64(rng.IntN(400)) * int64(time.Millisecond)
			tm := time.Unix(0, t0.UnixNano()+now)
			expire()
			switch op := rng.IntN(9); op {
			case 0:
				ttl := int64(rng.IntN(3000)+1) * int64(time.Millisecond)
				id, err := e.OpenSession(tm, time.Duration(ttl))
				if err != nil {
					t.Fatal(err)
				}
				m.sessions[id], m.ttl[id] = now+ttl, ttl
			case 1:
				for id := range m.sessions {
					if _, err := e.KeepAlive(tm, id); err != nil {
						t.Fatalf("seed %d: keepalive of a live session: %v", seed, err)
					}
					m.sessions[id] = now + m.ttl[id]
					break
				}
			case 2:
				for id := range m.sessions {
					n, err := e.EndSession(tm, id)
					want := 0
					for h, mh := range m.holds {
						if mh.session == id {
							want += mh.n
							delete(m.holds, h)
						}
					}
					for x, mx := range m.transfers { // "transfers released when their session ends unless seized"
						if mx.session == id {
							want += mx.n
							delete(m.transfers, x)
						}
					}
					if err != nil || n != want {
						t.Fatalf("seed %d: end session released %d (%v), model %d", seed, n, err, want)
					}
					delete(m.sessions, id)
					break
				}
			case 3, 4:
				for id := range m.sessions {
					d := domains[rng.IntN(len(domains))]
					q := rng.IntN(6)
					mn := 0
					if q > 0 {
						mn = rng.IntN(q + 1)
					}
					r, err := e.Reserve(tm, "c/jobs", d, q, mn, id)
					if err != nil {
						t.Fatalf("seed %d: reserve: %v", seed, err)
					}
					if r.Granted > 0 {
						if r.Granted < mn || r.Granted > q {
							t.Fatalf("seed %d: granted %d outside [%d, %d]", seed, r.Granted, mn, q)
						}
						m.holds[r.Hold] = &mHold{domain: d, n: r.Granted, session: id}
					}
					break
				}
			case 5:
				h := pick(m.holds)
				n := rng.IntN(4) + 1
				_, held, err := e.Release(tm, h, n)
				mh, ok := m.holds[h]
				switch {
				case !ok:
					if !errors.Is(err, ErrUnknownHold) {
						t.Fatalf("seed %d: release of unknown hold: %v", seed, err)
					}
				case n > mh.n:
					if !errors.Is(err, ErrOverRelease) {
						t.Fatalf("seed %d: over release: %v", seed, err)
					}
				default:
					if err != nil {
						t.Fatalf("seed %d: release: %v", seed, err)
					}
					mh.n -= n
					if held != mh.n {
						t.Fatalf("seed %d: held %d, model %d", seed, held, mh.n)
					}
					if mh.n == 0 {
						delete(m.holds, h)
					}
				}
			case 6:
				h := pick(m.holds)
				if mh, ok := m.holds[h]; ok {
					n := rng.IntN(mh.n) + 1
					ttl := int64(rng.IntN(2000)+1) * int64(time.Millisecond)
					x, err := e.Transfer(tm, h, n, time.Duration(ttl))
					if err != nil {
						t.Fatalf("seed %d: transfer: %v", seed, err)
					}
					mh.n -= n
					if mh.n == 0 {
						delete(m.holds, h)
					}
					m.transfers[x] = &mHold{domain: mh.domain, n: n, exp: now + ttl, session: mh.session}
				}
			case 7:
				x := pick(m.transfers)
				for id := range m.sessions {
					sz, err := e.Seize(tm, x, id)
					if mx, ok := m.transfers[x]; ok {
						if err != nil || sz.Copies != mx.n {
							t.Fatalf("seed %d: seize: %+v %v", seed, sz, err)
						}
						m.holds[sz.Hold] = &mHold{domain: mx.domain, n: mx.n, session: id}
						delete(m.transfers, x)
					} else if !errors.Is(err, ErrUnknownTransfer) {
						t.Fatalf("seed %d: seize of unknown transfer: %v", seed, err)
					}
					break
				}
			case 8:
				e.Step(tm)
			}
			checkCounts(t, seed, stepN, e, cr, &m, t0.UnixNano()+now)
		}
		// End everything: every count must be back to zero.
		for id := range m.sessions {
			if _, err := e.EndSession(time.Unix(0, t0.UnixNano()+now), id); err != nil {
				t.Fatalf("seed %d: final end: %v", seed, err)
			}
		}
		e.Step(time.Unix(0, t0.UnixNano()+now+int64(time.Hour)))
		e.book.mu.Lock()
		if cr.total != 0 || len(cr.perDom) != 0 || cr.perGroup[0] != 0 || cr.perGroup[1] != 0 || len(e.book.holds) != 0 || len(e.book.transfers) != 0 {
			t.Fatalf("seed %d: leaked: total %d, domains %v, groups %v, holds %d, transfers %d", seed, cr.total, cr.perDom, cr.perGroup, len(e.book.holds), len(e.book.transfers))
		}
		e.book.mu.Unlock()
	}
}

func checkCounts(t *testing.T, seed, stepN int, e *Engine, cr *copiesRes, m *copiesModel, now int64) {
	t.Helper()
	want := map[string]int{}
	total := 0
	for _, h := range m.holds {
		want[h.domain] += h.n
		total += h.n
	}
	for _, x := range m.transfers {
		want[x.domain] += x.n
		total += x.n
	}
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(now) // the counts as of now, as every call sees them
	if int(cr.total) != total {
		t.Fatalf("seed %d step %d: engine total %d, model %d", seed, stepN, cr.total, total)
	}
	for d, n := range want {
		if int(cr.perDom[d]) != n {
			t.Fatalf("seed %d step %d: %s holds %d, model %d", seed, stepN, d, cr.perDom[d], n)
		}
		if lim := cr.limitFor(d); n > int(lim) {
			t.Fatalf("seed %d step %d: %s holds %d over its limit %d", seed, stepN, d, n, lim)
		}
	}
	if total > int(cr.global) {
		t.Fatalf("seed %d step %d: total %d over global %d", seed, stepN, total, cr.global)
	}
	ent, eu := want["acme"]+want["globex"], want["acme"]
	if int(cr.perGroup[0]) != ent || int(cr.perGroup[1]) != eu || ent > 4 || eu > 3 {
		t.Fatalf("seed %d step %d: groups %v, model ent %d eu %d", seed, stepN, cr.perGroup, ent, eu)
	}
}

func TestHoldResource(t *testing.T) {
	e := copiesEngine(t)
	sid, _ := e.OpenSession(at(0), 10*s)
	r, err := e.Reserve(at(0), "c/jobs", "acme", 2, 1, sid)
	if err != nil || r.Hold == "" {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	if name, ok := e.HoldResource(r.Hold); !ok || name != "c/jobs" {
		t.Errorf("HoldResource(open hold) = %q %v", name, ok)
	}
	if _, _, err := e.Release(at(1), r.Hold, 2); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{r.Hold, "h-nope", ""} {
		if name, ok := e.HoldResource(id); ok {
			t.Errorf("HoldResource(%q) = %q, want none", id, name)
		}
	}
}
