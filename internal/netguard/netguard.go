package netguard

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Default timeouts of Limits.
const (
	// DefaultReadTimeout bounds reading one request: its headers and its
	// body (HTTP), or a new connection's handshake (gRPC).
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds writing one reply.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout bounds how long a connection with no request in
	// flight stays open.
	DefaultIdleTimeout = 2 * time.Minute
)

// Bounds of DefaultMaxConns.
const (
	// fdShare is the share of the descriptor limit one listener may hold:
	// one eighth, so that the agent's six listeners (socket, HTTP, status,
	// and the rate limit service's socket, gRPC and HTTP), all full, still
	// leave a quarter to gossip, files and clients.
	fdShare = 8
	// minConns and maxConns clamp the default cap.
	minConns = 16
	maxConns = 16384
)

// DefaultMaxConns is the default cap on one listener's open connections:
// an eighth of the process's descriptor limit (RLIMIT_NOFILE's soft limit,
// which Go raises to the hard limit at start), at least 16 and at most
// 16,384; 1,024 when the limit cannot be read. With a limit of 20,000 it
// is 2,500.
func DefaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return capFor(rl.Cur)
}

// DefaultTCPConns is the most connections a TCP listener keeps open at
// once by default (DefaultMaxConnsOf). Any local process, and off loopback
// any host, may connect to one, and each connection a client holds open
// costs the agent a wake-up for every byte it trickles in: 256 slow
// clients on each of two TCP listeners, with the refusals of the rest
// paced, kept the socket's p99 within 2× of idle with the agent on one
// processor (go run ./bench/abuse -attack fds); 1,024 did not (4.4×).
const DefaultTCPConns = 256

// DefaultMaxConnsOf is the default cap of listener ln: DefaultMaxConns for
// a Unix socket (only its owner and group may connect), and at most
// DefaultTCPConns for any other.
func DefaultMaxConnsOf(ln net.Listener) int {
	n := DefaultMaxConns()
	if ln != nil && ln.Addr().Network() != "unix" {
		n = min(n, DefaultTCPConns)
	}
	return n
}

// capFor is DefaultMaxConns for a descriptor limit.
func capFor(nofile uint64) int {
	n := nofile / fdShare
	if n < minConns {
		return minConns
	}
	if n > maxConns {
		return maxConns
	}
	return int(n)
}

