package api

import (
	"crypto/subtle"
	"net"

	"github.com/valyala/fasthttp"
)

// auth.go is the bearer token. The agent trusts whoever can reach its Unix
// socket (file permissions decide) and its loopback listener (processes on
// the host); a listener on any other address is reachable from the network,
// so every request there must carry `Authorization: Bearer <token>`.
// Options.AuthEverywhere asks for the token on the socket and loopback too.
// Without Options.AuthToken no request is checked (the agent refuses to
// listen publicly without one).
//
// Health checks (GET /healthz, GET /readyz) are exempt: kubelet and load
// balancers probe them without credentials, and they reveal nothing.

// authExempt are the paths served without the token.
var authExempt = map[string]bool{"/healthz": true, "/readyz": true}

// needsAuth reports whether ctx's request must carry the token: a token is
// set, the path is not exempt, and the request came through a public
// listener (or AuthEverywhere).
func (s *Server) needsAuth(ctx *fasthttp.RequestCtx) bool {
	if len(s.authToken) == 0 || authExempt[string(ctx.Path())] || dashboardPath(ctx.Path()) && ctx.IsGet() {
		return false
	}
	if s.authEverywhere {
		return true
	}
	return publicAddr(ctx.LocalAddr())
}

// publicAddr reports whether a listener's address is reachable from other
// hosts: a TCP address that is not loopback.
func publicAddr(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && !t.IP.IsLoopback()
}

// authorized reports whether ctx carries the bearer token (compared in
// constant time).
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !equalFoldASCII(h[:len(prefix)], prefix) {
		return false
	}
	return subtle.ConstantTimeCompare(h[len(prefix):], s.authToken) == 1
}

func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// refuseUnauthorized answers 401 unauthorized, with the challenge.
func refuseUnauthorized(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="obol"`)
	writeError(ctx, fasthttp.StatusUnauthorized, codeUnauthorized,
		"this listener requires the header Authorization: Bearer <token> (the agent's --auth-token-file)")
}
