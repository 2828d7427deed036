package local

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/obol-dev/obol/config"
)

// requestedEngine returns an engine whose namespace rq allows limits set by
// requests, with caps of defs definitions and keys keys.
func requestedEngine(t *testing.T, defs, keys int) *Engine {
	t.Helper()
	return New(normal(&config.Config{Namespaces: map[string]*config.Namespace{
		"rq":     {RequestLimits: true, MaxRequestLimits: defs, MaxRequestKeys: keys},
		"closed": {AllowUnconfigured: true},
	}, Resources: map[string]*config.Resource{
		"rq/fixed": {Kind: config.KindGCRA, Burst: 1, Count: 1, Period: s},
	}}))
}

// A limit set by a request decides as the same limit in the config would,
// each definition of a name counting apart; the name it is decided under
// is refused where the namespace does not allow it or its text is not a
// canonical limit.
func TestRequestLimitDecidesAndCountsApart(t *testing.T) {
	e := requestedEngine(t, 10, 100)
	five, three := LimitedName("rq/a", "gcra:5/5/1s"), LimitedName("rq/a", "gcra:3/3/1s")
	if g := granted(t, e, 0, five, "u", 5); g != 5 {
		t.Fatalf("gcra 5: granted %d of 5", g)
	}
	if g := granted(t, e, 0, five, "u", 1); g != 0 {
		t.Fatalf("gcra 5 after 5: granted %d, want 0", g)
	}
	if g := granted(t, e, 0, three, "u", 3); g != 3 {
		t.Fatalf("gcra 3 of the same name: granted %d, want 3 (counted apart)", g)
	}
	if g := granted(t, e, 200, five, "u", 1); g != 1 {
		t.Fatalf("gcra 5 a fifth of a second later: granted %d, want 1", g)
	}
	tiersName := LimitedName("rq/t", "tiers:2/1s/1s/0s")
	d, err := e.Request(at(0), tiersName, "u", 3, 3)
	if err != nil || d.Granted != 0 || d.FirstTierLimit != 2 {
		t.Fatalf("tiers 2: %+v, %v; want 3 refused by a tier of 2", d, err)
	}
	for _, tt := range []struct {
		name string
		want error
		msg  string
	}{
		{LimitedName("closed/a", "gcra:5/5/1s"), ErrBadLimit, `namespace "closed" does not allow limits set by requests`},
		{LimitedName("none/a", "gcra:5/5/1s"), ErrBadLimit, `namespace "none"`},
		{LimitedName("rq/a", "gcra:0/5/1s"), ErrBadLimit, "limit.burst: must be ≥ 1, got 0"},
		{LimitedName("rq/a", "gcra:5/5/1000ms"), ErrBadLimit, `not in canonical form ("gcra:5/5/1s")`},
		{LimitedName("rq/a", "copies:5"), ErrBadLimit, `want "gcra:" or "tiers:"`},
		{LimitedName("rq", "gcra:5/5/1s"), ErrBadRequest, "NAMESPACE/NAME"},
	} {
		_, err := e.Request(at(0), tt.name, "u", 1, 1)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: %v, want %v naming %q", tt.name, err, tt.want, tt.msg)
		}
	}
	if u := e.RequestLimitUsage(); len(u) != 1 || u[0].Definitions != 3 {
		t.Errorf("usage %+v, want 3 definitions (refused ones make none)", u)
	}
}

