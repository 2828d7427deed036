package local

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/sat"
)

// settle.go is check now, charge later: a request whose cost is known only
// after it is served (an LLM's tokens, bytes, rows) is decided on an
// estimate (DecideSettle) and settled with its real cost (Settle), once.
//
// A grant comes with a ticket that remembers what was counted: the
// estimate, when, and for tiers how many hits each tier took. Settling
// charges the difference at once, on this node and, through the cluster,
// on every peer:
//
//   - less than the estimate: the difference is given back. A gcra bucket
//     gets the tokens back as a refund does; a tiers key loses that many of
//     the grant's own hits, from the highest tier it took down, where they
//     still count (hits that left their window are not taken back twice).
//   - more: the difference is charged past the limit, at the settling
//     instant: a gcra bucket's TAT moves on by that many tokens, a tiers
//     key gets that many more hits in the last second and in every tier a
//     request could take hits in now (charge), so that later requests wait
//     until they leave the window.
//
// A key reset after a ticket's grant settles nothing: the reset forgave
// what was counted before it, and a refund would take back counts made
// after it. A grant made by shadow mode alone gets no ticket.
//
// A ticket settles once (ErrAlreadySettled after, for the last 100,000
// settled; an older one is ErrUnknownTicket, never charged twice); one
// never settled keeps its estimate when it expires (TicketTTL), as does one
// whose resource a reload removed or changed the kind of. An agent keeps at
// most Caps.Tickets tickets not settled yet; a request that would need one
// more is ErrTooMany.

// TicketTTL is how long a settle ticket can be settled after its grant.
const TicketTTL = 10 * time.Minute

// ErrAlreadySettled is Settle's error for a ticket settled before.
var ErrAlreadySettled = errors.New("local: already settled")

// ticket is one grant waiting for its real cost.
type ticket struct {
	resource, domain string
	kind             config.Kind
	at               int64   // the grant's instant: ms (tiers), ns (gcra)
	estimate         int64   // copies counted
	taken            []int64 // tiers: hits counted in each tier (index 0: tier 1)
	expires          int64   // ns
	forgiven         bool    // its key was reset after its grant (take)
}

// atMs returns the ticket's grant instant in Unix ms.
func (tk *ticket) atMs() int64 {
	if tk.kind == config.KindGCRA {
		return tk.at / 1e6
	}
	return tk.at
}

// tickets holds the settle tickets, shared by the engines Reload makes:
// those not settled yet (at most max, each until TicketTTL after its
// grant, found by a queue of ids in the order they were issued: one TTL
// for all), and the ids of the last maxSettled settled, to tell a second
// settle from an unknown ticket.
type tickets struct {
	mu     sync.Mutex
	max    int
	byID   map[string]*ticket
	order  []string // ids, oldest first; a settled one is skipped when it comes up
	head   int
	done   []string // the last maxSettled ids settled, a ring
	next   int      // done's next slot
	isDone map[string]struct{}
	// resets are the keys reset lately (resource, NUL, domain → the
	// reset's instant, Unix ms), while tickets wait: a ticket granted
	// before its key's reset settles nothing (the reset forgave it).
	resets map[string]int64
}

// maxSettled is how many settled tickets' ids are kept, so that a second
// settle of one of them is ErrAlreadySettled (and not ErrUnknownTicket).
const maxSettled = 100_000

func newTickets(max int) *tickets {
	return &tickets{max: max, byID: make(map[string]*ticket), isDone: make(map[string]struct{}), resets: make(map[string]int64)}
}

// noteReset records that resource/domain was reset at at (Unix ms), while
// tickets wait (at most max keys: past that the oldest tickets' keys are
// no longer told apart, and their settles charge as if no reset came).
func (ts *tickets) noteReset(resource, domain string, at int64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.byID) == 0 || len(ts.resets) >= ts.max {
		return
	}
	k := resource + "\x00" + domain
	ts.resets[k] = max(ts.resets[k], at)
}

