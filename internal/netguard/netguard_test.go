package netguard

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/tlsfiles/tlstest"
	"github.com/prometheus/client_golang/prometheus"
)

func TestCapFor(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{0, 16}, {64, 16}, {1024, 128}, {20000, 2500}, {1 << 20, 16384}} {
		if got := capFor(c.nofile); got != c.want {
			t.Errorf("capFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}

// TestDefaultCapPerNetwork: a Unix socket's default cap is the descriptor
// limit's share; a TCP listener's is at most DefaultTCPConns; a cap given
// is kept for both.
func TestDefaultCapPerNetwork(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	unix, err := net.Listen("unix", t.TempDir()+"/s.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	if got, want := NewSet(nil).Guard("t", tcp, 0).Max(), min(DefaultMaxConns(), DefaultTCPConns); got != want {
		t.Errorf("TCP listener's default cap %d, want %d", got, want)
	}
	if got, want := NewSet(nil).Guard("u", unix, 0).Max(), DefaultMaxConns(); got != want {
		t.Errorf("Unix socket's default cap %d, want %d", got, want)
	}
	if got := NewSet(nil).Guard("t", tcp, 1000).Max(); got != 1000 {
		t.Errorf("TCP listener's cap given as 1000: %d", got)
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	l := Limits{ReadTimeout: time.Second}.WithDefaults()
	if l.ReadTimeout != time.Second || l.WriteTimeout != DefaultWriteTimeout || l.IdleTimeout != DefaultIdleTimeout || l.MaxConns != 0 {
		t.Errorf("WithDefaults = %+v", l)
	}
}

func TestTemporary(t *testing.T) {
	op := func(err error) error { return &net.OpError{Op: "accept", Net: "tcp", Err: &osSyscallError{err}} }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{op(syscall.EMFILE), true},
		{op(syscall.ENFILE), true},
		{op(syscall.ECONNABORTED), true},
		{op(syscall.ENOBUFS), true},
		{op(syscall.EBADF), false},
		{op(syscall.EINVAL), false},
		{net.ErrClosed, false},
		{errors.New("other"), false},
	} {
		if got := Temporary(c.err); got != c.want {
			t.Errorf("Temporary(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// osSyscallError wraps an errno as os.SyscallError does.
type osSyscallError struct{ err error }

func (e *osSyscallError) Error() string { return "accept4: " + e.err.Error() }
func (e *osSyscallError) Unwrap() error { return e.err }

// script is a listener whose Accept returns its errors in turn, then
// connections from real, then net.ErrClosed once closed.
type script struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (s *script) Accept() (net.Conn, error) {
	s.mu.Lock()
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	return s.Listener.Accept()
}

func emfile() error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: &osSyscallError{syscall.EMFILE}}
}

// TestAcceptEMFILEDoesNotStopListener: a listener whose Accept fails with
// EMFILE (the process is out of descriptors) waits, with a growing
// backoff, and accepts again once descriptors are free; it logs once.
func TestAcceptEMFILEDoesNotStopListener(t *testing.T) {
	real, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var mu sync.Mutex
	set := NewSet(slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)))
	sc := &script{Listener: real}
	for range 5 {
		sc.errs = append(sc.errs, emfile())
	}
	l := set.Guard("rls_http", sc, 4)
	var waits []time.Duration
	l.sleep = func(d time.Duration, _ <-chan struct{}) bool { waits = append(waits, d); return true }
	defer l.Close()
	go func() {
		c, err := net.Dial("tcp", real.Addr().String())
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept after EMFILE: %v", err)
	}
	c.Close()
	want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	if got := l.AcceptErrors(); got != 5 {
		t.Errorf("AcceptErrors = %d, want 5", got)
	}
	mu.Lock()
	n := strings.Count(logs.String(), "accept error")
	mu.Unlock()
	if n != 1 {
		t.Errorf("%d log lines for 5 errors within 10 s, want 1:\n%s", n, logs.String())
	}
	if got := metric(t, set, "obol_listener_accept_errors_total"); got != 5 {
		t.Errorf("obol_listener_accept_errors_total = %v, want 5", got)
	}
}

// TestAcceptPermanentErrorReturned: an error that is not temporary ends
// Accept (the server on it stops and says why).
func TestAcceptPermanentErrorReturned(t *testing.T) {
	real, _ := net.Listen("tcp", "127.0.0.1:0")
	defer real.Close()
	bad := &net.OpError{Op: "accept", Net: "tcp", Err: &osSyscallError{syscall.EINVAL}}
	l := NewSet(nil).Guard("http", &script{Listener: real, errs: []error{bad}}, 4)
	if _, err := l.Accept(); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("Accept = %v, want EINVAL", err)
	}
}

// TestCloseEndsBackoff: Close wakes an Accept waiting out an error.
func TestCloseEndsBackoff(t *testing.T) {
	real, _ := net.Listen("tcp", "127.0.0.1:0")
	errs := make([]error, 100)
	for i := range errs {
		errs[i] = emfile()
	}
	l := NewSet(nil).Guard("http", &script{Listener: real, errs: errs}, 4)
	entered := make(chan struct{}, 1)
	l.sleep = func(d time.Duration, done <-chan struct{}) bool {
		select {
		case entered <- struct{}{}:
		default:
		}
		return sleepOrDone(time.Hour, done)
	}
	res := make(chan error, 1)
	go func() { _, err := l.Accept(); res <- err }()
	<-entered
	l.Close()
	if err := <-res; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v, want net.ErrClosed", err)
	}
}

// TestConnectionsOverCapClosed: with a cap of 2, a third connection is
// closed at once (its client reads EOF) and counted; once one closes, a
// new one is served.
func TestConnectionsOverCapClosed(t *testing.T) {
	real, _ := net.Listen("tcp", "127.0.0.1:0")
	set := NewSet(nil)
	l := set.Guard("rls_http", real, 2)
	defer l.Close()
	accepted := acceptAll(l)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", real.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := dial(), dial()
	defer a.Close()
	defer b.Close()
	ca, cb := <-accepted, <-accepted
	over := dial()
	defer over.Close()
	if _, err := over.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection over the cap was not closed")
	}
	if l.Refused() != 1 || l.Open() != 2 {
		t.Errorf("refused %d open %d, want 1 and 2", l.Refused(), l.Open())
	}
	ca.Close()
	ca.Close() // twice frees one place
	next := dial()
	defer next.Close()
	cn := <-accepted
	if l.Open() != 2 {
		t.Errorf("open %d, want 2", l.Open())
	}
	if Unwrap(cn).(*net.TCPConn) == nil {
		t.Error("Unwrap did not return the TCP connection")
	}
	cb.Close()
	cn.Close()
	if got := metric(t, set, "obol_listener_refused_connections_total"); got != 1 {
		t.Errorf("obol_listener_refused_connections_total = %v, want 1", got)
	}
}

