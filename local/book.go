package local

import (
	"container/heap"
	"fmt"
	"sync"
	"time"
)

// book.go is the book of copy-limited resources: every session (a lease
// with a TTL), the holds sessions own and the transfers staged from them,
// with release, transfer and seize, and the caps that bound them. No clock
// and no I/O: every call takes t (Unix ns) and first ends what expired by
// t. The book is one lock: copy calls are rare next to rate decisions, and
// a session's holds span resources.

type session struct {
	id        string
	ttl       int64
	expires   int64
	holds     map[string]*hold
	transfers map[string]*transfer // staged from this session's holds, not yet seized
}

// addHold adds h to s's holds, making the map with the first.
func (s *session) addHold(h *hold) {
	if s.holds == nil {
		s.holds = make(map[string]*hold)
	}
	s.holds[h.id] = h
}

type hold struct {
	id      string
	res     *copiesRes
	domain  string
	n       int64
	session *session
}

type transfer struct {
	id      string
	res     *copiesRes
	domain  string
	n       int64
	expires int64
	from    *session // released with it unless seized first
}

// Caps bounds what an agent keeps for its clients, so that no client can
// grow the agent's memory without bound: each cap, when full, makes the call
// that would pass it fail with ErrTooMany (the API's 429 too_many), and
// nothing else changes. The zero value of a field means its default.
type Caps struct {
	// Sessions is the most sessions open at once on the agent
	// (DefaultCaps: 100,000, about 27 MB).
	Sessions int
	// Holds is the most holds on the agent (200,000).
	Holds int
	// Transfers is the most transfers staged on the agent (100,000).
	Transfers int
	// HoldsPerSession is the most holds one session has (10,000): it also
	// bounds the work of ending a session, which releases them all under
	// the lock every copy call takes.
	HoldsPerSession int
	// TransfersPerSession is the most transfers staged from one session's
	// holds and not yet seized (10,000).
	TransfersPerSession int
	// Tickets is the most settle tickets the agent holds not settled
	// yet, each until it expires (100,000; settle.go).
	Tickets int
}

// DefaultCaps are the caps of an engine that is given none.
var DefaultCaps = Caps{Sessions: 100_000, Holds: 200_000, Transfers: 100_000, HoldsPerSession: 10_000, TransfersPerSession: 10_000, Tickets: 100_000}

// orDefault returns c with every zero field set to its default.
func (c Caps) orDefault() Caps {
	d := DefaultCaps
	pick := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	return Caps{Sessions: pick(c.Sessions, d.Sessions), Holds: pick(c.Holds, d.Holds), Transfers: pick(c.Transfers, d.Transfers),
		HoldsPerSession: pick(c.HoldsPerSession, d.HoldsPerSession), TransfersPerSession: pick(c.TransfersPerSession, d.TransfersPerSession),
		Tickets: pick(c.Tickets, d.Tickets)}
}

// book holds every session, hold and transfer, and guards (with mu) every
// copiesRes's counts. An engine made by Reload shares its predecessor's book,
// so sessions and holds outlive a reload. Its methods expect mu held.
type book struct {
	mu        sync.Mutex
	caps      Caps
	sessions  map[string]*session
	holds     map[string]*hold
	transfers map[string]*transfer
	deadlines deadlineHeap
	// tickets are the settle tickets (settle.go), under their own lock.
	tickets *tickets
	// pools are the namespaces' pools of keys of limits set by requests
	// (requested.go), under their own lock.
	pools pools
}

func newBook() *book {
	return &book{
		caps:      DefaultCaps,
		sessions:  make(map[string]*session),
		holds:     make(map[string]*hold),
		transfers: make(map[string]*transfer),
		tickets:   newTickets(DefaultCaps.Tickets),
	}
}

// newID returns a fresh session ('s'), hold ('h') or transfer ('x') id: 128
// random bits (ids.go), so that holding an id is holding the thing.
func (b *book) newID(kind byte) string { return newRandomID(kind) }