// A namespace's caps: past max_request_limits a new definition is
// refused, past max_request_keys a new key of any of its definitions is,
// while keys already tracked are decided as ever; a key dropped once it
// has reset makes room again.
func TestRequestLimitCaps(t *testing.T) {
	e := requestedEngine(t, 2, 3)
	a, b := LimitedName("rq/a", "gcra:2/2/1s"), LimitedName("rq/b", "gcra:2/2/1s")
	granted(t, e, 0, a, "u1", 1)
	granted(t, e, 0, b, "u1", 1)
	_, err := e.Request(at(0), LimitedName("rq/c", "gcra:2/2/1s"), "u1", 1, 1)
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "namespaces.rq.max_request_limits") {
		t.Fatalf("a third definition: %v, want too many naming max_request_limits", err)
	}
	granted(t, e, 0, a, "u2", 1)
	_, err = e.Request(at(0), b, "u3", 1, 1)
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "namespaces.rq.max_request_keys") {
		t.Fatalf("a fourth key: %v, want too many naming max_request_keys", err)
	}
	if _, err := e.DecideSettle(&Decision{}, at(0), b, "u4", 1, 1); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a fourth key asking for a ticket: %v, want too many", err)
	}
	if g := granted(t, e, 0, b, "u1", 1); g != 1 {
		t.Fatalf("a key already tracked at the cap: granted %d, want 1", g)
	}
	if g := granted(t, e, 0, "rq/fixed", "u9", 1); g != 1 {
		t.Fatalf("a configured resource of the namespace: granted %d, want 1 (not capped)", g)
	}
	e.Step(at(5000)) // every key has reset
	if g := granted(t, e, 5000, b, "u3", 1); g != 1 {
		t.Fatalf("a new key once the others reset: granted %d, want 1", g)
	}
}

// unregCluster records what registers and unregisters.
type unregCluster struct {
	fakeCluster
	gone []string
}

func (c *unregCluster) Unregister(name string) { c.gone = append(c.gone, name) }

// attachedUnreg returns e attached to a new unregCluster.
func attachedUnreg(e *Engine) (*Engine, *unregCluster) {
	c := &unregCluster{fakeCluster: fakeCluster{regs: map[string]fakeReg{}}}
	e.Attach(c)
	return e, c
}

// A definition registers with the cluster when it is made and unregisters
// when Step forgets it: a minute after its last key was dropped. Resolve
// makes a peer's definition, and refuses a name that carries none.
func TestRequestLimitRegistersAndIsForgotten(t *testing.T) {
	e, c := attachedUnreg(requestedEngine(t, 10, 100))
	name := LimitedName("rq/a", "gcra:2/2/1s")
	granted(t, e, 0, name, "u", 1)
	reg, ok := c.regs[name]
	if !ok || !reg.spec.Requested {
		t.Fatalf("registered %v (spec %+v), want %q marked Requested", ok, reg.spec, name)
	}
	if !e.Resolve(LimitedName("rq/b", "tiers:3/1s/1s/0s")) || e.Resolve("rq/plain") || e.Resolve(LimitedName("closed/b", "gcra:2/2/1s")) {
		t.Fatal("Resolve: want a peer's definition made, a name without a limit and a refused one not")
	}
	for ms := 1000; ms <= 120_000; ms += 1000 {
		e.Step(at(ms))
	}
	if len(c.gone) != 2 {
		t.Fatalf("unregistered %q after two idle minutes, want both definitions", c.gone)
	}
	if u := e.RequestLimitUsage(); u[0].Definitions != 0 {
		t.Fatalf("usage %+v, want none kept", u)
	}
	if g := granted(t, e, 120_000, name, "u", 2); g != 2 {
		t.Fatalf("the definition made again: granted %d, want 2", g)
	}
}