// TestRefusalsPaced: a flood of connections over the cap is refused at
// most one a refusePace (each refusal waits it before the next Accept):
// the accept loop never spins closing connections while requests wait.
func TestRefusalsPaced(t *testing.T) {
	real, l, waits := waitingListener(t, 1)
	accepted := acceptAll(l)
	held, err := net.Dial("tcp", real.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	defer (<-accepted).Close()
	for range 3 {
		c, err := net.Dial("tcp", real.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection over the cap was not closed")
		}
		c.Close()
	}
	for i := range 3 { // each refusal waits once, after its close
		select {
		case d := <-waits:
			if d != refusePace {
				t.Errorf("wait %d after a refusal: %v, want %v", i, d, refusePace)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("refusal %d was followed by no wait: refusals are not paced", i)
		}
	}
}

// waitingListener guards a loopback TCP listener under a cap of max,
// whose waits are not slept but sent on waits.
func waitingListener(t *testing.T, max int) (real net.Listener, l *Listener, waits chan time.Duration) {
	t.Helper()
	real, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l = NewSet(nil).Guard("http", real, max)
	t.Cleanup(func() { l.Close() })
	waits = make(chan time.Duration, 10)
	l.sleep = func(d time.Duration, done <-chan struct{}) bool {
		waits <- d
		return true
	}
	return real, l, waits
}

// dialAccepted dials real and returns the connection l accepted for it
// (from acceptAll's channel); the client's end is closed with the test.
func dialAccepted(t *testing.T, real net.Listener, accepted <-chan net.Conn) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", real.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return <-accepted
}

// acceptAll accepts l's connections until it is closed, handing each on.
func acceptAll(l *Listener) <-chan net.Conn {
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return accepted
}

// metric returns the value of the series name of set's one listener.
func metric(t *testing.T, set *Set, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(set)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// TestFrameScan: RST_STREAM REFUSED_STREAM frames are counted however the
// server's writes cut its frames; other frames and codes are not.
func TestFrameScan(t *testing.T) {
	frame := func(typ byte, payload ...byte) []byte {
		n := len(payload)
		return append([]byte{byte(n >> 16), byte(n >> 8), byte(n), typ, 0, 0, 0, 0, 1}, payload...)
	}
	var out []byte
	out = append(out, frame(0x4, make([]byte, 12)...)...)       // SETTINGS
	out = append(out, frame(frameRSTStream, 0, 0, 0, 7)...)     // REFUSED_STREAM
	out = append(out, frame(0x0, make([]byte, 300)...)...)      // DATA
	out = append(out, frame(frameRSTStream, 0, 0, 0, 8)...)     // CANCEL
	out = append(out, frame(frameRSTStream, 0, 0, 0, 7)...)     // REFUSED_STREAM
	out = append(out, frame(0x1)...)                            // empty HEADERS
	out = append(out, frame(0x0, 0, 0, 0, 7, 0, 0, 0, 7, 1)...) // DATA that looks like a code
	for _, cut := range []int{1, 2, 3, 5, 9, 13, 64, len(out)} {
		var f frameScan
		for p := out; len(p) > 0; {
			k := min(cut, len(p))
			f.scan(p[:k])
			p = p[k:]
		}
		if f.refused != 2 {
			t.Errorf("writes of %d bytes: %d refused, want 2", cut, f.refused)
		}
	}
}

// TestFreshConnectionsPaced is the regression test of the abuse bench's
// logs attack: about 20,000 connections a second to the socket, each
// sending 14 KB of headers and hanging up, were all accepted and read, and
// a client's decisions on its open connection waited behind them (p99
// 4.5 s). Now a connection whose first request fails, or that closes
// before anything is written to it, makes the listener's next accept wait
// freshPace (at most MaxFresh such waits owed); a connection answered once
// does not.
func TestFreshConnectionsPaced(t *testing.T) {
	real, l, waits := waitingListener(t, 100)
	accepted := acceptAll(l)
	dial := func() net.Conn { return dialAccepted(t, real, accepted) }
	noWait := func(what string) {
		select {
		case d := <-waits:
			t.Fatalf("%s: an accept waited %v", what, d)
		default:
		}
	}
	answered := dial()
	answered.Write([]byte("HTTP/1.1 200 OK\r\n\r\n")) // its first request answered
	answered.Close()
	dial()
	noWait("after an answered connection closed")

	failed := dial()
	FirstRequestFailed(failed) // the error handler, before its reply
	failed.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
	failed.Close()
	hungUp := dial() // this accept pays for the failed one
	if d := <-waits; d != freshPace || l.Paced() != 1 {
		t.Fatalf("after a failed first request: waited %v (paced %d), want %v once", d, l.Paced(), freshPace)
	}
	hungUp.Close() // closed unanswered
	dial()
	if d := <-waits; d != freshPace || l.Paced() != 2 {
		t.Fatalf("after a connection closed unanswered: waited %v (paced %d), want %v", d, l.Paced(), freshPace)
	}
	noWait("the waits owed were paid")
	FirstRequestFailed(answered) // no longer fresh: nothing owed
	dial()
	noWait("a failure reported on an answered connection")
	if l.owed.Load() != 0 {
		t.Errorf("owed %d, want 0", l.owed.Load())
	}
	for range 2 * MaxFresh {
		l.owe()
	}
	if l.owed.Load() != MaxFresh {
		t.Errorf("owed %d after %d failures, want at most %d", l.owed.Load(), 2*MaxFresh, MaxFresh)
	}
}

// TestStreamFloodPausesAccept is the regression test of the abuse bench's
// streams attack: 200,000 header-only streams, a new connection each time
// the agent closed the last after its refusals, moved the pinned probe's
// p99 8×. A connection is now closed past MaxRefusedStreams refusals, and
// the listener's next accept waits abusePause; one that refused fewer
// streams costs the next accept nothing.
func TestStreamFloodPausesAccept(t *testing.T) {
	real, l, waits := waitingListener(t, 100)
	l.HTTP2()
	accepted := acceptAll(l)
	dial := func() net.Conn { return dialAccepted(t, real, accepted) }
	refuse := []byte{0, 0, 4, frameRSTStream, 0, 0, 0, 0, 1, 0, 0, 0, codeRefused}
	polite := dial()
	polite.Write([]byte{0, 0, 0, 0x4, 0, 0, 0, 0, 0}) // its SETTINGS: answered
	for range MaxRefusedStreams {
		if _, err := polite.Write(refuse); err != nil {
			t.Fatalf("refusal within the bound: %v", err)
		}
	}
	dial()
	select {
	case d := <-waits:
		t.Fatalf("an accept waited %v after %d refusals", d, MaxRefusedStreams)
	default:
	}
	if _, err := polite.Write(refuse); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("refusal %d: %v, want the connection closed", MaxRefusedStreams+1, err)
	}
	dial()
	select {
	case d := <-waits:
		if d != abusePause {
			t.Fatalf("after a connection closed for its refusals: waited %v, want %v", d, abusePause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("after a connection closed for its refusals: the next accept did not wait")
	}
	dial()
	select {
	case d := <-waits:
		t.Fatalf("a second accept waited %v: the pause is owed once", d)
	default:
	}
}

// TestSetListeners: a set lists the listeners it guards, in order, until
// each is closed; a nil set lists none.
func TestSetListeners(t *testing.T) {
	set := NewSet(nil)
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	la, lb := set.Guard("http", a, 3), set.Guard("status", b, 0)
	defer la.Close()
	got := set.Listeners()
	if len(got) != 2 || got[0] != la || got[1] != lb || got[0].Max() != 3 || got[1].Max() != DefaultMaxConnsOf(b) {
		t.Fatalf("Listeners() = %v, want http then status", got)
	}
	if lb.Closed() {
		t.Error("Closed before Close")
	}
	lb.Close()
	if !lb.Closed() {
		t.Error("not Closed after Close")
	}
	if got := set.Listeners(); len(got) != 1 || got[0] != la {
		t.Errorf("after closing status: %v, want http alone", got)
	}
	var none *Set
	if got := none.Listeners(); got != nil {
		t.Errorf("nil set: %v", got)
	}
}

// TLS: a guarded listener serves TLS in the connection's own goroutine;
// the cap counts its TCP connections, Unwrap finds the TCP connection
// under the TLS one, and on an HTTP/2 listener the streams the server
// refuses are counted in its plaintext, so a flood over TLS is closed
// past MaxRefusedStreams as one in the clear.
func TestTLS(t *testing.T) {
	files := tlstest.WriteFiles(t, t.TempDir())
	srvCfg := &tls.Config{Certificates: []tls.Certificate{files.Server.Pair(t)}}
	for _, h2 := range []bool{false, true} {
		real, l, _ := waitingListener(t, 100)
		l.TLS(srvCfg)
		if h2 {
			l.HTTP2()
		}
		accepted := acceptAll(l)
		raw, err := net.Dial("tcp", real.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		client := tls.Client(raw, &tls.Config{RootCAs: tlstest.Pool(files.CA), ServerName: "localhost"})
		defer client.Close()
		s := <-accepted
		if _, ok := Unwrap(s).(*net.TCPConn); !ok {
			t.Fatalf("h2 %v: Unwrap gave %T, want the TCP connection", h2, Unwrap(s))
		}
		if l.Open() != 1 {
			t.Fatalf("h2 %v: %d open, want 1", h2, l.Open())
		}
		go client.Write([]byte("hello")) // the handshake runs in the server's read
		buf := make([]byte, 5)
		if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello" {
			t.Fatalf("h2 %v: read %q, %v", h2, buf, err)
		}
		if h2 {
			refuse := []byte{0, 0, 4, frameRSTStream, 0, 0, 0, 0, 1, 0, 0, 0, codeRefused}
			go io.Copy(io.Discard, client)
			for range MaxRefusedStreams {
				if _, err := s.Write(refuse); err != nil {
					t.Fatalf("refusal within the bound over TLS: %v", err)
				}
			}
			if _, err := s.Write(refuse); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("refusal %d over TLS: %v, want the connection closed", MaxRefusedStreams+1, err)
			}
		}
		s.Close()
		if l.Open() != 0 {
			t.Errorf("h2 %v: %d open after close, want 0", h2, l.Open())
		}
	}
}