// expire drops the tickets expired at t (ns), and the queue's settled ids
// that come up. Callers hold mu.
func (ts *tickets) expire(t int64) {
	for ts.head < len(ts.order) {
		id := ts.order[ts.head]
		if tk, ok := ts.byID[id]; ok {
			if tk.expires > t {
				break
			}
			delete(ts.byID, id)
		}
		ts.order[ts.head] = ""
		ts.head++
	}
	if ts.head > 1024 && ts.head*2 > len(ts.order) {
		ts.order = append(ts.order[:0], ts.order[ts.head:]...)
		ts.head = 0
	}
	if len(ts.order)-ts.head > 2*len(ts.byID)+1024 {
		// Settled ids make up most of the queue: keep the live ones, in
		// order (a ticket settled fast behind one still out would
		// otherwise hold its place until that one expires).
		live := ts.order[:0]
		for _, id := range ts.order[ts.head:] {
			if _, ok := ts.byID[id]; ok {
				live = append(live, id)
			}
		}
		clear(ts.order[len(live):])
		ts.order, ts.head = live, 0
	}
}

// sweepResets forgets, at t (ns), the resets older than any ticket still
// waiting could be (TicketTTL): Step's, so that a settle never walks them.
func (ts *tickets) sweepResets(t int64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for k, at := range ts.resets {
		if at*1e6+int64(TicketTTL) <= t {
			delete(ts.resets, k)
		}
	}
}

// room reports whether one more ticket fits at t (ns).
func (ts *tickets) room(t int64) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.expire(t)
	if len(ts.byID) >= ts.max {
		return fmt.Errorf("%w: settle tickets: the agent holds %d not settled yet, its cap; settle them (POST /v1/settle) or let them expire (%v after their grant)", ErrTooMany, len(ts.byID), TicketTTL)
	}
	return nil
}

// add keeps tk, issued at t (ns), and returns its id.
func (ts *tickets) add(tk *ticket, t int64) string {
	id := newRandomID('c')
	tk.expires = t + int64(TicketTTL)
	ts.mu.Lock()
	ts.expire(t)
	ts.byID[id] = tk
	ts.order = append(ts.order, id)
	ts.mu.Unlock()
	return id
}

// take removes ticket id, settled at t (ns), and returns it.
func (ts *tickets) take(id string, t int64) (*ticket, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.expire(t)
	tk, ok := ts.byID[id]
	if !ok {
		if _, settled := ts.isDone[id]; settled {
			return nil, fmt.Errorf("%w: %q was settled before; a ticket settles once", ErrAlreadySettled, id)
		}
		return nil, fmt.Errorf("%w: %q was never issued, expired (%v after its grant: it kept its estimate) or was settled long ago", ErrUnknownTicket, id, TicketTTL)
	}
	delete(ts.byID, id)
	if r, ok := ts.resets[tk.resource+"\x00"+tk.domain]; ok && r >= tk.atMs() {
		tk.forgiven = true
	}
	if len(ts.done) < maxSettled {
		ts.done = append(ts.done, id)
	} else {
		delete(ts.isDone, ts.done[ts.next])
		ts.done[ts.next] = id
		ts.next = (ts.next + 1) % maxSettled
	}
	ts.isDone[id] = struct{}{}
	return tk, nil
}

// len returns the tickets not settled yet.
func (ts *tickets) len() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.byID)
}

// Tickets returns the settle tickets the engine holds now, not settled
// yet.
func (e *Engine) Tickets() int { return e.book.tickets.len() }

