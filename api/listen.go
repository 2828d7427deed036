package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/netguard"
	"github.com/obol-dev/obol/internal/sock"
)

// ListenConfig says where a Server listens. An empty Socket or HTTP means no
// listener of that kind; at least one is needed, so the zero value is
// refused by Listen.
type ListenConfig struct {
	// Socket is the Unix socket path. The socket is created with mode 0660; a
	// socket file left by a dead process is removed first, but one another
	// process answers on, or a file that is not a socket, is refused.
	Socket string
	// HTTP is the TCP address, host:port; port 0 picks a free port. It must
	// be a loopback address unless AllowPublic is set.
	HTTP string
	// AllowPublic lets HTTP be any address (the agent's --http-public).
	AllowPublic bool
	// Status is the TCP address, host:port, of the status listener: it
	// serves GET /healthz, /readyz and /metrics and nothing else, never
	// asks for the bearer token, and may be any address (kubelet probes
	// and Prometheus scrapes reach a pod on its own IP, not on loopback).
	// Port 0 picks a free port; "" means none. It does not count as one of
	// the listeners Listen needs (Socket or HTTP).
	Status string
	// DrainTimeout bounds how long Serve waits, once its context is done,
	// for the requests in flight to finish; 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Limits bound each listener (the socket, HTTP and status ones, each
	// on its own): its open connections (one over the cap is closed at
	// once) and the server's read, write and idle timeouts; a zero field
	// means netguard's default.
	Limits netguard.Limits
	// Guards, when set, holds the guarded listeners and exports their
	// figures (obol_listener_*); nil guards them all the same, unexported.
	Guards *netguard.Set
	// TLS, when set, serves the HTTP listener over TLS with it (the
	// agent's --tls-cert and --tls-key); the socket and status listeners
	// stay in the clear.
	TLS *tls.Config
}

// DefaultDrainTimeout is the drain timeout of a ListenConfig that sets none.
const DefaultDrainTimeout = 5 * time.Second

// Listeners are the bound listeners of a ListenConfig, made by Listen (the
// zero value holds none). Serve closes them; Close does too, for a caller
// that does not serve them. The methods are safe for concurrent use except
// Close, which must not race with itself.
type Listeners struct {
	socket string
	unix   *sock.Listener
	tcp    net.Listener
	status net.Listener
	drain  time.Duration
	limits netguard.Limits
	guards *netguard.Set
	tls    *tls.Config
}

// Listen binds the listeners of lc: the TCP address first (refused, naming
// it, when it is not loopback and AllowPublic is not set), then the Unix
// socket. On error nothing stays bound.
func Listen(lc ListenConfig) (*Listeners, error) {
	if lc.Socket == "" && lc.HTTP == "" {
		return nil, errors.New("api: nothing to listen on: no socket and no HTTP address")
	}
	l := &Listeners{drain: lc.DrainTimeout, limits: lc.Limits.WithDefaults(), guards: lc.Guards, tls: lc.TLS}
	if l.drain <= 0 {
		l.drain = DefaultDrainTimeout
	}
	if lc.HTTP != "" {
		if !lc.AllowPublic {
			if err := checkLoopback(lc.HTTP); err != nil {
				return nil, err
			}
		}
		ln, err := net.Listen("tcp", lc.HTTP)
		if err != nil {
			return nil, fmt.Errorf("api: listening on http address %q: %w", lc.HTTP, err)
		}
		if a, ok := ln.Addr().(*net.TCPAddr); ok && !lc.AllowPublic && !a.IP.IsLoopback() {
			ln.Close()
			return nil, notLoopback(lc.HTTP)
		}
		l.tcp = ln
	}
	if lc.Status != "" {
		ln, err := net.Listen("tcp", lc.Status)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("api: listening on status address %q: %w", lc.Status, err)
		}
		l.status = ln
	}
	if lc.Socket != "" {
		if err := l.listenUnix(lc.Socket); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

func notLoopback(addr string) error {
	return fmt.Errorf("api: http address %q is not a loopback address; serving on it needs --http-public (AllowPublic)", addr)
}

// checkLoopback refuses an address whose host is not loopback: an empty host
// (every interface), a non-loopback IP, or a name that resolves to one.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("api: http address %q: %w", addr, err)
	}
	if host == "" {
		return notLoopback(addr)
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return notLoopback(addr)
		}
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return fmt.Errorf("api: http address %q: %w", addr, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return notLoopback(addr)
		}
	}
	return nil
}

// socketMode is the Unix socket's permission bits: the agent's user and
// group may connect.
const socketMode = 0o660