// A reload keeps the definitions while the namespace allows them (past a
// lowered cap, the first by name), with their counts; one that turns
// request_limits off drops them.
func TestRequestLimitReload(t *testing.T) {
	e := requestedEngine(t, 10, 100)
	names := []string{LimitedName("rq/a", "gcra:2/2/1s"), LimitedName("rq/b", "gcra:2/2/1s"), LimitedName("rq/c", "gcra:2/2/1s")}
	for _, n := range names {
		granted(t, e, 0, n, "u", 2)
	}
	lowered := requestedEngine(t, 2, 100).Config()
	e2, _ := e.Reload(lowered)
	if u := e2.RequestLimitUsage(); u[0].Definitions != 2 {
		t.Fatalf("after lowering the cap to 2: %+v", u)
	}
	if g := granted(t, e2, 0, names[0], "u", 1); g != 0 {
		t.Fatalf("a kept definition: granted %d, want 0 (its counts kept)", g)
	}
	if _, err := e2.Request(at(0), names[2], "u", 1, 1); !errors.Is(err, ErrTooMany) {
		t.Fatalf("the definition past the lowered cap: %v, want too many (it was dropped)", err)
	}
	off := normal(&config.Config{Namespaces: map[string]*config.Namespace{"rq": {}}})
	e3, _ := e2.Reload(off)
	if _, err := e3.Request(at(0), names[0], "u", 1, 1); !errors.Is(err, ErrBadLimit) {
		t.Fatalf("after request_limits went off: %v, want bad limit", err)
	}
}

// Reset and Settle work on a limit set by a request as on a configured one.
func TestRequestLimitResetAndSettle(t *testing.T) {
	e := requestedEngine(t, 10, 100)
	name := LimitedName("rq/a", "gcra:4/4/1s")
	var d Decision
	tk, err := e.DecideSettle(&d, at(0), name, "u", 4, 4)
	if err != nil || tk == "" {
		t.Fatalf("settle ticket: %q, %v", tk, err)
	}
	if st, err := e.Settle(at(0), tk, 1); err != nil || st.Remaining != 3 {
		t.Fatalf("settled at 1: %+v, %v; want 3 remaining", st, err)
	}
	if err := e.Reset(at(0), name, "u"); err != nil {
		t.Fatal(err)
	}
	if g := granted(t, e, 0, name, "u", 4); g != 4 {
		t.Fatalf("after the reset: granted %d, want 4", g)
	}
	if err := e.Reset(at(0), LimitedName("closed/a", "gcra:4/4/1s"), "u"); !errors.Is(err, ErrBadLimit) {
		t.Fatalf("a reset in a namespace without request_limits: %v, want bad limit", err)
	}
}

// poolKeys is the keys namespace rq's pool counts.
func poolKeys(e *Engine) int64 {
	e.book.pools.mu.Lock()
	defer e.book.pools.mu.Unlock()
	if p := e.book.pools.m["rq"]; p != nil {
		return p.n.Load()
	}
	return 0
}

// A reload that drops definitions (a lowered cap, request_limits turned
// off) takes their keys out of the namespace's count: turned on again,
// the namespace has its whole cap of keys.
func TestRequestLimitReloadReleasesKeys(t *testing.T) {
	e := requestedEngine(t, 10, 5)
	for i := range 5 {
		granted(t, e, 0, LimitedName("rq/z"+strconv.Itoa(i), "gcra:1/1/1h0m0s"), "u", 1)
	}
	e, _ = e.Reload(requestedEngine(t, 1, 5).Config())
	if n := poolKeys(e); n != 1 {
		t.Fatalf("after lowering the cap to 1 definition: %d keys counted, want 1", n)
	}
	e, _ = e.Reload(normal(&config.Config{Namespaces: map[string]*config.Namespace{"rq": {}}}))
	e, _ = e.Reload(requestedEngine(t, 10, 5).Config())
	if n := poolKeys(e); n != 0 {
		t.Fatalf("after turning request_limits off and on: %d keys counted, want 0", n)
	}
	for i := range 5 {
		if g := granted(t, e, 0, LimitedName("rq/new", "gcra:1/1/1s"), "k"+strconv.Itoa(i), 1); g != 1 {
			t.Fatalf("key %d of the full cap: granted %d", i, g)
		}
	}
}