// DecideSettle decides a request as Decide does and, when it grants, issues
// a ticket that Settle takes with the request's real cost ("" when it
// grants nothing). A full ticket store is ErrTooMany, decided nothing.
func (e *Engine) DecideSettle(d *Decision, t time.Time, resource, domain string, copies, minCopies int) (string, error) {
	tn := t.UnixNano()
	if err := checkCopies(copies, minCopies); err != nil {
		return "", err
	}
	r, err := e.lookup(resource, config.KindTiers)
	if err != nil {
		return "", err
	}
	if err := e.room(r, domain); err != nil {
		return "", err
	}
	if err := e.book.tickets.room(tn); err != nil {
		return "", err
	}
	tk := &ticket{resource: resource, domain: domain}
	switch k := kindOrNil(r).(type) {
	case *tiersRes:
		var rec tierRecord
		k.decideRec(d, domain, t.UnixMilli(), int64(copies), int64(minCopies), &rec)
		tk.kind, tk.at = config.KindTiers, t.UnixMilli()
		n := 0
		for i, v := range rec.taken {
			if v > 0 {
				n = i + 1
			}
		}
		tk.taken = append([]int64(nil), rec.taken[:n]...)
	case *gcraRes:
		if err := k.decide(d, domain, tn, int64(copies), int64(minCopies)); err != nil {
			return "", err
		}
		tk.kind, tk.at = config.KindGCRA, tn
	case nil:
		e.stats.LenientUnrecorded.Add(1)
		*d = lenientDecision(config.KindTiers, copies)
	default:
		return "", wrongKind(r, "request")
	}
	tk.estimate = int64(d.Granted)
	if r == nil || r.unlimited {
		d.Lenient, tk.kind = true, ""
	}
	if r != nil && r.shadow && d.Granted == 0 && copies > 0 {
		d.Granted, d.Shadow = copies, true
		return "", nil // granted by shadow mode alone: nothing was counted to settle
	}
	if d.Granted == 0 {
		return "", nil
	}
	tk.domain = strings.Clone(domain) // it may alias a request buffer
	if r != nil {
		tk.resource = r.name // so may resource: r's name is the engine's own
	} else {
		tk.resource = strings.Clone(resource)
	}
	return e.book.tickets.add(tk, tn), nil
}

// kindOrNil returns r's kind state, nil for no resource.
func kindOrNil(r *resource) kindRes {
	if r == nil {
		return nil
	}
	return r.k
}

// Settlement is what Settle did: Charged is the real cost less the
// estimate (negative: given back), 0 when nothing was charged (a lenient
// grant, a resource a reload removed or changed, a key reset since the
// grant), Remaining what a request could get now.
type Settlement struct {
	Charged   int
	Remaining int
}

// Settle charges ticket id's real cost, copies, in place of its estimate,
// at t (see the top of this file). An unknown or expired ticket is
// ErrUnknownTicket, a settled one ErrAlreadySettled.
func (e *Engine) Settle(t time.Time, id string, copies int) (Settlement, error) {
	if err := checkCopies(copies, 0); err != nil {
		return Settlement{}, err
	}
	tk, err := e.book.tickets.take(id, t.UnixNano())
	if err != nil {
		return Settlement{}, err
	}
	delta := int64(copies) - tk.estimate
	out := Settlement{Charged: int(delta), Remaining: MaxCopies}
	r, ok := e.known(tk.resource)
	if !ok || r.unlimited || r.kind != tk.kind || tk.forgiven {
		// A lenient grant, a resource a reload removed or changed, or a
		// key reset since the grant: nothing to charge.
		out.Charged = 0
		return out, nil
	}
	var d Decision
	switch k := r.k.(type) {
	case *tiersRes:
		k.settle(tk, t.UnixMilli(), delta)
		k.decide(&d, tk.domain, t.UnixMilli(), 0, 0)
	case *gcraRes:
		k.settle(tk, t.UnixNano(), delta)
		_ = k.decide(&d, tk.domain, t.UnixNano(), 0, 0)
	}
	out.Remaining = d.Remaining
	return out, nil
}

// settle charges delta more hits (less, when negative) than ticket tk's
// estimate at t (ms).
func (tr *tiersRes) settle(tk *ticket, t, delta int64) {
	if delta == 0 {
		return
	}
	p := tr.params(tk.domain)
	tr.ring.mu.Lock() // before the key's shard, as in decide
	defer tr.ring.mu.Unlock()
	tr.ring.advance(t)
	if delta > 0 {
		tr.charge(tk, p, t, delta)
		return
	}
	back := make([]int64, len(tk.taken))
	left := -delta
	for i := len(back) - 1; i >= 0 && left > 0; i-- {
		back[i] = min(tk.taken[i], left)
		left -= back[i]
	}
	total := -delta - left
	sh, h := tr.keys.lock(tk.domain)
	defer sh.mu.Unlock()
	st, ok := sh.get(tk.domain, h)
	if !ok {
		return // the key is gone: its hits have left every window
	}
	st.fit(p)
	st.settle(p, t)
	// Peers are told what was given back here, never more: hits that left
	// their window, or that a reset forgot, are not taken back anywhere.
	for i, n := range back {
		back[i] = 0
		if i >= len(st.inst) {
			break // a reload shortened the tier list: those hits are gone
		}
		if in := &st.inst[i]; in.on && in.entered <= tk.at {
			back[i] = in.hits.remove(tk.at, tk.at+1, n)
		}
	}
	total = st.recent.remove(tk.at, tk.at+1, total)
	tr.ring.take(tk.at, total)
	st.retryM = 0
	if tr.rec.on() && total > 0 {
		tr.rec.tierRefund(tk.domain, tk.at, total, back)
	}
}

