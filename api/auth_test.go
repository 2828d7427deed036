package api

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// fakeConn is a connection whose local address is chosen: the listener a
// request came through.
type fakeConn struct {
	net.Conn
	local net.Addr
}

func (c fakeConn) LocalAddr() net.Addr  { return c.local }
func (c fakeConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000} }

// serveVia runs the handler for one request as if it came through a
// listener at local.
func serveVia(s *Server, local net.Addr, method, path, auth string) *fasthttp.Response {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	ctx.Init2(fakeConn{local: local}, nil, false)
	req.CopyTo(&ctx.Request)
	s.Handler(&ctx)
	resp := &fasthttp.Response{}
	ctx.Response.CopyTo(resp)
	return resp
}

// TestPublicListenerNeedsTheToken is the regression test of the hardening
// issue's eighth attack: --http-public exposed every endpoint (reload,
// config, state, session deletion, simulate) with no authentication. With a
// token, every request through a non-loopback listener must carry it;
// loopback and the socket need it only with AuthEverywhere; health checks
// never do.
func TestPublicListenerNeedsTheToken(t *testing.T) {
	h := newHarness(t)
	h.srv.authToken = []byte("s3cret-token")
	public := &net.TCPAddr{IP: net.IPv4(203, 0, 113, 9), Port: 7070}
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}
	socket := &net.UnixAddr{Name: "/run/obol/obol.sock", Net: "unix"}
	for _, tc := range []struct {
		name       string
		local      net.Addr
		path, auth string
		everywhere bool
		want       int
	}{
		{name: "public, no token", local: public, path: "/v1/config", want: 401},
		{name: "public, wrong token", local: public, path: "/v1/config", auth: "Bearer s3cret-tokeN", want: 401},
		{name: "public, not bearer", local: public, path: "/v1/config", auth: "Basic s3cret-token", want: 401},
		{name: "public, token", local: public, path: "/v1/config", auth: "Bearer s3cret-token", want: 200},
		{name: "public, lower-case scheme", local: public, path: "/v1/config", auth: "bearer s3cret-token", want: 200},
		{name: "public, state", local: public, path: "/v1/state?resource=t/gcra&domain=d", want: 401},
		{name: "public, healthz", local: public, path: "/healthz", want: 200},
		{name: "loopback, no token", local: loopback, path: "/v1/config", want: 200},
		{name: "socket, no token", local: socket, path: "/v1/config", want: 200},
		{name: "loopback, everywhere", local: loopback, path: "/v1/config", everywhere: true, want: 401},
		{name: "socket, everywhere", local: socket, path: "/v1/config", everywhere: true, want: 401},
		{name: "socket, everywhere, token", local: socket, path: "/v1/config", auth: "Bearer s3cret-token", everywhere: true, want: 200},
	} {
		h.srv.authEverywhere = tc.everywhere
		r := serveVia(h.srv, tc.local, "GET", tc.path, tc.auth)
		if r.StatusCode() != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, r.StatusCode(), r.Body(), tc.want)
		}
		if tc.want == 401 {
			if code, _ := errorReply(t, r.Body()); code != "unauthorized" || string(r.Header.Peek("WWW-Authenticate")) == "" {
				t.Errorf("%s: code %q, challenge %q", tc.name, code, r.Header.Peek("WWW-Authenticate"))
			}
		}
	}
	// Without a token nothing is checked (the agent refuses a public
	// listener without one).
	h.srv.authToken, h.srv.authEverywhere = nil, false
	if r := serveVia(h.srv, public, "GET", "/v1/config", ""); r.StatusCode() != 200 {
		t.Errorf("no token configured: %d", r.StatusCode())
	}
}