// Limits are the bounds of one listener and of the server on it.
type Limits struct {
	// MaxConns is the most connections open at once on each listener; 0
	// means each listener's default (DefaultMaxConnsOf: Unix sockets and
	// TCP listeners differ), which WithDefaults leaves to Set.Guard.
	MaxConns int
	// ReadTimeout, WriteTimeout and IdleTimeout are the server's; 0 means
	// the default of each.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// WithDefaults returns l with each zero timeout set to its default;
// MaxConns stays 0 (each listener's default) when it is.
func (l Limits) WithDefaults() Limits {
	if l.MaxConns < 0 {
		l.MaxConns = 0
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}

// Temporary reports whether an Accept error is one to wait out: the
// process or the system is out of descriptors or buffers for now (EMFILE,
// ENFILE, ENOBUFS, ENOMEM), a connection went away before it was accepted
// (ECONNABORTED, ECONNRESET, EPROTO), a call was interrupted or would
// block (EINTR, EAGAIN), or a timeout.
func Temporary(err error) bool {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
			syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO,
			syscall.EINTR, syscall.EAGAIN:
			return true
		}
		return false
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// Backoff bounds: the first wait after a temporary Accept error, and the
// longest (each one doubles the last).
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// refusePace is the least time between two refusals of one listener: at
// most 1,000 connections a second are accepted only to be closed.
const refusePace = time.Millisecond

// MaxFresh bounds how a listener takes floods of new connections. A
// connection is fresh from its accept until something is written to it
// (its first request answered). An accept waits freshPace when MaxFresh
// connections are fresh, and once for each fresh connection that closed
// unanswered or whose first request could not be read (FirstRequestFailed;
// at most MaxFresh such waits owed at once): a flood of connections that
// hang up mid-request, or that never send one, then costs the agent at
// most 1,000 connections' first reads a second, while a client whose
// connection has been answered is served at once. Seen with about
// 20,000 connections a second to the socket, each sending 14 KB of headers
// and hanging up (go run ./bench/abuse -attack logs): every one was
// accepted and read, and a client's decisions on its open connection
// waited behind them, p99 4.5 s. Stalled connections slow new connections
// to 1,000 a second without stopping them (the read timeout closes them).
const MaxFresh = 64

// freshPace is the wait before each accept while MaxFresh connections are
// fresh.
const freshPace = time.Millisecond

// logEvery is how often one listener logs its refusals and accept errors.
const logEvery = 10 * time.Second

// Listener is a guarded net.Listener (Set.Guard). Its connections are
// wrapped: Unwrap returns the one accepted.
type Listener struct {
	net.Listener
	name string
	max  int64
	log  *slog.Logger
	now  func() time.Time
	// sleep waits d or until done is closed, and reports whether it
	// waited d; a variable for tests.
	sleep func(d time.Duration, done <-chan struct{}) bool

	// perSource is the most connections one client (a remote address off
	// loopback; an IPv6 /64) may hold open (PerSourceOf); 0: no share.
	perSource int
	srcMu     sync.Mutex
	bySource  map[netip.Addr]int

	http2 bool        // its connections are HTTP/2 ones (HTTP2)
	tls   *tls.Config // its connections are served over TLS (TLS)

	open       atomic.Int64
	fresh      atomic.Int64 // connections accepted and not written to yet (MaxFresh)
	owed       atomic.Int64 // waits owed for fresh connections closed unanswered (MaxFresh)
	abused     atomic.Bool  // an HTTP/2 connection was closed for refused streams since the last accept (abusePause)
	refused    atomic.Uint64
	paced      atomic.Uint64
	acceptErrs atomic.Uint64

	closeOnce sync.Once
	closed    chan struct{}

	logMu      sync.Mutex
	lastLog    time.Time
	unlogged   int    // events since lastLog
	unloggedAt string // what the last of them was
}

// Name returns the listener's name, as the metrics label it.
func (l *Listener) Name() string { return l.name }

// Max returns the cap on open connections.
func (l *Listener) Max() int { return int(l.max) }

// Open returns the connections open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Refused returns how many connections were closed at once for being over
// the cap.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// FirstRequestFailed tells c's listener, when c is a fresh connection of a
// guarded listener (nothing written to it yet), that its first request
// could not be read (a server's error handler calls it before it answers):
// the listener's next accept waits (MaxFresh). Other connections are left
// alone.
func FirstRequestFailed(c net.Conn) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	var g *conn
	switch x := c.(type) {
	case *conn:
		g = x
	case *h2Conn:
		g = &x.conn
	default:
		return
	}
	if g.isFresh.Load() {
		g.l.owe()
	}
}

// owe adds one wait to those the next accepts owe, up to MaxFresh.
func (l *Listener) owe() {
	if l.owed.Load() < MaxFresh {
		l.owed.Add(1)
	}
}

// takeOwed takes one owed wait, if any.
func (l *Listener) takeOwed() bool {
	for {
		n := l.owed.Load()
		if n <= 0 {
			return false
		}
		if l.owed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Paced returns how many accepts waited for being made while MaxFresh
// connections were fresh.
func (l *Listener) Paced() uint64 { return l.paced.Load() }

// AcceptErrors returns how many temporary Accept errors were waited out.
func (l *Listener) AcceptErrors() uint64 { return l.acceptErrs.Load() }

// Accept returns the next connection under the cap. A connection over it
// is closed at once and counted; a temporary error (Temporary) is waited
// out with a backoff of 5 ms doubling to 1 s and logged at most every 10
// seconds. Only a permanent error is returned (net.ErrClosed once Close
// was called).
func (l *Listener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return nil, err
			default:
			}
			if !Temporary(err) {
				return nil, err
			}
			l.acceptErrs.Add(1)
			delay = min(max(2*delay, minBackoff), maxBackoff)
			l.note("accept error; waiting before the next accept", "err", err.Error(), "wait", delay.String())
			if !l.sleep(delay, l.closed) {
				return nil, net.ErrClosed
			}
			continue
		}
		delay = 0
		if l.open.Add(1) > l.max {
			if !l.refuse(c, "connection over the cap closed", "max_connections", l.max) {
				return nil, net.ErrClosed
			}
			continue
		}
		src, ok := l.takeSource(c)
		if !ok {
			if !l.refuse(c, "connection over one client's share of the cap closed", "max_per_client", l.perSource) {
				return nil, net.ErrClosed
			}
			continue
		}
		if l.abused.Swap(false) {
			// The last connection closed was one that kept opening
			// streams past the limit: the next accept waits abusePause,
			// so a client that reconnects to go on gets a bounded share
			// of the processor.
			l.paced.Add(1)
			if !l.sleep(abusePause, l.closed) {
				l.open.Add(-1)
				l.dropSource(src)
				c.Close()
				return nil, net.ErrClosed
			}
		}
		if l.fresh.Add(1) > MaxFresh || l.takeOwed() {
			// A flood of new connections (MaxFresh): this accept waits,
			// and those dialled meanwhile wait in the kernel's queue.
			l.paced.Add(1)
			if !l.sleep(freshPace, l.closed) {
				l.fresh.Add(-1)
				l.open.Add(-1)
				l.dropSource(src)
				c.Close()
				return nil, net.ErrClosed
			}
		}
		if l.http2 {
			h := &h2Conn{conn: conn{Conn: c, l: l, src: src}}
			h.isFresh.Store(true)
			h.top = &h.conn
			if l.tls != nil {
				h.top = tls.Server(&h.conn, l.tls)
			}
			return h, nil
		}
		cn := &conn{Conn: c, l: l, src: src}
		cn.isFresh.Store(true)
		if l.tls != nil {
			return tls.Server(cn, l.tls), nil
		}
		return cn, nil
	}
}