// expire ends every session and transfer whose deadline is at or before t.
// A lease is alive for [renewed, renewed+ttl).
func (b *book) expire(t int64) {
	for len(b.deadlines) > 0 && b.deadlines[0].at <= t {
		d := heap.Pop(&b.deadlines).(deadline)
		if d.transfer {
			if x, ok := b.transfers[d.id]; ok && x.expires == d.at {
				b.dropTransfer(x)
			}
			continue
		}
		if s, ok := b.sessions[d.id]; ok && s.expires == d.at {
			b.endSession(s)
		}
	}
}

func (b *book) openSession(t, ttl int64) (*session, error) {
	if len(b.sessions) >= b.caps.Sessions {
		return nil, fmt.Errorf("%w: sessions: the agent has %d open, its cap; end unused sessions (DELETE) or let them expire", ErrTooMany, len(b.sessions))
	}
	s := &session{id: b.newID('s'), ttl: ttl, expires: t + ttl} // holds made with the first (most sessions of a flood hold none)
	b.sessions[s.id] = s
	b.pushDeadline(deadline{at: s.expires, id: s.id})
	return s, nil
}

// pushDeadline adds d to the heap. A keepalive pushes a new deadline and
// leaves the old one to be skipped when popped; when stale entries make up
// most of the heap it is rebuilt from the live deadlines, so that a client
// renewing in a loop cannot grow it.
func (b *book) pushDeadline(d deadline) {
	if live := len(b.sessions) + len(b.transfers); len(b.deadlines) > 2*live+1024 {
		fresh := make(deadlineHeap, 0, 2*live+1)
		for _, s := range b.sessions {
			fresh = append(fresh, deadline{at: s.expires, id: s.id})
		}
		for _, x := range b.transfers {
			fresh = append(fresh, deadline{at: x.expires, id: x.id, transfer: true})
		}
		heap.Init(&fresh)
		b.deadlines = fresh
	}
	heap.Push(&b.deadlines, d)
}

// roomForHold reports ErrTooMany when s, or the agent, has all the holds it
// may have.
func (b *book) roomForHold(s *session) error {
	switch {
	case len(s.holds) >= b.caps.HoldsPerSession:
		return fmt.Errorf("%w: holds: session %q has %d, its cap; release holds or use another session", ErrTooMany, s.id, len(s.holds))
	case len(b.holds) >= b.caps.Holds:
		return fmt.Errorf("%w: holds: the agent has %d, its cap", ErrTooMany, len(b.holds))
	}
	return nil
}

func (b *book) session(id string) (*session, error) {
	s, ok := b.sessions[id]
	if !ok {
		return nil, fmt.Errorf("%w: session %q is unknown, ended or expired", ErrUnknownSession, id)
	}
	return s, nil
}

func (b *book) keepAlive(s *session, t int64) {
	s.expires = t + s.ttl
	b.pushDeadline(deadline{at: s.expires, id: s.id})
}

// endSession releases every copy the session holds, and every transfer
// staged from its holds that nobody seized, and forgets it. It returns the
// copies freed.
func (b *book) endSession(s *session) int64 {
	var freed int64
	for _, h := range s.holds {
		freed += h.n
		h.res.add(h.domain, -h.n)
		delete(b.holds, h.id)
	}
	for _, x := range s.transfers {
		freed += x.n
		b.dropTransfer(x)
	}
	delete(b.sessions, s.id)
	return freed
}

// reserve grants the largest n ∈ [m, q] that fits, as a new hold of s; 0 and
// no hold when none fits. With shadow, a rejection is granted q and marked.
func (b *book) reserve(r *copiesRes, domain string, q, m int64, s *session) (n int64, h *hold, shadow bool) {
	n = r.fit(domain, q)
	if q == 0 {
		return 0, nil, false
	}
	if n < m || n == 0 {
		if !r.shadow {
			return 0, nil, false
		}
		n, shadow = q, true
	}
	r.add(domain, n)
	h = &hold{id: b.newID('h'), res: r, domain: domain, n: n, session: s}
	b.holds[h.id] = h
	s.addHold(h)
	return n, h, shadow
}

