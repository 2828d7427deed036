package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxTTL is the agent's bound on ttl_ms (a day).
const maxTTL = 24 * time.Hour

// ReserveReply is the agent's reply to a reservation, field by field.
type ReserveReply struct {
	Granted int
	// Hold is the hold's id; "" when rejected.
	Hold        string
	DomainLimit int // effective; NoLimit = none, 0 grants nothing
	GlobalLimit int // NoLimit = none
	DomainHolds int
	GlobalHolds int
	Groups      []GroupHolds
	Shadow      bool
	Lenient     bool
}

// GroupHolds is one domain group's pool as a reservation saw it.
type GroupHolds struct {
	Name  string
	Limit int // NoLimit = none
	Holds int
}

// Hold is copies of a copy-limited resource held by the client's session,
// made by Reserve or Seize. Its methods are safe for concurrent use; they
// serialize on the hold.
//
// A Hold with Granted 0 is a rejection: it holds nothing and its methods do
// nothing. A Degraded or Killed Hold was granted without the agent holding
// anything (the agent was unavailable, or the kill switch granted a
// rejection): Release does nothing and Transfer returns an id that Seize
// turns into another such hold.
type Hold struct {
	// ID is the agent's hold id; "" for a rejection and for a degraded or
	// killed hold.
	ID       string
	Resource string
	Domain   string
	// Granted is how many copies the hold got: 0 is a rejection. A degraded
	// Seize cannot know how many the transfer had: Granted is 0.
	Granted int
	// Groups names the domain groups whose pools the hold draws from.
	Groups   []string
	Degraded bool
	Killed   bool
	Shadow   bool
	// Reply is the agent's reply to Reserve (zero for Seize and for a
	// degraded hold).
	Reply ReserveReply

	c    *Client
	sess *session // nil when the agent holds nothing

	mu   sync.Mutex
	held int
}

// Held returns how many copies the hold still has: Granted minus what was
// released and transferred.
func (h *Hold) Held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// live reports whether the agent holds h's copies for a session still
// alive.
func (h *Hold) live() bool { return h.sess != nil && !h.sess.ended.Load() }

// Release releases every copy the hold still has. It is idempotent and safe
// after Transfer (it releases what is left, which may be nothing) and after
// Close (which released everything). A hold the agent no longer knows (its
// session expired) has nothing left: nil. When the agent is unavailable the
// release is retried in the background until it succeeds or the session
// ends; Release returns nil. Other client errors are returned.
func (h *Hold) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.held
	h.held = 0
	if n == 0 || !h.live() {
		return nil
	}
	_, err := h.c.release(context.Background(), h.ID, n)
	switch {
	case err == nil, errors.Is(err, ErrUnknownHold):
		return nil
	case isAgentError(err):
		h.c.sessions.queue(pendingRelease{hold: h.ID, n: n, sess: h.sess})
		return nil
	}
	return h.c.fail(err)
}

// ReleaseN releases n of the hold's copies (1 ≤ n ≤ Held()). As Release,
// it queues the release for the background when the agent is unavailable.
// Errors: ErrOverRelease for more than the hold has, ErrUnknownHold when
// the agent no longer knows the hold.
func (h *Hold) ReleaseN(ctx context.Context, n int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.checkTake(n, "release"); err != nil {
		return h.c.fail(err)
	}
	if !h.live() {
		h.held -= n
		return nil
	}
	held, err := h.c.release(ctx, h.ID, n)
	switch {
	case err == nil:
		h.held = held
		return nil
	case isAgentError(err):
		h.held -= n
		h.c.sessions.queue(pendingRelease{hold: h.ID, n: n, sess: h.sess})
		return nil
	case errors.Is(err, ErrUnknownHold):
		h.held = 0
	}
	return h.c.fail(err)
}

// checkTake checks that n copies may leave the hold.
func (h *Hold) checkTake(n int, verb string) error {
	if n < 1 {
		return fmt.Errorf("%w: copies: must be ≥ 1 to %s, got %d", ErrBadRequest, verb, n)
	}
	if n > h.held {
		return fmt.Errorf("%w: cannot %s %d copies: hold %q has %d", ErrOverRelease, verb, n, h.ID, h.held)
	}
	return nil
}

