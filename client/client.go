package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/sock"
)

// Defaults of a Config field left zero.
const (
	// DefaultTimeout bounds one call to the agent, connecting included: a
	// gone or hung agent costs a decision at most about this long.
	DefaultTimeout = 20 * time.Millisecond
	// DefaultDialTimeout bounds connecting to the agent.
	DefaultDialTimeout = 10 * time.Millisecond
	// DefaultTimeoutPause is how long, after a call timed out, decisions are
	// degraded at once without asking the agent.
	DefaultTimeoutPause = 100 * time.Millisecond
	// DefaultSessionTTL is the lease of the client's session; it is renewed
	// every third of it.
	DefaultSessionTTL = 30 * time.Second
	// DefaultRetryBase is the first backoff step of MaxWait.
	DefaultRetryBase = 10 * time.Millisecond
	// DefaultLogInterval is the least time between two log lines about the
	// same condition (degraded decisions, kill-switch grants).
	DefaultLogInterval = time.Minute
	// DefaultMaxConns bounds the connections to the agent.
	DefaultMaxConns = 256
)

// Config configures a Client. The zero value talks to the agent's default
// Unix socket with the defaults above.
type Config struct {
	// Socket is the agent's Unix socket. Socket and URL are exclusive; when
	// both are empty the socket is $OBOL_SOCKET, else the agent's default,
	// $XDG_RUNTIME_DIR/obol.sock, else /run/obol/obol.sock, else /tmp/obol-UID/obol.sock ($TMPDIR is not
	// read). OBOL_SOCKET=off (an agent serving no socket) makes New fail:
	// give URL.
	Socket string
	// URL is the agent's HTTP address, e.g. "http://127.0.0.1:7070" (a
	// path, if any, prefixes every endpoint).
	URL string

	// Timeout bounds one call to the agent, from connecting to reading the
	// reply; past it the decision is degraded. 0 means DefaultTimeout (20
	// ms). Larger survives a slow agent; smaller bounds the cost of a hung
	// one. A context deadline earlier than it wins.
	Timeout time.Duration
	// DialTimeout bounds connecting (within Timeout). 0 means
	// DefaultDialTimeout (10 ms).
	DialTimeout time.Duration
	// TimeoutPause is how long after a call timed out every decision is
	// degraded at once, without asking the agent, so that a hung agent costs
	// one Timeout per pause instead of one per decision. 0 means
	// DefaultTimeoutPause (100 ms); negative means no pause. A refused
	// connection (agent gone) is cheap and never pauses.
	TimeoutPause time.Duration
	// MaxConns bounds the connections to the agent; a call that finds all
	// busy waits for one within its Timeout. 0 means DefaultMaxConns (256).
	MaxConns int

	// SessionTTL is the lease of the session that owns the client's holds
	// (renewed every SessionTTL/3 while the client lives): if the process
	// dies, its copies are released within SessionTTL. 0 means
	// DefaultSessionTTL (30 s); at least 3 ms (the keepalive period is a
	// third, in whole ms).
	SessionTTL time.Duration

	// RetryBase is the first backoff step of MaxWait: retry i sleeps
	// RetryBase·2^i, jittered by ±25 %, and never less than the agent's
	// retry_after. 0 means DefaultRetryBase (10 ms).
	RetryBase time.Duration

	// KillSwitch turns every rejection into a grant marked Killed (the
	// environment variable OBOL_KILL_SWITCH=1 does too; SetKillSwitch
	// changes it later). The agent is still asked, so its counts stay right.
	KillSwitch bool

	// Logger receives at most one line per LogInterval per condition:
	// decisions degraded (with the last cause) and rejections killed, each
	// with the count since the last line. nil means slog.Default().
	Logger *slog.Logger
	// LogInterval: 0 means DefaultLogInterval (1 min).
	LogInterval time.Duration

	// Clock paces retries, keepalives, the timeout pause and log intervals;
	// nil means the wall clock. Tests pass a fake one. Call timeouts are
	// always wall-clock time.
	Clock Clock
	// Rand draws the retry jitter; nil means a generator seeded at random.
	// The client serializes its use.
	Rand *rand.Rand
	// Getenv reads OBOL_KILL_SWITCH, OBOL_SOCKET and XDG_RUNTIME_DIR; nil
	// means os.Getenv.
	Getenv func(string) string
}