func (b *book) hold(id string) (*hold, error) {
	h, ok := b.holds[id]
	if !ok {
		return nil, fmt.Errorf("%w: hold %q is unknown, released or its session ended", ErrUnknownHold, id)
	}
	return h, nil
}

// take removes n copies from h (1 ≤ n ≤ h.n), dropping h when it is empty.
func (b *book) take(h *hold, n int64, verb string) error {
	if n < 1 {
		return fmt.Errorf("%w: copies: must be ≥ 1 to %s, got %d", ErrBadRequest, verb, n)
	}
	if n > h.n {
		return fmt.Errorf("%w: cannot %s %d copies: hold %q has %d", ErrOverRelease, verb, n, h.id, h.n)
	}
	h.n -= n
	if h.n == 0 {
		delete(b.holds, h.id)
		delete(h.session.holds, h.id)
	}
	return nil
}

// release returns n copies of h to the pools.
func (b *book) release(h *hold, n int64) error {
	if err := b.take(h, n, "release"); err != nil {
		return err
	}
	h.res.add(h.domain, -n)
	return nil
}

// transfer stages n copies of h for ttl; they stay counted, until seized,
// expired, or released with h's session.
func (b *book) transfer(h *hold, n, t, ttl int64) (*transfer, error) {
	s := h.session
	switch {
	case len(s.transfers) >= b.caps.TransfersPerSession:
		return nil, fmt.Errorf("%w: transfers: session %q has %d staged, its cap; wait for them to be seized or to expire", ErrTooMany, s.id, len(s.transfers))
	case len(b.transfers) >= b.caps.Transfers:
		return nil, fmt.Errorf("%w: transfers: the agent has %d staged, its cap", ErrTooMany, len(b.transfers))
	}
	if err := b.take(h, n, "transfer"); err != nil {
		return nil, err
	}
	x := &transfer{id: b.newID('x'), res: h.res, domain: h.domain, n: n, expires: t + ttl, from: s}
	b.transfers[x.id] = x
	if s.transfers == nil {
		s.transfers = make(map[string]*transfer)
	}
	s.transfers[x.id] = x
	b.pushDeadline(deadline{at: x.expires, id: x.id, transfer: true})
	return x, nil
}

func (b *book) dropTransfer(x *transfer) {
	x.res.add(x.domain, -x.n)
	delete(b.transfers, x.id)
	if x.from != nil {
		delete(x.from.transfers, x.id)
	}
}

// seize moves a staged transfer into a new hold of s.
func (b *book) seize(id string, s *session) (*hold, error) {
	x, ok := b.transfers[id]
	if !ok {
		return nil, fmt.Errorf("%w: transfer %q is unknown, seized, expired, or its session ended", ErrUnknownTransfer, id)
	}
	if err := b.roomForHold(s); err != nil {
		return nil, err
	}
	delete(b.transfers, id)
	if x.from != nil {
		delete(x.from.transfers, id)
	}
	h := &hold{id: b.newID('h'), res: x.res, domain: x.domain, n: x.n, session: s}
	b.holds[h.id] = h
	s.addHold(h)
	return h, nil
}

// deadline is when a session or a transfer ends unless renewed.
type deadline struct {
	at       int64
	id       string
	transfer bool
}

// deadlineHeap is a min-heap of deadlines; stale entries (a session renewed
// since) are skipped when popped.
type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// dropRes releases every hold and staged transfer of r (its resource was
// removed or changed kind) and returns how many copies that freed.
func (b *book) dropRes(r *copiesRes) int64 {
	var freed int64
	for id, h := range b.holds {
		if h.res == r {
			freed += h.n
			r.add(h.domain, -h.n)
			delete(b.holds, id)
			delete(h.session.holds, id)
		}
	}
	for id, x := range b.transfers {
		if x.res == r {
			freed += x.n
			r.add(x.domain, -x.n)
			delete(b.transfers, id)
		}
	}
	return freed
}

