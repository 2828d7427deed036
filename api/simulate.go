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
	"github.com/obol-dev/obol/internal/lowprio"
	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/sim"
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
	// DefaultSimulateTimeLimit is the processor time one simulation may use
	// when Options.SimulateTimeLimit is 0.
	DefaultSimulateTimeLimit = 2 * time.Second
)

// simGuard bounds simulations: one at a time per agent, each within a
// limit of processor time (sim.Pace). Simulations are a tool for people, not
// part of the decision path: they must never take the processor from live
// decisions.
type simGuard struct {
	busy  atomic.Bool
	limit time.Duration
	// lastEnd is when the last simulation ended (guarded by busy): the
	// next starts simGap after it at the earliest.
	lastEnd time.Time
	// thread and now are the clocks of pace: the simulation thread's
	// processor time and the clock; nil means sim.ThreadTime and time.Now.
	thread func() time.Duration
	now    func() time.Time
	// rest, when set, is pace's rest instead of time.Sleep (tests).
	rest func(time.Duration)
	// child starts simulation children (simchild.go); its exe is ""
	// without Options.SimulateInChild.
	child childRunner
}

// pace starts pacing a simulation; call it on the simulation's thread.
func (g *simGuard) pace() *sim.Pace {
	thread, now := g.thread, g.now
	if thread == nil {
		thread = sim.ThreadTime
	}
	if now == nil {
		now = time.Now
	}
	p := sim.NewPace(g.limit, thread, now)
	if g.rest != nil {
		p.WithRest(g.rest)
	}
	return p
}

