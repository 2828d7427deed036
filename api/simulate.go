package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

const (
	// maxSimRequests bounds the requests of one simulation (413 above).
	maxSimRequests = 100_000
	// maxSimWork bounds a simulation's work, counted as requests × (tiers
	// of the longest tier list + 1): 100,000 requests on up to 19 tiers, or
	// 30,000 on the most tiers a list may have (64). A body over it is
	// refused (413) before anything runs. (100,000 requests on 64 tiers take
	// about 0.2 s here; the budget keeps the worst case well inside the
	// time limit.)
	maxSimWork = 2_000_000
	// maxSimResource bounds the size of the simulated resource's config (as
	// JSON), checked before it is parsed: the parse of a config is far
	// costlier than its bytes, and one resource, overrides included, fits in
	// the 64 KiB every other body is held to.
	maxSimResource = 64 << 10
	// simYieldEvery is how many simulated decisions run between two looks
	// at the clock (the duty cycle and the time limit).
	simYieldEvery = 64
	// simSlice is how long a simulation works before it pauses for simRest
	// times as long: a simulation takes at most a quarter of one processor,
	// so that live decisions keep theirs.
	simSlice = 2 * time.Millisecond
	// simRest is how many times as long as it worked a simulation rests
	// after each slice.
	simRest = 3
	// DefaultSimulateTimeLimit is the processor time one simulation may use
	// when Options.SimulateTimeLimit is 0.
	DefaultSimulateTimeLimit = 2 * time.Second
	// simWallFactor is how many times its time limit a simulation may take
	// on the clock: the duty cycle alone makes it at least 1+simRest times,
	// and a machine busy with decisions gives the low-priority thread less.
	simWallFactor = 15
	// simResource is the name the simulated resource has in its engine.
	simResource = "sim/resource"
)

// simBase is the virtual instant at_ms counts from: a fixed instant, so that
// a simulation's replies depend on its body alone.
var simBase = time.Unix(1_700_000_000, 0)

// simGuard bounds simulations: one at a time per agent, each within a
// limit of processor time. Simulations are a tool for people, not part of the
// decision path: they must never take the processor from live decisions.
type simGuard struct {
	busy  atomic.Bool
	limit time.Duration
}

// simPace paces and bounds one simulation's work, on the simulation's own
// thread: the time limit counts the processor time the work used (so a
// machine busy with decisions, which takes the processor from the
// low-priority thread, does not make a small simulation fail), and the
// clock bounds how long the caller waits (simWallFactor times the limit).
// Between slices of simSlice of work it rests simRest times as long.
type simPace struct {
	limit, wall time.Duration
	cpu0, slice time.Duration
	wall0       time.Time
}

// processStart is the origin of threadTime's fallback to the monotonic clock.
var processStart = time.Now()

// errSimTime and errSimWall are simPace.step's reasons to stop.
var (
	errSimTime = errors.New("time limit")
	errSimWall = errors.New("wall-clock limit")
)

// pace starts pacing a simulation; call it on the simulation's thread.
func (g *simGuard) pace() *simPace {
	now := threadTime()
	return &simPace{limit: g.limit, wall: simWallFactor * g.limit, cpu0: now, slice: now, wall0: time.Now()}
}

// step is called between units of work: errSimTime once the work has used
// more than its limit of processor time, errSimWall once it has taken more
// than its wall-clock bound; otherwise it rests when a slice is done.
func (p *simPace) step() error {
	now := threadTime()
	switch {
	case now-p.cpu0 > p.limit:
		return errSimTime
	case time.Since(p.wall0) > p.wall: // wall clock: a bound on waiting, not a decision instant
		return errSimWall
	}
	if worked := now - p.slice; worked >= simSlice {
		time.Sleep(simRest * worked) // the duty cycle: rest simRest times as long as it worked
		p.slice = threadTime()
	}
	return nil
}