// The book's calls on the Engine. Each ends, first, what expired by t.

// SetCaps sets the caps on sessions, holds and transfers (zero fields keep
// their defaults, DefaultCaps). They belong to the book every engine of a
// reload chain shares, so they hold across reloads. Objects already there
// beyond a lowered cap stay; only new ones are refused. Safe for concurrent
// use.
func (e *Engine) SetCaps(c Caps) {
	e.book.mu.Lock()
	e.book.caps = c.orDefault()
	tickets := e.book.caps.Tickets
	e.book.mu.Unlock()
	e.book.tickets.mu.Lock()
	e.book.tickets.max = tickets
	e.book.tickets.mu.Unlock()
}

// OpenSession starts a session (a lease) of the given ttl and returns its id.
func (e *Engine) OpenSession(t time.Time, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("%w: ttl_ms: must be > 0, got %d", ErrBadRequest, ttl.Milliseconds())
	}
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.openSession(t.UnixNano(), int64(ttl))
	if err != nil {
		return "", err
	}
	return s.id, nil
}

// KeepAlive renews a session for another ttl and returns the ttl.
func (e *Engine) KeepAlive(t time.Time, id string) (time.Duration, error) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.session(id)
	if err != nil {
		return 0, err
	}
	e.book.keepAlive(s, t.UnixNano())
	return time.Duration(s.ttl), nil
}

// EndSession ends a session, releasing every copy it holds; it returns how many.
func (e *Engine) EndSession(t time.Time, id string) (int, error) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.session(id)
	if err != nil {
		return 0, err
	}
	return int(e.book.endSession(s)), nil
}

// Release returns copies copies of a hold; it reports the released and still held.
func (e *Engine) Release(t time.Time, hold string, copies int) (released, held int, err error) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	h, err := e.book.hold(hold)
	if err != nil {
		return 0, 0, err
	}
	if err := e.book.release(h, int64(copies)); err != nil {
		return 0, int(h.n), err
	}
	return copies, int(h.n), nil
}

// HoldResource returns the name of the resource of an open hold; ok is
// false when the hold is unknown, released or its session ended (as of the
// last call that expired sessions). The API labels the metrics of release
// and transfer with it. Safe for concurrent use.
func (e *Engine) HoldResource(hold string) (resource string, ok bool) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	h, found := e.book.holds[hold]
	if !found {
		return "", false
	}
	return h.res.name, true
}

// Transfer moves copies copies of a hold into staging for ttl and returns the
// transfer id; they stay counted until seized or expired.
func (e *Engine) Transfer(t time.Time, hold string, copies int, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("%w: ttl_ms: must be > 0, got %d", ErrBadRequest, ttl.Milliseconds())
	}
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	h, err := e.book.hold(hold)
	if err != nil {
		return "", err
	}
	x, err := e.book.transfer(h, int64(copies), t.UnixNano(), int64(ttl))
	if err != nil {
		return "", err
	}
	return x.id, nil
}

// Seize moves a staged transfer into a new hold of session.
func (e *Engine) Seize(t time.Time, transfer, session string) (Seized, error) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.session(session)
	if err != nil {
		return Seized{}, err
	}
	h, err := e.book.seize(transfer, s)
	if err != nil {
		return Seized{}, err
	}
	out := Seized{Hold: h.id, Resource: h.res.name, Domain: h.domain, Copies: int(h.n)}
	for _, g := range h.res.groupsOf(h.domain) {
		out.Groups = append(out.Groups, g.Name)
	}
	return out, nil
}

// Sessions returns how many sessions are open, holds exist and transfers
// are staged.
func (e *Engine) Sessions() (sessions, holds, transfers int) {
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	return len(e.book.sessions), len(e.book.holds), len(e.book.transfers)
}