// Clock is the time source of the client's waits and background loop.
// Implementations must be safe for concurrent use; Sleep returns ctx.Err()
// when ctx is done first.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
	After(d time.Duration) <-chan time.Time
}

var (
	_ Clock = clock.Real{}
	_ Clock = (*clock.Fake)(nil)
)

// Client asks an obol agent for decisions. Create one with New; the zero
// value is not usable. It is safe for concurrent use. Close it to end its
// session (releasing every copy it holds) and its connections.
type Client struct {
	hc   *fasthttp.HostClient
	urls [numEndpoints]string
	base string

	timeout     time.Duration
	pause       time.Duration
	ttl         time.Duration
	retryBase   time.Duration
	logInterval time.Duration
	clock       Clock
	log         *slog.Logger

	randMu sync.Mutex
	rand   *rand.Rand

	kill        atomic.Bool
	pausedUntil atomic.Int64 // Unix ns; 0 when not paused
	closed      atomic.Bool

	stats struct {
		calls, degraded, killed, retries, errors, sessions atomic.Uint64
	}
	degradedLog, killedLog logLimiter

	sessions sessions
}

// endpoint is a fixed path of the API.
type endpoint uint8

const (
	epRequest endpoint = iota
	epRefund
	epBatch
	epSessions
	epReserve
	epRelease
	epTransfer
	epSeize
	epPace
	epObserve
	epSettle
	epReset
	numEndpoints
)

var endpointPaths = [numEndpoints]string{
	epRequest:  "/v1/request",
	epRefund:   "/v1/refund",
	epBatch:    "/v1/batch",
	epSessions: "/v1/sessions",
	epReserve:  "/v1/reserve",
	epRelease:  "/v1/release",
	epTransfer: "/v1/transfer",
	epSeize:    "/v1/seize",
	epPace:     "/v1/pace",
	epObserve:  "/v1/observe",
	epSettle:   "/v1/settle",
	epReset:    "/v1/reset",
}