// stopped is the 413 of a simulation step stopped (err from step), what
// naming the simulation and done its progress (", after 64 of 1000
// requests"; may be empty), hint what to simulate instead.
func (p *simPace) stopped(err error, what, done, hint string) error {
	if errors.Is(err, errSimWall) {
		return tooLarge("the %s could not finish within %s on this busy agent and was stopped%s; retry later, or %s", what, p.wall, done, hint)
	}
	return tooLarge("the %s used more than its time limit of %s of processor time and was stopped%s; %s", what, p.limit, done, hint)
}

// simWork is the work estimate maxSimWork bounds.
func simWork(res *config.Resource, requests int) int {
	tiers := len(res.Tiers)
	for _, o := range res.Domains {
		if o != nil {
			tiers = max(tiers, len(o.Tiers))
		}
	}
	return requests * (tiers + 1)
}

// simItem is one decoded simulated request.
type simItem struct {
	atMs      int64
	domain    string
	copies    int
	minCopies int
	refund    bool
}

// simBody is a decoded /v1/simulate body.
type simBody struct {
	resource    []byte // the resource's config, raw JSON (an object)
	requests    []simItem
	firstRefund int // index of the first refund, -1 when none
}

// decodeSimulate decodes {"resource": {...}, "requests": [...]} (JSON;
// decodeSimulateMsgpack, MessagePack, where the config is a map, turned into
// JSON for the config parser): both are required; requests are in
// non-decreasing at_ms order, at most maxSimRequests of them; an item's
// fields are those of /v1/request with "domain" required, plus "at_ms"
// (required) and "op" ("", "request" or "refund"; a refund takes no
// min_copies). Errors about an item name it: "requests[3].copies: ...".
func decodeSimulate(data []byte) (*simBody, error) {
	var b wireBody
	return readSimulate(b.jsonReader(data), &b)
}

func decodeSimulateMsgpack(data []byte) (*simBody, error) {
	var b wireBody
	return readSimulate(b.mpReader(data), &b)
}

// readSimulate reads a /v1/simulate body at r, its items into b.
func readSimulate(r wire.Reader, b *wireBody) (*simBody, error) {
	sb := &simBody{firstRefund: -1}
	var seenResource, seenRequests bool
	if !r.Empty() {
		if err := r.Object("body"); err != nil {
			return nil, err
		}
		for {
			k, ok, err := r.Key("body", &b.unescaped)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			switch string(k) {
			case "resource":
				if seenResource {
					return nil, &fieldError{Field: "resource", Msg: "given twice"}
				}
				seenResource = true
				if sb.resource, err = resourceConfig(r, "resource"); err != nil {
					return nil, err
				}
			case "requests":
				if seenRequests {
					return nil, &fieldError{Field: "requests", Msg: "given twice"}
				}
				seenRequests = true
				if err := sb.readRequests(r, b); err != nil {
					return nil, err
				}
			default:
				return nil, &fieldError{Field: wire.Snippet(k), Msg: "unknown field; expected one of resource, requests"}
			}
		}
		if err := r.End(); err != nil {
			return nil, err
		}
	}
	switch {
	case !seenResource:
		return nil, &fieldError{Field: "resource", Msg: "required field is missing"}
	case !seenRequests:
		return nil, &fieldError{Field: "requests", Msg: "required field is missing"}
	}
	return sb, nil
}

func (sb *simBody) readRequests(r wire.Reader, b *wireBody) error {
	st := simState{domains: map[string]string{}}
	return readRequests(r, maxSimRequests, func(int) error {
		return tooLarge("requests: more than %d requests", maxSimRequests)
	}, func(i int) error {
		b.clear()
		b.unescaped = b.unescaped[:0] // add interns what it keeps
		if err := readFields(r, b, "", simItemFields); err != nil {
			return itemError(err, i)
		}
		return sb.add(b, i, &st)
	})
}

// simState is what reading the requests of a simulation carries from one to
// the next.
type simState struct {
	domains map[string]string // interned: simulations repeat a few domains
	prev    int64             // the previous request's at_ms
}

