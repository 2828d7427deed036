package netguard

import (
	"net"
	"testing"
	"time"
)

// fromConn is a connection that says it comes from addr.
type fromConn struct {
	net.Conn
	addr net.Addr
}

func (c fromConn) RemoteAddr() net.Addr { return c.addr }

// fakeTCP is a listener on a TCP address whose Accept hands out the
// connections sent to it.
type fakeTCP struct {
	conns chan net.Conn
	done  chan struct{}
}

func (f *fakeTCP) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.done:
		return nil, net.ErrClosed
	}
}
func (f *fakeTCP) Close() error   { close(f.done); return nil }
func (f *fakeTCP) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 8081} }

// TestPerClientShare is the regression test of the TLS review's lockout:
// one client holding silent connections kept a listener at its cap. A
// client off loopback (an IPv6 /64) now holds at most a quarter of it;
// loopback clients share the whole cap; a closed connection gives its
// place back.
func TestPerClientShare(t *testing.T) {
	f := &fakeTCP{conns: make(chan net.Conn, 64), done: make(chan struct{})}
	l := NewSet(nil).Guard("rls_grpc", f, 8)
	l.sleep = func(time.Duration, <-chan struct{}) bool { return true }
	defer l.Close()
	from := func(ip string) net.Conn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return fromConn{Conn: a, addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
	}
	accept := func(c net.Conn) net.Conn {
		t.Helper()
		f.conns <- c
		got, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// 2 of 8 per client: a third from 10.1.1.1 is closed, and the next
	// accept is the following connection's.
	held := []net.Conn{accept(from("10.1.1.1")), accept(from("10.1.1.1"))}
	f.conns <- from("10.1.1.1")
	other := accept(from("10.2.2.2"))
	if other.RemoteAddr().String() != "10.2.2.2:40000" || l.Refused() != 1 {
		t.Fatalf("accepted %s, refused %d: want 10.2.2.2 and one refused", other.RemoteAddr(), l.Refused())
	}
	// An IPv6 client's /64 is one client.
	accept(from("2001:db8::1"))
	accept(from("2001:db8::2"))
	f.conns <- from("2001:db8::3")
	accept(from("127.0.0.1"))
	if l.Refused() != 2 {
		t.Fatalf("refused %d, want 2 (the third of the /64)", l.Refused())
	}
	// Loopback shares the whole cap: 8 in all.
	accept(from("127.0.0.1"))
	accept(from("127.0.0.1"))
	if l.Open() != 8 {
		t.Fatalf("%d open, want 8", l.Open())
	}
	// A closed connection gives its client's place back.
	held[0].Close()
	accept(from("10.1.1.1"))
	if l.Refused() != 2 || l.Open() != 8 {
		t.Errorf("after a close: refused %d, open %d; want 2 and 8", l.Refused(), l.Open())
	}
	if PerSourceOf(256) != 64 || PerSourceOf(2) != 1 {
		t.Errorf("PerSourceOf(256) %d, PerSourceOf(2) %d", PerSourceOf(256), PerSourceOf(2))
	}
}