// charge adds n hits past the limit at t (ms) to the key of ticket tk:
// in the last second, and in every tier the key could take hits in now
// (the current one, tier 1 when none is, and each above it that a request
// could climb into), starting an instance where there is none, so that
// the overdraft cannot be escaped by bursting into a higher tier. The
// caller holds the ring's lock.
func (tr *tiersRes) charge(tk *ticket, p *tiersParams, t, n int64) {
	sh, st := tr.keyOrNew(tk.domain, p, t)
	defer sh.mu.Unlock()
	st.settle(p, t)
	var taken [maxTake]int64
	var entered uint64
	for j := max(st.current(p, t), 1); j <= len(p.tiers); j++ {
		in, tp := &st.inst[j-1], &p.tiers[j-1]
		switch phaseAt(tp, in, t) {
		case phaseCooldown:
			if tp.skippable {
				continue
			}
			j = len(p.tiers) // a request climbs no further
			continue
		case phaseInactive:
			in.on, in.entered = true, t
			in.hits.reset()
			if j <= 64 {
				entered |= 1 << uint(j-1)
			}
		}
		in.hits.push(t, n)
		if j <= maxTake {
			taken[j-1] = n
		}
		st.resetAt = max(st.resetAt, in.entered+tp.active+tp.cooldown)
	}
	st.recent.push(t, n)
	st.resetAt = max(st.resetAt, t+second)
	st.retryM = 0
	tr.ring.add(t, n)
	if tr.rec.on() {
		tr.rec.tierHits(tk.domain, t, n, taken[:min(len(p.tiers), maxTake)], entered)
	}
}

// applyRefund takes n of a peer's hits of slot back, made in the bucket
// [at, at+width) (ms), where this node still counts them (a settle that
// cost less than its estimate).
func (tr *tiersRes) applyRefund(domain string, slot int, at, width, n, now int64) {
	p := tr.params(domain)
	tr.ring.mu.Lock()
	defer tr.ring.mu.Unlock()
	sh, h := tr.keys.lock(domain)
	defer sh.mu.Unlock()
	st, ok := sh.get(domain, h)
	if !ok {
		return
	}
	st.fit(p)
	st.settle(p, now)
	switch {
	case slot == SlotTotal:
		gone := st.recent.remove(at, at+width, n)
		tr.ring.advance(now)
		for ms := at + width - 1; ms >= at && gone > 0; ms-- {
			g := min(gone, tr.ring.at(ms))
			tr.ring.take(ms, g)
			gone -= g
		}
	case slot <= len(st.inst):
		st.inst[slot-1].hits.remove(at, at+width, n)
	}
	st.retryM = 0
}

// settle charges delta more tokens (fewer, when negative) than ticket tk's
// estimate at t (ns): a refund, or a spend past the burst.
func (gr *gcraRes) settle(tk *ticket, t, delta int64) {
	switch {
	case delta < 0:
		gr.refund(tk.domain, t, -delta)
	case delta > 0:
		gr.charge(tk.domain, t, delta)
	}
}

// charge spends n tokens of domain's bucket at t (ns) whatever it holds:
// its TAT moves on by n emission intervals from max(TAT, t).
func (gr *gcraRes) charge(domain string, t, n int64) {
	p := gr.params(domain)
	sh, h := gr.keys.lock(domain)
	defer sh.mu.Unlock()
	ptat, tat := gr.bucket(sh, domain, h)
	next := sat.Add64(max(tat, t), sat.Mul64(n, p.ei))
	if ptat != nil {
		*ptat = next
	} else {
		gr.keepOrSpill(sh, domain, h, next, t)
	}
	if gr.rec.on() {
		gr.rec.spend(domain, t/1e6, n)
		if tat < t && gr.idle != nil {
			gr.noteIdle(domain, tat, t)
		}
	}
}