// listenUnix binds the socket at path (sock.Listen: a stale socket file is
// removed first, a live one or another file refused). The default path's
// private directory under /tmp is made (or refused) first
// (sock.PrepareDefault).
func (l *Listeners) listenUnix(path string) error {
	if err := sock.PrepareDefault(path); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	ln, err := sock.Listen(path, socketMode)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	l.unix, l.socket = ln, path
	return nil
}

// SocketPath returns the Unix socket's path, or "" when there is none.
func (l *Listeners) SocketPath() string { return l.socket }

// HTTPAddr returns the TCP listener's address (with the port picked when
// port 0 was asked), or "" when there is none.
func (l *Listeners) HTTPAddr() string {
	if l.tcp == nil {
		return ""
	}
	return l.tcp.Addr().String()
}

// StatusAddr returns the status listener's address (with the port picked
// when port 0 was asked), or "" when there is none.
func (l *Listeners) StatusAddr() string {
	if l.status == nil {
		return ""
	}
	return l.status.Addr().String()
}

// guarded returns the API's listeners (not the status listener), each
// guarded (netguard): capped, and riding out temporary accept errors.
func (l *Listeners) guarded() []net.Listener {
	var lns []net.Listener
	if l.tcp != nil {
		g := l.guards.Guard("http", l.tcp, l.limits.MaxConns)
		if l.tls != nil {
			g.TLS(l.tls)
		}
		lns = append(lns, g)
	}
	if l.unix != nil {
		lns = append(lns, l.guards.Guard("socket", l.unix, l.limits.MaxConns))
	}
	return lns
}

// list returns the API's listeners (not the status listener).
func (l *Listeners) list() []net.Listener {
	var lns []net.Listener
	if l.tcp != nil {
		lns = append(lns, l.tcp)
	}
	if l.unix != nil {
		lns = append(lns, l.unix)
	}
	return lns
}

// Close closes the listeners and removes the socket file, if it is still the
// one Listen created. It may be called more than once.
func (l *Listeners) Close() error {
	var first error
	lns := l.list()
	if l.status != nil {
		lns = append(lns, l.status)
	}
	for _, ln := range lns {
		if err := ln.Close(); err != nil && first == nil && !errors.Is(err, net.ErrClosed) {
			first = err
		}
	}
	return first
}

// Serve serves the API on l until ctx is done, then shuts down gracefully:
// it stops accepting, waits up to the drain timeout for the requests in flight,
// closes l (removing the socket file) and returns nil. It returns early with
// an error naming the listener if one fails for good (a temporary accept
// error, such as EMFILE, is waited out: netguard). It marks s ready once
// serving and not ready once stopping. The status listener, if any, serves
// the status routes only (statusHandler). Each listener is capped and its
// server bounded by the ListenConfig's Limits.
func (s *Server) Serve(ctx context.Context, l *Listeners) error {
	addr := l.HTTPAddr()
	if addr == "" {
		addr = "unix:" + l.SocketPath()
	}
	s.address.Store(&addr)
	s.listeners.Store(l)

	hs := s.httpServerWith(l.limits)
	lns := l.guarded()
	errc := make(chan error, len(lns)+1)
	serve := func(srv *fasthttp.Server, ln net.Listener) {
		err := srv.Serve(ln)
		if err != nil {
			err = fmt.Errorf("api: the %s listener (%s) stopped: %w", ln.(*netguard.Listener).Name(), ln.Addr(), err)
		}
		errc <- err
	}
	for _, ln := range lns {
		go serve(hs, ln)
	}
	pending := len(lns)
	var status *fasthttp.Server
	if l.status != nil {
		status = s.httpServerWith(l.limits)
		status.Handler = s.statusHandler
		go serve(status, l.guards.Guard("status", l.status, l.limits.MaxConns))
		pending++
	}
	s.SetReady(true)

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		pending--
		if err == nil {
			err = errors.New("api: a listener stopped")
		}
	}
	s.SetReady(false)

	sctx, cancel := context.WithTimeout(context.Background(), l.drain)
	defer cancel()
	if serr := hs.ShutdownWithContext(sctx); serr != nil {
		s.log.Warn("shutdown did not finish cleanly", "err", serr)
	}
	if status != nil {
		if serr := status.ShutdownWithContext(sctx); serr != nil {
			s.log.Warn("the status listener's shutdown did not finish cleanly", "err", serr)
		}
	}
	// A Serve goroutine that had not yet registered its listener with hs
	// when Shutdown ran stops here, when its listener is closed.
	if cerr := l.Close(); cerr != nil && err == nil {
		err = cerr
	}
	for ; pending > 0; pending-- {
		<-errc
	}
	return err
}