// New returns a Client for the agent cfg names. It does not connect: an
// agent that is not there yet makes decisions degraded, not New fail. It
// fails on a bad Config (both Socket and URL, a URL that is not http or
// https, a bad OBOL_KILL_SWITCH).
func New(cfg Config) (*Client, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Client{
		timeout:     orDefault(cfg.Timeout, DefaultTimeout),
		pause:       orDefault(cfg.TimeoutPause, DefaultTimeoutPause),
		ttl:         orDefault(cfg.SessionTTL, DefaultSessionTTL),
		retryBase:   orDefault(cfg.RetryBase, DefaultRetryBase),
		logInterval: orDefault(cfg.LogInterval, DefaultLogInterval),
		clock:       cfg.Clock,
		log:         cfg.Logger,
		rand:        cfg.Rand,
	}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.rand == nil {
		c.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.ttl < 3*time.Millisecond || c.ttl > maxTTL {
		return nil, fmt.Errorf("client: SessionTTL: must be in [3ms, %v], got %v", maxTTL, cfg.SessionTTL)
	}
	kill, err := killSwitchEnv(getenv("OBOL_KILL_SWITCH"))
	if err != nil {
		return nil, err
	}
	c.kill.Store(cfg.KillSwitch || kill)

	dialTimeout := orDefault(cfg.DialTimeout, DefaultDialTimeout)
	maxConns := cfg.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	c.hc = &fasthttp.HostClient{
		NoDefaultUserAgentHeader:  true,
		MaxConns:                  maxConns,
		MaxConnWaitTimeout:        c.timeout,
		MaxIdleConnDuration:       10 * time.Second, // the agent keeps idle connections 2 min
		MaxIdemponentCallAttempts: 2,
		RetryIfErr:                retryIfErr,
		DisablePathNormalizing:    true,
		MaxResponseBodySize:       4 << 20,
	}
	switch {
	case cfg.Socket != "" && cfg.URL != "":
		return nil, fmt.Errorf("client: Socket %q and URL %q: give one", cfg.Socket, cfg.URL)
	case cfg.URL != "":
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("client: URL %q: want http://host:port (or https), with no query", cfg.URL)
		}
		c.hc.Addr = fasthttp.AddMissingPort(u.Host, u.Scheme == "https")
		c.hc.IsTLS = u.Scheme == "https"
		addr := c.hc.Addr
		c.hc.DialTimeout = func(_ string, timeout time.Duration) (net.Conn, error) {
			return dial("tcp", addr, min(timeout, dialTimeout))
		}
		c.base = u.Scheme + "://" + u.Host + trimSlash(u.EscapedPath())
	default:
		path := cfg.Socket
		if path == "" {
			p, err := sock.ClientPath(getenv)
			if err != nil {
				return nil, fmt.Errorf("client: %w", err)
			}
			path = p
		}
		c.hc.Addr = "obol"
		c.hc.DialTimeout = func(_ string, timeout time.Duration) (net.Conn, error) {
			t := min(timeout, dialTimeout)
			if t <= 0 {
				return nil, fasthttp.ErrDialTimeout
			}
			return sock.Dial(path, t)
		}
		c.base = "http://obol"
	}
	for ep, p := range endpointPaths {
		c.urls[ep] = c.base + p
	}
	c.sessions.init()
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func trimSlash(p string) string {
	for len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

// killSwitchEnv reads OBOL_KILL_SWITCH: "" is off; otherwise a boolean as
// strconv.ParseBool reads it ("1", "true", "0", "false", …).
func killSwitchEnv(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("client: OBOL_KILL_SWITCH=%q: want 1 or 0 (or true, false)", v)
	}
	return on, nil
}

func dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 {
		return nil, fasthttp.ErrDialTimeout
	}
	d := net.Dialer{Timeout: timeout}
	return d.Dial(network, addr)
}

// retryIfErr lets fasthttp resend a request once when a kept-alive
// connection turned out to be closed by the agent (it restarted, or closed
// an idle connection) before any reply byte: the request was not served.
// Timeouts are never resent.
func retryIfErr(_ *fasthttp.Request, attempts int, err error) (resetTimeout, retry bool) {
	if attempts > 1 {
		return false, false
	}
	return false, errors.Is(err, io.EOF) || errors.Is(err, fasthttp.ErrConnectionClosed) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// SetKillSwitch turns the kill switch on or off (see Config.KillSwitch).
func (c *Client) SetKillSwitch(on bool) { c.kill.Store(on) }

// KillSwitch reports whether the kill switch is on.
func (c *Client) KillSwitch() bool { return c.kill.Load() }

// Stats are the client's counters since New. Counters only grow.
type Stats struct {
	// Calls counts the decisions asked for: Request, Check, Reserve,
	// Seize, each item of a Batch and each part of a Multi (not retries).
	Calls uint64
	// Degraded counts decisions made without the agent (gone, hung, 5xx):
	// granted min_copies.
	Degraded uint64
	// Killed counts rejections the kill switch turned into grants.
	Killed uint64
	// Retries counts requests sent again by MaxWait.
	Retries uint64
	// Errors counts client errors returned (APIError, bad arguments).
	Errors uint64
	// Sessions counts the sessions opened.
	Sessions uint64
	// PendingReleases is how many releases wait for the agent to come back
	// (a gauge).
	PendingReleases int
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		Calls:           c.stats.calls.Load(),
		Degraded:        c.stats.degraded.Load(),
		Killed:          c.stats.killed.Load(),
		Retries:         c.stats.retries.Load(),
		Errors:          c.stats.errors.Load(),
		Sessions:        c.stats.sessions.Load(),
		PendingReleases: c.sessions.pendingCount(),
	}
}