// Decisions racing Step's forgetting of a definition, and a reload, leave
// nothing counted once everything is idle: a key made in a definition
// Step forgot counts against no cap, and a definition a retired engine
// would make is made in the engine in force.
func TestRequestLimitRacesLeaveNoKeys(t *testing.T) {
	e := requestedEngine(t, 100_000, 1_000_000)
	cfg := e.Config()
	c := &lockedCluster{regs: map[string]bool{}}
	e.Attach(c) // a definition handed to a reload's engine registers: under -race, no read of its attachment before it is set
	var cur atomic.Pointer[Engine]
	cur.Store(e)
	var ms atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				name := LimitedName("rq/a", "gcra:1/1/1ms")
				if i%2 == 1 {
					name = LimitedName("rq/n"+strconv.Itoa(w)+"_"+strconv.Itoa(i), "gcra:1/1/1ms")
				}
				_, _ = cur.Load().Request(at(int(ms.Load())), name, "u"+strconv.Itoa(w), 1, 1)
				runtime.Gosched()
			}
		}()
	}
	for i := range 400 {
		ms.Add(61_000)
		cur.Load().Step(at(int(ms.Load())))
		if i%20 == 0 {
			n, _ := cur.Load().Reload(cfg)
			cur.Store(n)
		}
	}
	stop.Store(true)
	wg.Wait()
	last := cur.Load()
	last.dynMu.RLock()
	c.mu.Lock()
	for name, r := range last.dyn {
		if r.defined && !c.regs[name] {
			t.Errorf("%q is kept but not registered with the cluster", name)
		}
	}
	c.mu.Unlock()
	last.dynMu.RUnlock()
	for range 3 {
		ms.Add(61_000)
		cur.Load().Step(at(int(ms.Load())))
	}
	if n, u := poolKeys(cur.Load()), cur.Load().RequestLimitUsage(); n != 0 || u[0].Definitions != 0 {
		t.Fatalf("after everything went idle: %d keys counted, %+v; want none", n, u)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.regs) != 0 {
		t.Fatalf("%d definitions still registered after everything was forgotten", len(c.regs))
	}
}

// lockedCluster records, safely from many goroutines, the definitions
// registered and not unregistered since.
type lockedCluster struct {
	mu   sync.Mutex
	regs map[string]bool
}

func (c *lockedCluster) Register(name string, _ ClusterSpec, _ Applier) Recorder {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, _, ok := SplitLimitedName(name); ok {
		c.regs[name] = true
	}
	return nopRecorder{}
}

func (c *lockedCluster) Unregister(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.regs, name)
}

// A limit whose keys would keep state longer than the namespace's
// max_request_window is refused, naming it.
func TestRequestLimitWindowCapped(t *testing.T) {
	e := requestedEngine(t, 10, 100)
	for _, key := range []string{"gcra:1/1/876000h0m0s", "gcra:100/1/15m0s", "tiers:1/1s/1s/24h0m0s"} {
		_, err := e.Request(at(0), LimitedName("rq/long", key), "u", 1, 1)
		if !errors.Is(err, ErrBadLimit) || !strings.Contains(err.Error(), "max_request_window") {
			t.Errorf("%s: %v, want bad limit naming max_request_window", key, err)
		}
	}
	if g := granted(t, e, 0, LimitedName("rq/day", "tiers:1/24h0m0s/24h0m0s/0s"), "u", 1); g != 1 {
		t.Fatalf("a window of a day, the default cap: granted %d", g)
	}
}

// A Step of the engine a reload retired forgets nothing the new engine
// kept: the definition stays registered and its keys counted.
func TestRetiredEngineStepForgetsNothing(t *testing.T) {
	e, c := attachedUnreg(requestedEngine(t, 10, 2))
	name := LimitedName("rq/a", "gcra:1/1/1s")
	granted(t, e, 0, name, "u1", 1)
	n, _ := e.Reload(e.Config())
	for ms := 1000; ms <= 180_000; ms += 1000 {
		e.Step(at(ms)) // only the retired engine steps: the key resets, the definition goes idle there
	}
	if len(c.gone) != 0 {
		t.Fatalf("the retired engine unregistered %q", c.gone)
	}
	if u := n.RequestLimitUsage(); u[0].Definitions != 1 {
		t.Fatalf("the engine in force: %+v, want its definition kept", u)
	}
}