// Transfer moves n of the hold's copies into the agent's staging area for
// ttl (0 means the agent's default, 30 s) and returns the transfer id,
// which another client (another process) passes to Seize. The copies stay
// counted; unseized, they are released after ttl.
//
// A degraded or killed hold returns an id ("degraded:N", "killed:N") that
// Seize turns into a hold of the same kind. When the agent is unavailable
// the transfer is degraded too: the copies stay in this hold (released with
// it) and the id is "degraded:N".
func (h *Hold) Transfer(ctx context.Context, n int, ttl time.Duration) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.checkTake(n, "transfer")
	if err == nil && (ttl < 0 || ttl > maxTTL) {
		err = fmt.Errorf("%w: ttl: must be in [0, %v], got %v", ErrBadRequest, maxTTL, ttl)
	}
	if err != nil {
		return "", h.c.fail(err)
	}
	if h.Killed {
		h.held -= n
		return killedPrefix + strconv.Itoa(n), nil
	}
	if !h.live() && h.Degraded {
		h.held -= n
		return degradedPrefix + strconv.Itoa(n), nil
	}
	id, err := h.c.transfer(ctx, h.ID, n, ttl)
	switch {
	case err == nil:
		h.held -= n
		return id, nil
	case isAgentError(err):
		h.c.degrade(err, 1)
		return degradedPrefix + strconv.Itoa(n), nil
	case errors.Is(err, ErrUnknownHold):
		h.held = 0
	}
	return "", h.c.fail(err)
}

// The ids of transfers made without the agent.
const (
	degradedPrefix = "degraded:"
	killedPrefix   = "killed:"
)

// Reserve takes copies of a copy-limited resource for domain: Copies
// (default 1), of which at least MinCopies (default all), held by the
// client's session until released (Hold.Release, or Close). With MaxWait it
// retries a rejection (with backoff: the agent gives no retry_after for
// copies) until granted or the wait is spent.
//
// A rejection is a Hold with Granted 0, not an error. The error is for
// client errors only (ErrWrongKind, ErrUnknownResource, …). When the agent
// is unavailable the Hold is Degraded, with MinCopies granted; with the
// kill switch on, a rejection is a Killed Hold of every copy asked.
func (c *Client) Reserve(ctx context.Context, resource, domain string, opts ...Option) (*Hold, error) {
	o, err := c.begin(resource, domain, opts)
	if err == nil && o.limit.json != "" {
		err = fmt.Errorf("%w: Reserve takes no limit: a limit set by the request is for rate-limited resources (Request, Refund, Reset)", ErrBadRequest)
	}
	if err != nil {
		return nil, c.fail(err)
	}
	h := &Hold{c: c, Resource: resource, Domain: domain}
	_, err = c.retry(ctx, &o, func() (bool, time.Duration, error) {
		err := c.reserveOnce(ctx, resource, domain, &o, h)
		return h.Granted > 0, 0, err
	})
	switch {
	case err == nil:
		if h.Granted == 0 && o.copies > 0 && c.kill.Load() {
			h.Granted, h.held, h.Killed = o.copies, o.copies, true
			c.killed(resource, domain)
		}
		return h, nil
	case isAgentError(err):
		*h = Hold{c: c, Resource: resource, Domain: domain, Granted: o.minCopies, held: o.minCopies, Degraded: true}
		c.degrade(err, 1)
		return h, nil
	}
	return nil, c.fail(err)
}

// reserveOnce sends one /v1/reserve into h, opening a session first if
// need be (and once more if the agent no longer knows the session).
func (c *Client) reserveOnce(ctx context.Context, resource, domain string, o *options, h *Hold) error {
	for attempt := 0; ; attempt++ {
		sess, err := c.session(ctx)
		if err != nil {
			return err
		}
		err = c.reserveIn(ctx, sess, resource, domain, o, h)
		if errors.Is(err, ErrUnknownSession) && attempt == 0 {
			c.sessions.ended(sess)
			continue
		}
		return err
	}
}

