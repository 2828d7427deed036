package netguard

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
			l.open.Add(-1)
			l.refused.Add(1)
			c.Close()
			l.note("connection over the cap closed", "max_connections", l.max)
			// Refusals are paced (refusePace): a flood of connections
			// over the cap would otherwise keep this loop accepting and
			// closing as fast as the processor allows, and every request
			// of every listener would wait behind it. Connections dialled
			// meanwhile wait in the kernel's accept queue; past it, the
			// kernel refuses them without the agent's help.
			if !l.sleep(refusePace, l.closed) {
				return nil, net.ErrClosed
			}
			continue
		}
		src, ok := l.takeSource(c)
		if !ok {
			l.open.Add(-1)
			l.refused.Add(1)
			c.Close()
			l.note("connection over one client's share of the cap closed", "max_per_client", l.perSource)
			if !l.sleep(refusePace, l.closed) {
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

// HTTP2 marks l's connections from now on as HTTP/2 ones (gRPC), served
// by a server that reads many calls from one connection in one loop, and
// returns l. Two bounds then hold on each connection:
//
//   - its reads are of at most 1 KiB, each followed by a yield of the
//     processor (runtime.Gosched): a client that floods its connection
//     cannot keep the reading goroutine running for a whole time slice
//     (10 ms) while the requests of other listeners wait. It costs one
//     scheduler call per read (of up to 5 calls), not per call;
//   - once the server has refused more than MaxRefusedStreams of its
//     streams (RST_STREAM REFUSED_STREAM: the client opened more than the
//     server's SETTINGS_MAX_CONCURRENT_STREAMS allows, which a client
//     that heeds the settings never does), the connection is closed: a
//     flood of streams past the limit costs the server a bounded amount
//     of work per connection. Each such close is counted with the
//     refused connections and logged.
func (l *Listener) HTTP2() *Listener {
	l.http2 = true
	return l
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

// yieldRead is the most an h2Conn reads at once: the work one read gives
// its reader between two yields (about 50 header-only HTTP/2 frames of a
// flood, each of which may start a stream's goroutine, or 5 calls of
// Envoy's). 4 KiB left the pinned probe's p99 at 4.2-4.4× idle under the
// streams flood and 1 KiB at 1.9-2.8× (go run ./bench/abuse -attack
// streams); bench/rls's req/s against its floor stayed within its noise.
const yieldRead = 1 << 10

// MaxRefusedStreams is how many streams the server may refuse on one
// HTTP/2 connection before the connection is closed (HTTP2). A client that
// heeds the server's SETTINGS_MAX_CONCURRENT_STREAMS is refused none; one
// that opens streams before the server's settings reach it can be refused
// those over the limit in its first round trip.
const MaxRefusedStreams = 100

// abusePause is how long a listener waits before its next accept after
// closing an HTTP/2 connection for refused streams (MaxRefusedStreams).
// Without it the client reconnects and floods again at once: 200,000
// header-only streams, a connection closed after each 1,000 refused, moved
// the pinned probe's p99 8× (go run ./bench/abuse -attack streams). Other
// clients' connections wait in the kernel's accept queue meanwhile; those
// already open are served.
const abusePause = 10 * time.Millisecond

// h2Conn is a conn of an HTTP2 listener.
type h2Conn struct {
	conn
	top  net.Conn   // what the server reads and writes: &conn, or TLS over it
	mu   sync.Mutex // the server writes from one goroutine; to be safe
	scan frameScan
}

// Close closes the connection (sending TLS's close_notify first, when
// served over TLS) and frees its place under the cap.
func (c *h2Conn) Close() error { return c.top.Close() }

func (c *h2Conn) Read(p []byte) (int, error) {
	if len(p) > yieldRead {
		p = p[:yieldRead]
	}
	n, err := c.top.Read(p)
	runtime.Gosched()
	return n, err
}

// Write writes the server's frames, counting its refusals of streams; past
// MaxRefusedStreams it closes the connection.
func (c *h2Conn) Write(p []byte) (int, error) {
	n, err := c.top.Write(p) // conn.Write marks c answered
	c.mu.Lock()
	c.scan.scan(p[:n])
	over := c.scan.refused > MaxRefusedStreams
	c.mu.Unlock()
	if over && err == nil {
		c.l.refused.Add(1)
		c.l.abused.Store(true)
		c.l.note("HTTP/2 connection closed: the client kept opening streams past the limit", "refused_streams", MaxRefusedStreams)
		c.Conn.Close()
		return n, net.ErrClosed
	}
	return n, err
}

// frameScan follows the HTTP/2 frames a server writes (a stream of
// frames: the server sends no preface) and counts its RST_STREAM frames
// with the code REFUSED_STREAM.
type frameScan struct {
	hdr     [9]byte // the frame header being read
	nh      int     // bytes of it read
	left    int     // payload bytes of the current frame still to come
	rst     bool    // the current frame is a RST_STREAM
	code    [4]byte // its error code
	nc      int     // bytes of it read
	refused int
}

// HTTP/2 (RFC 9113): the RST_STREAM frame type and the REFUSED_STREAM code.
const (
	frameRSTStream = 0x3
	codeRefused    = 0x7
)

func (f *frameScan) scan(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			k := min(f.left, len(p))
			if f.rst && f.nc < 4 {
				k = min(k, 4-f.nc)
				copy(f.code[f.nc:], p[:k])
				f.nc += k
				if f.nc == 4 && binary.BigEndian.Uint32(f.code[:]) == codeRefused {
					f.refused++
				}
			}
			p, f.left = p[k:], f.left-k
			continue
		}
		k := min(9-f.nh, len(p))
		copy(f.hdr[f.nh:], p[:k])
		f.nh += k
		p = p[k:]
		if f.nh == 9 {
			f.nh, f.nc = 0, 0
			f.left = int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
			f.rst = f.hdr[3] == frameRSTStream
		}
	}
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

// Set is an agent's guarded listeners, a prometheus.Collector of their
// figures:
//
//   - obol_listener_connections{listener}: connections open now;
//   - obol_listener_max_connections{listener}: the cap;
//   - obol_listener_refused_connections_total{listener}: connections
//     closed at once for being over the cap;
//   - obol_listener_accept_errors_total{listener}: temporary Accept errors
//     waited out (EMFILE and the like).
//
// Its methods are safe for concurrent use.
type Set struct {
	log *slog.Logger
	// Hook, when set, wraps each listener before it is guarded: a seam
	// for tests that make Accept fail.
	Hook func(name string, ln net.Listener) net.Listener

	mu sync.Mutex
	ls []*Listener
}

// NewSet returns an empty set logging to log (nil: slog.Default()).
func NewSet(log *slog.Logger) *Set {
	if log == nil {
		log = slog.Default()
	}
	return &Set{log: log}
}

// Guard returns ln guarded with a cap of max open connections (0 or less:
// DefaultMaxConns()), of which one client off loopback may hold a quarter
// on a TCP listener (PerSourceOf), named name in the logs and metrics
// (socket, http, status, rls_grpc…). A nil set guards with no metrics.
func (s *Set) Guard(name string, ln net.Listener, max int) *Listener {
	if max <= 0 {
		max = DefaultMaxConnsOf(ln)
	}
	log := slog.Default()
	if s != nil {
		log = s.log
		if s.Hook != nil {
			ln = s.Hook(name, ln)
		}
	}
	l := &Listener{Listener: ln, name: name, max: int64(max), log: log, now: time.Now,
		sleep: sleepOrDone, closed: make(chan struct{})}
	if _, ok := ln.Addr().(*net.TCPAddr); ok {
		l.perSource = PerSourceOf(max)
	}
	if s != nil {
		s.mu.Lock()
		s.ls = append(s.ls, l)
		s.mu.Unlock()
	}
	return l
}

// Listeners returns the set's listeners that are not closed, in the order
// they were guarded; nil for a nil set.
func (s *Set) Listeners() []*Listener {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Listener
	for _, l := range s.ls {
		if !l.Closed() {
			out = append(out, l)
		}
	}
	return out
}

var (
	descOpen    = prometheus.NewDesc("obol_listener_connections", "Connections open now, per listener.", []string{"listener"}, nil)
	descMax     = prometheus.NewDesc("obol_listener_max_connections", "The cap on a listener's open connections.", []string{"listener"}, nil)
	descRefused = prometheus.NewDesc("obol_listener_refused_connections_total", "Connections closed at once for being over the listener's cap.", []string{"listener"}, nil)
	descPaced   = prometheus.NewDesc("obol_listener_paced_accepts_total", "Accepts that waited 1 ms because 64 of the listener's connections were fresh (accepted, their first request not answered yet) or for a fresh connection closed unanswered: a flood of new connections.", []string{"listener"}, nil)
	descErrs    = prometheus.NewDesc("obol_listener_accept_errors_total", "Temporary accept errors (EMFILE, ENFILE, ECONNABORTED…) the listener waited out.", []string{"listener"}, nil)
)

// Describe implements prometheus.Collector.
func (s *Set) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOpen
	ch <- descMax
	ch <- descRefused
	ch <- descPaced
	ch <- descErrs
}

// Collect implements prometheus.Collector. Two listeners of one name (a
// restart of a server) report their sum.
func (s *Set) Collect(ch chan<- prometheus.Metric) {
	type fig struct{ open, max, refused, paced, errs float64 }
	s.mu.Lock()
	figs := map[string]*fig{}
	var names []string
	for _, l := range s.ls {
		f := figs[l.name]
		if f == nil {
			f = &fig{}
			figs[l.name] = f
			names = append(names, l.name)
		}
		f.open += float64(l.Open())
		f.max = float64(l.max)
		f.refused += float64(l.Refused())
		f.paced += float64(l.Paced())
		f.errs += float64(l.AcceptErrors())
	}
	s.mu.Unlock()
	for _, n := range names {
		f := figs[n]
		ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, f.open, n)
		ch <- prometheus.MustNewConstMetric(descMax, prometheus.GaugeValue, f.max, n)
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, f.refused, n)
		ch <- prometheus.MustNewConstMetric(descPaced, prometheus.CounterValue, f.paced, n)
		ch <- prometheus.MustNewConstMetric(descErrs, prometheus.CounterValue, f.errs, n)
	}
}