// agentError is a failure of the agent, not of the caller: unreachable,
// timed out, a 5xx, an unreadable reply. The client fails open on it.
type agentError struct{ err error }

func (e *agentError) Error() string { return "client: agent unavailable: " + e.err.Error() }
func (e *agentError) Unwrap() error { return e.err }

func isAgentError(err error) bool {
	var ae *agentError
	return errors.As(err, &ae)
}

// errPaused is the cause of a decision degraded during a timeout pause.
var errPaused = errors.New("paused after a call timed out")

// call is the pooled state of one HTTP call.
type call struct {
	req  fasthttp.Request
	resp fasthttp.Response
	buf  []byte
	// check: a 429 is a reply (GET /v1/check), not an error.
	check bool
}

var callPool = sync.Pool{New: func() any { return new(call) }}

func getCall() *call { return callPool.Get().(*call) }

func putCall(k *call) {
	k.req.Reset()
	k.resp.Reset()
	if cap(k.buf) > 64<<10 {
		k.buf = nil
	}
	k.buf, k.check = k.buf[:0], false
	callPool.Put(k)
}

// post sends k.buf as a JSON body to ep.
func (c *Client) post(ctx context.Context, k *call, ep endpoint) error {
	k.req.Header.SetMethod(fasthttp.MethodPost)
	k.req.SetRequestURI(c.urls[ep])
	k.req.Header.SetContentTypeBytes(contentTypeJSON)
	k.req.SetBodyRaw(k.buf)
	return c.do(ctx, k)
}

var contentTypeJSON = []byte("application/json")

// do sends k.req. It returns nil for a 2xx reply (and a 429 when k.check),
// whose body is k.resp's; an *APIError for a 4xx; an *agentError when the
// agent is unreachable, times out or answers 5xx; ctx.Err() when ctx ended
// first. It fails at once with an *agentError during a timeout pause.
func (c *Client) do(ctx context.Context, k *call) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if until := c.pausedUntil.Load(); until != 0 {
		if c.clock.Now().UnixNano() < until {
			return &agentError{errPaused}
		}
		c.pausedUntil.CompareAndSwap(until, 0)
	}
	deadline := time.Now().Add(c.timeout)
	ctxDeadline, hasDeadline := ctx.Deadline()
	if hasDeadline && ctxDeadline.Before(deadline) {
		deadline = ctxDeadline
	}
	err := c.hc.DoDeadline(&k.req, &k.resp, deadline)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if hasDeadline && !time.Now().Before(ctxDeadline) {
			return context.DeadlineExceeded
		}
		var ne net.Error
		if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) || (errors.As(err, &ne) && ne.Timeout()) {
			if c.pause > 0 {
				c.pausedUntil.Store(c.clock.Now().Add(c.pause).UnixNano())
			}
		}
		return &agentError{err}
	}
	status := k.resp.StatusCode()
	switch {
	case status >= 200 && status < 300:
		return nil
	case status == fasthttp.StatusTooManyRequests && k.check:
		return nil
	case status >= 400 && status < 500:
		return apiError(status, k.resp.Body())
	}
	return &agentError{fmt.Errorf("status %d: %s", status, snippet(k.resp.Body()))}
}

// apiError reads a 4xx reply.
func apiError(status int, body []byte) error {
	if code, msg, ok := decodeError(body); ok {
		return &APIError{Status: status, Code: code, Message: msg}
	}
	return &APIError{Status: status, Message: snippet(body)}
}

// snippet returns at most 200 bytes of b, for messages.
func snippet(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// Close ends the client's session, which releases every copy its holds
// still have, stops its keepalive and closes its connections. Later calls
// return ErrClosed. Close is idempotent; it returns an error only for a
// client error of the agent's (an agent that is gone lets the session
// expire instead).
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	err := c.sessions.close(c)
	c.hc.CloseIdleConnections()
	return err
}