func (c *Client) reserveIn(ctx context.Context, sess *session, resource, domain string, o *options, h *Hold) error {
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf, '{')
	k.buf = appendStringField(k.buf, "resource", resource)
	k.buf = appendStringField(k.buf, "domain", domain)
	k.buf = appendIntField(k.buf, "copies", int64(o.copies))
	k.buf = appendIntField(k.buf, "min_copies", int64(o.minCopies))
	k.buf = appendStringField(k.buf, "session", sess.id)
	k.buf = append(k.buf, '}')
	if err := c.post(ctx, k, epReserve); err != nil {
		return err
	}
	if err := decodeReservation(k.resp.Body(), &h.Reply); err != nil {
		return &agentError{err}
	}
	r := &h.Reply
	h.ID, h.Granted, h.held, h.Shadow = r.Hold, r.Granted, r.Granted, r.Shadow
	h.Groups = h.Groups[:0]
	for _, g := range r.Groups {
		h.Groups = append(h.Groups, g.Name)
	}
	if r.Granted > 0 {
		h.sess = sess
	}
	return nil
}

// Seize takes the copies of a transfer (made by Hold.Transfer, here or in
// another process) into a new hold of the client's session. Errors:
// ErrUnknownTransfer when the id is unknown, already seized or expired.
// When the agent is unavailable the Hold is Degraded with Granted 0 (the
// client cannot know how many copies the transfer had); an id of a
// degraded or killed transfer gives a Degraded or Killed hold of its
// copies, without asking the agent.
func (c *Client) Seize(ctx context.Context, id string) (*Hold, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	c.stats.calls.Add(1)
	for _, p := range [...]string{degradedPrefix, killedPrefix} {
		if rest, ok := strings.CutPrefix(id, p); ok {
			n, err := strconv.Atoi(rest)
			if err != nil || n < 1 {
				return nil, c.fail(fmt.Errorf("%w: transfer %q: want %sN with N ≥ 1", ErrUnknownTransfer, id, p))
			}
			return &Hold{c: c, Granted: n, held: n, Degraded: p == degradedPrefix, Killed: p == killedPrefix}, nil
		}
	}
	if id == "" {
		return nil, c.fail(fmt.Errorf("%w: transfer: required, got \"\"", ErrBadRequest))
	}
	var (
		r   seized
		err error
	)
	for attempt := 0; ; attempt++ {
		var sess *session
		if sess, err = c.session(ctx); err != nil {
			break
		}
		r, err = c.seizeIn(ctx, sess, id)
		if errors.Is(err, ErrUnknownSession) && attempt == 0 {
			c.sessions.ended(sess)
			continue
		}
		if err == nil {
			return &Hold{c: c, sess: sess, ID: r.hold, Resource: r.resource, Domain: r.domain,
				Groups: r.groups, Granted: r.copies, held: r.copies}, nil
		}
		break
	}
	if isAgentError(err) {
		c.degrade(err, 1)
		return &Hold{c: c, Degraded: true}, nil
	}
	return nil, c.fail(err)
}

func (c *Client) seizeIn(ctx context.Context, sess *session, id string) (seized, error) {
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf, '{')
	k.buf = appendStringField(k.buf, "transfer", id)
	k.buf = appendStringField(k.buf, "session", sess.id)
	k.buf = append(k.buf, '}')
	if err := c.post(ctx, k, epSeize); err != nil {
		return seized{}, err
	}
	r, err := decodeSeized(k.resp.Body())
	if err != nil {
		return r, &agentError{err}
	}
	return r, nil
}

// release sends /v1/release and returns what the hold still has.
func (c *Client) release(ctx context.Context, hold string, n int) (held int, err error) {
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf, '{')
	k.buf = appendStringField(k.buf, "hold", hold)
	k.buf = appendIntField(k.buf, "copies", int64(n))
	k.buf = append(k.buf, '}')
	if err := c.post(ctx, k, epRelease); err != nil {
		return 0, err
	}
	_, h, err := decodeReleased(k.resp.Body())
	if err != nil {
		return 0, &agentError{err}
	}
	return int(h), nil
}

// transfer sends /v1/transfer and returns the transfer id.
func (c *Client) transfer(ctx context.Context, hold string, n int, ttl time.Duration) (string, error) {
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf, '{')
	k.buf = appendStringField(k.buf, "hold", hold)
	k.buf = appendIntField(k.buf, "copies", int64(n))
	if ttl > 0 {
		k.buf = appendIntField(k.buf, "ttl_ms", ceilMs(int64(ttl)))
	}
	k.buf = append(k.buf, '}')
	if err := c.post(ctx, k, epTransfer); err != nil {
		return "", err
	}
	id, err := decodeTransfer(k.resp.Body())
	if err != nil {
		return "", &agentError{err}
	}
	return id, nil
}