// add checks the decoded request i and appends it: the checks after the
// fields, the same for a JSON and a MessagePack body.
func (sb *simBody) add(b *wireBody, i int, st *simState) error {
	err := b.check(fAtMs | fDomain)
	refund := string(b.op) == "refund"
	if err == nil && refund && b.has(fMinCopies) {
		err = &fieldError{Field: "min_copies", Msg: `not allowed with op "refund"`}
	}
	if err == nil && b.atMs < st.prev {
		err = &fieldError{Field: "at_ms", Msg: fmt.Sprintf(
			"must not be less than the previous request's at_ms %d, got %d", st.prev, b.atMs)}
	}
	if err != nil {
		return itemError(err, i)
	}
	st.prev = b.atMs
	domain, ok := st.domains[string(b.domain)]
	if !ok {
		domain = string(b.domain)
		st.domains[domain] = domain
	}
	copies, minCopies := b.counts()
	if refund && sb.firstRefund < 0 {
		sb.firstRefund = i
	}
	sb.requests = append(sb.requests, simItem{
		atMs: b.atMs, domain: domain, copies: copies, minCopies: minCopies, refund: refund,
	})
	return nil
}

// itemError prefixes a field error with the item it is about.
func itemError(err error, i int) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		if fe.Field == "" {
			fe.Field = fmt.Sprintf("requests[%d]", i)
		} else {
			fe.Field = fmt.Sprintf("requests[%d].%s", i, fe.Field)
		}
	}
	return err
}

// POST /v1/simulate {"resource": <config>, "requests": [...]} (JSON or
// MessagePack; in MessagePack the config is a map) → {"config":
// <normalized resource>, "decisions": [...]}: the requests are decided by a
// fresh engine holding only that resource, at simBase + at_ms (virtual time;
// the live state is not touched). A decision is the reply of /v1/request, or
// {"remaining": N} for a refund, or {"error": {...}} for a request the engine
// refuses (e.g. cost_over_burst). The body limit is 16 MiB here (64 KiB
// elsewhere), for up to 100000 requests.
//
// Bounds: one simulation runs at a time (another gets 429 too_many with
// Retry-After: 1); a body whose work estimate (simWork) is over maxSimWork is
// 413 too_large before it runs; a run past the time limit is stopped and
// answered 413 too_large; the run yields the processor every simYieldEvery
// decisions.
func (s *Server) simulate(ctx *fasthttp.RequestCtx, _ params) {
	s.oneSimulation(ctx, s.runSimulation)
}

// oneSimulation runs work, a simulation's handler, unless another
// simulation is running on this agent (429 too_many with Retry-After: 1).
// The work runs on a thread of its own at the lowest scheduling priority:
// when the machine's processors are all busy, the kernel gives them to
// decisions first.
func (s *Server) oneSimulation(ctx *fasthttp.RequestCtx, work func(*fasthttp.RequestCtx)) {
	if !s.sim.busy.CompareAndSwap(false, true) {
		ctx.Response.Header.Set("Retry-After", "1")
		s.fail(ctx, &apiError{status: fasthttp.StatusTooManyRequests, code: codeTooMany,
			msg: "a simulation is already running on this agent (one at a time); retry when it ends"})
		return
	}
	defer s.sim.busy.Store(false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lowPriorityThread()
		work(ctx)
	}()
	<-done
}