// refuse closes c, accepted over the cap or its client's share (its place
// already counted in open), counts and logs it, then waits refusePace; it
// reports false when the listener closed meanwhile. Refusals are paced: a
// flood of connections over the cap would otherwise keep Accept accepting
// and closing as fast as the processor allows, and every request of every
// listener would wait behind it. Connections dialled meanwhile wait in the
// kernel's accept queue; past it, the kernel refuses them without the
// agent's help.
func (l *Listener) refuse(c net.Conn, msg string, args ...any) bool {
	l.open.Add(-1)
	l.refused.Add(1)
	c.Close()
	l.note(msg, args...)
	return l.sleep(refusePace, l.closed)
}

// TLS serves l's connections from now on over TLS with cfg, and returns
// l. The handshake runs in the connection's first read or write, on the
// goroutine that serves it, never in Accept: a client that stalls its
// handshake holds its own connection only, until the server's read
// deadline. The cap, the pacing and, for HTTP/2, the bounds of HTTP2 hold
// as without TLS: the cap counts TCP connections, and the streams refused
// are counted in the plaintext the server writes. Unwrap returns the TCP
// connection under the TLS one.
func (l *Listener) TLS(cfg *tls.Config) *Listener {
	l.tls = cfg
	return l
}

// Close closes the listener; an Accept waiting out an error returns.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Closed reports whether Close was called.
func (l *Listener) Closed() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}

// note logs an event at most every logEvery, with how many were not
// logged since the last line.
func (l *Listener) note(msg string, args ...any) {
	l.logMu.Lock()
	now := l.now()
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < logEvery {
		l.unlogged++
		l.logMu.Unlock()
		return
	}
	skipped := l.unlogged
	l.lastLog, l.unlogged = now, 0
	l.logMu.Unlock()
	l.log.Warn("listener "+l.name+": "+msg, append(args, "listener", l.name, "events_not_logged", skipped)...)
}

// sleepOrDone waits d, or until done is closed.
func sleepOrDone(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// conn is an accepted connection; closing it frees its place under the
// cap (once).
type conn struct {
	net.Conn
	l       *Listener
	src     netip.Addr // the client it counts against (perSource); invalid: none
	done    atomic.Bool
	isFresh atomic.Bool // nothing written to it yet (Listener.fresh)
}

// answered marks c no longer fresh (MaxFresh), once.
func (c *conn) answered() {
	if c.isFresh.Load() && c.isFresh.CompareAndSwap(true, false) {
		c.l.fresh.Add(-1)
	}
}

func (c *conn) Write(p []byte) (int, error) {
	c.answered()
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	if c.done.CompareAndSwap(false, true) {
		if c.isFresh.Load() { // closed unanswered
			c.l.owe()
		}
		c.answered()
		c.l.open.Add(-1)
		c.l.dropSource(c.src)
	}
	return c.Conn.Close()
}

// Unwrap returns the connection under c when c is a guarded one (under
// TLS, when served over TLS), else c.
func Unwrap(c net.Conn) net.Conn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	switch g := c.(type) {
	case *conn:
		return g.Conn
	case *h2Conn:
		return g.Conn
	}
	return c
}