// simStopped is the 413 of a simulation step stopped by p (err from
// p.Step), what naming the simulation and done its progress (", after 64
// of 1000 requests"; may be empty), hint what to simulate instead.
func simStopped(p *sim.Pace, err error, what, done, hint string) error {
	if errors.Is(err, sim.ErrWallLimit) {
		return tooLarge("the %s could not finish within %s on this busy agent and was stopped%s; retry later, or %s", what, p.Wall(), done, hint)
	}
	return tooLarge("the %s used more than its time limit of %s of processor time and was stopped%s; %s", what, p.Limit(), done, hint)
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

// simBody is a decoded /v1/simulate body.
type simBody struct {
	resource    []byte // the resource's config, raw JSON (an object)
	requests    []sim.Request
	firstRefund int // index of the first refund, -1 when none

	step func() error // the pace of the decode, nil: none
}

// decodeSimulate decodes {"resource": {...}, "requests": [...]} (JSON;
// decodeSimulateMsgpack, MessagePack, where the config is a map, turned into
// JSON for the config parser): both are required; requests are in
// non-decreasing at_ms order, at most maxSimRequests of them; an item's
// fields are those of /v1/request with "domain" required, plus "at_ms"
// (required) and "op" ("", "request" or "refund"; a refund takes no
// min_copies). Errors about an item name it: "requests[3].copies: ...".
func decodeSimulate(data []byte) (*simBody, error) {
	return decodeSimulatePaced(data, formatJSON, nil)
}

func decodeSimulateMsgpack(data []byte) (*simBody, error) {
	return decodeSimulatePaced(data, formatMsgpack, nil)
}

// decodeSimulatePaced is decodeSimulate (JSON) or decodeSimulateMsgpack,
// calling step (when not nil) after every decodeStepEvery requests: a
// simulation's pace, so that decoding 100,000 requests is paced as their
// run is (it is processor time like the run's, and on an agent with one
// processor an unpaced decode holds it for up to the Go scheduler's 10 ms
// time slice while decisions wait). A step's error stops the decode.
func decodeSimulatePaced(data []byte, f format, step func() error) (*simBody, error) {
	var b wireBody
	r := b.jsonReader(data)
	if f == formatMsgpack {
		r = b.mpReader(data)
	}
	return readSimulate(r, &b, step)
}

// decodeStepEvery is how many requests decodeSimulatePaced decodes between
// two steps of its pace (about 30 µs of decoding).
const decodeStepEvery = 64

// readSimulate reads a /v1/simulate body at r, its items into b, calling
// step (when not nil) every decodeStepEvery requests.
func readSimulate(r wire.Reader, b *wireBody, step func() error) (*simBody, error) {
	sb := &simBody{firstRefund: -1, step: step}
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
		if sb.step != nil && i%decodeStepEvery == decodeStepEvery-1 {
			if err := sb.step(); err != nil {
				return err
			}
		}
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
	sb.requests = append(sb.requests, sim.Request{
		AtMs: b.atMs, Domain: domain, Copies: copies, MinCopies: minCopies, Refund: refund,
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
// fresh engine holding only that resource, at sim.Base + at_ms (virtual time;
// the live state is not touched). A decision is the reply of /v1/request, or
// {"remaining": N} for a refund, or {"error": {...}} for a request the engine
// refuses (e.g. cost_over_burst). The body limit is 16 MiB here (64 KiB
// elsewhere), for up to 100000 requests.
//
// Bounds: one simulation runs at a time (another gets 429 too_many with
// Retry-After: 1); a body whose work estimate (simWork) is over maxSimWork is
// 413 too_large before it runs; a run past the time limit is stopped and
// answered 413 too_large; the run yields the processor every sim.YieldEvery
// decisions.
func (s *Server) simulate(ctx *fasthttp.RequestCtx, _ params) {
	s.oneSimulation(ctx, s.runSimulation)
}

// oneSimulation runs work, a simulation's handler, unless another
// simulation is running on this agent (429 too_many with Retry-After: 1).
// The work runs in a child process (Options.SimulateInChild, simchild.go)
// started from a thread of its own at the lowest scheduling priority, with
// a P of its own while it runs (lowprio.Run), or on that thread when there
// is no child: when the machine's processors are all busy, the kernel
// gives them to decisions first.
func (s *Server) oneSimulation(ctx *fasthttp.RequestCtx, work func(*fasthttp.RequestCtx)) {
	if !s.sim.busy.CompareAndSwap(false, true) {
		ctx.Response.Header.Set("Retry-After", "1")
		s.fail(ctx, &apiError{status: fasthttp.StatusTooManyRequests, code: codeTooMany,
			msg: "a simulation is already running on this agent (one at a time); retry when it ends"})
		return
	}
	defer s.sim.busy.Store(false)
	if wait := simGap - time.Since(s.sim.lastEnd); wait > 0 {
		time.Sleep(wait)
	}
	lowprio.Run(func() {
		// A child started from this thread is born at its priority (a
		// thread's priority is inherited), its start and the Go runtime's
		// set-up in it included.
		if !s.runInChild(ctx) {
			work(ctx)
		}
	})
	s.sim.lastEnd = time.Now()
}

// simGap is the least time from one simulation's end to the next one's
// start. Each simulation starts a thread and changes the Go runtime's
// processor count twice (lowprio.Run), which stops every goroutine for a
// moment: three clients posting the smallest simulation as fast as they
// were answered (about 1,500 a second) moved the pinned probe's p99 6 to
// 12× (go run ./bench/abuse -attack simtiny). A client that sends its
// simulations one after another waits the gap; one that sends while
// another runs gets 429 as before.
const simGap = 5 * time.Millisecond

// runSimulation is simulate's work, on its low-priority thread.
func (s *Server) runSimulation(ctx *fasthttp.RequestCtx) {
	pace := s.sim.pace()
	body, bf, err := readBody(ctx)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	sb, err := decodeSimulatePaced(body, bf, func() error {
		if err := pace.Step(); err != nil {
			return simStopped(pace, err, "simulation", " while its requests were decoded", "send fewer requests")
		}
		return nil
	})
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
	err = sim.Run(res, sb.requests, func(i int) error {
		if err := pace.Step(); err != nil {
			return simStopped(pace, err, "simulation", fmt.Sprintf(" after %d of %d requests", i, len(sb.requests)), "send fewer requests")
		}
		return nil
	}, func(i int, o *sim.Outcome) error {
		out = w.Next(out, i)
		switch {
		case o.Err != nil:
			_, code, msg, ok := classify(o.Err)
			if !ok {
				return itemFailure(o.Err, i)
			}
			out = replies.AppendError(w, out, code, msg)
		case sb.requests[i].Refund:
			out = replies.AppendInt(w, out, replies.KeyRemaining, int64(o.Remaining))
		default:
			out = writeDecision(w, out, &o.Decision)
		}
		if trace {
			var err error
			if tr, err = writeTrace(w, tr, i, o); err != nil {
				return itemFailure(err, i)
			}
		}
		return nil
	})
	if err != nil {
		s.fail(ctx, err)
		return
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
// refuses: every problem, each named by its path ("resource.burst: ...").
func resourceProblems(err error) error {
	return &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, msg: problemsMessage(err)}
}

// problemsMessage is the message of a refusal by the config's parser:
// every problem, each named by its path, separated by "; ".
func problemsMessage(err error) string {
	var ps *config.Problems
	if !errors.As(err, &ps) {
		return err.Error()
	}
	list := make([]string, len(*ps))
	for i, p := range *ps {
		list[i] = p.String()
	}
	return strings.Join(list, "; ")
}

func itemFailure(err error, i int) error {
	return fmt.Errorf("simulated request %d: %w", i, err)
}