// PerSourceOf is the share of a listener's cap of limit connections that one
// client may hold: a quarter, at least 1. A client is a remote address off
// loopback (an IPv6 address's /64, which one host commonly holds whole);
// clients on loopback (every process of the host, or of the pod, shares
// 127.0.0.1) are not told apart and share the whole cap.
func PerSourceOf(limit int) int { return max(1, limit/4) }

// PerSource sets the share of the cap one client off loopback may hold
// (0: none), and returns l. Set by Guard for TCP listeners (PerSourceOf).
func (l *Listener) PerSource(n int) *Listener {
	l.perSource = n
	return l
}

// takeSource counts c against its client's share and reports whether the
// share had room; src is invalid when c counts against none (loopback, a
// Unix socket, or no share).
func (l *Listener) takeSource(c net.Conn) (src netip.Addr, ok bool) {
	if l.perSource <= 0 {
		return netip.Addr{}, true
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, true
	}
	src = ap.Addr().Unmap()
	if src.IsLoopback() {
		return netip.Addr{}, true
	}
	if src.Is6() {
		src = netip.PrefixFrom(src, 64).Masked().Addr()
	}
	l.srcMu.Lock()
	defer l.srcMu.Unlock()
	if l.bySource[src] >= l.perSource {
		return netip.Addr{}, false
	}
	if l.bySource == nil {
		l.bySource = map[netip.Addr]int{}
	}
	l.bySource[src]++
	return src, true
}

// dropSource gives back a connection's place in src's share.
func (l *Listener) dropSource(src netip.Addr) {
	if !src.IsValid() {
		return
	}
	l.srcMu.Lock()
	defer l.srcMu.Unlock()
	if l.bySource[src] <= 1 {
		delete(l.bySource, src)
	} else {
		l.bySource[src]--
	}
}