// runSimulation is simulate's work, on its low-priority thread.
func (s *Server) runSimulation(ctx *fasthttp.RequestCtx) {
	pace := s.sim.pace()
	body, bf, err := readBody(ctx)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	var sb *simBody
	if bf == formatMsgpack {
		sb, err = decodeSimulateMsgpack(body)
	} else {
		sb, err = decodeSimulate(body)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	res, err := config.ParseResource(sb.resource)
	if err != nil {
		s.fail(ctx, resourceProblems(err))
		return
	}
	switch res.Kind {
	case config.KindTiers, config.KindGCRA:
	default:
		s.fail(ctx, &apiError{status: fasthttp.StatusConflict, code: codeWrongKind, msg: fmt.Sprintf(
			"resource: kind %q makes no rate decisions; simulate takes kinds tiers and gcra", res.Kind)})
		return
	}
	if sb.firstRefund >= 0 && res.Kind != config.KindGCRA {
		s.fail(ctx, &fieldError{Field: fmt.Sprintf("requests[%d].op", sb.firstRefund),
			Msg: fmt.Sprintf(`"refund" applies to gcra resources only, this one is %s`, res.Kind)})
		return
	}
	trace, err := traceParam(ctx)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	if w := simWork(res, len(sb.requests)) * traceCost(trace); w > maxSimWork {
		s.fail(ctx, tooLarge("requests × (tiers + 1) = %d is over the simulation budget of %d; send fewer requests or fewer tiers", w, maxSimWork))
		return
	}
	normalized, err := json.Marshal(res)
	if err != nil {
		s.fail(ctx, fmt.Errorf("rendering the simulated resource: %w", err))
		return
	}
	eng := local.New(&config.Config{Resources: map[string]*config.Resource{simResource: res}})

	f := replyFormat(ctx)
	w := replies.NewWriter(f)
	fields := 2
	var tr []byte // the trace, when asked: one item per request
	if trace {
		fields = 3
		tr = w.Array(make([]byte, 0, len(sb.requests)*(16+24*len(res.Tiers))), len(sb.requests))
	}
	out := w.Object(make([]byte, 0, 64+len(normalized)+len(sb.requests)*320), fields)
	if out, err = w.JSON(w.First(out, `,"config":`), normalized); err != nil {
		s.fail(ctx, err)
		return
	}
	out = w.Array(w.Key(out, `,"decisions":`), len(sb.requests))
	var d local.Decision
	for i, it := range sb.requests {
		if i > 0 && i%simYieldEvery == 0 {
			if err := pace.step(); err != nil {
				s.fail(ctx, pace.stopped(err, "simulation", fmt.Sprintf(" after %d of %d requests", i, len(sb.requests)), "send fewer requests"))
				return
			}
		}
		out = w.Next(out, i)
		t := simBase.Add(time.Duration(it.atMs) * time.Millisecond)
		var err error
		remaining := 0
		if it.refund {
			remaining, err = eng.Refund(t, simResource, it.domain, it.copies)
		} else {
			err = eng.Decide(&d, t, simResource, it.domain, it.copies, it.minCopies)
		}
		switch {
		case err != nil:
			_, code, msg, ok := classify(err)
			if !ok {
				s.fail(ctx, itemFailure(err, i))
				return
			}
			out = writeErrorObject(w, out, code, msg)
		case it.refund:
			out = writeInt(w, out, `,"remaining":`, int64(remaining))
		default:
			out = writeDecision(w, out, &d)
		}
		if trace {
			if tr, err = writeTrace(w, tr, i, eng, t, it.domain); err != nil {
				s.fail(ctx, itemFailure(err, i))
				return
			}
		}
	}
	out = w.EndArray(out)
	if trace {
		out = append(w.Key(out, `,"trace":`), w.EndArray(tr)...)
	}
	out = w.End(out)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentTypes[f])
	ctx.Response.SetBodyRaw(out)
}

// resourceProblems is the 400 reply for a resource config ParseResource
// refuses: every problem, each named by its path ("resource.burst: ..."),
// separated by "; ".
func resourceProblems(err error) error {
	msg := err.Error()
	var ps *config.Problems
	if errors.As(err, &ps) {
		list := make([]string, len(*ps))
		for i, p := range *ps {
			list[i] = p.String()
		}
		msg = strings.Join(list, "; ")
	}
	return &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, msg: msg}
}

func itemFailure(err error, i int) error {
	return fmt.Errorf("simulated request %d: %w", i, err)
}
