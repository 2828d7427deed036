package api

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/ui"
)

// dashboard.go serves the dashboard (package ui): the page at GET / and its
// files at GET /ui/{name}. They are static files, the same for everyone and
// holding no state, so they are served without the bearer token (a browser
// cannot add a header to a navigation); every API call the page makes
// carries the token the operator typed into it, and is checked as any
// other request.

// dashboardPaths are the paths served without the token: the page and its
// files (auth.go's authExempt covers the exact ones).
func dashboardPath(path []byte) bool {
	return string(path) == "/" || len(path) > len("/ui/") && string(path[:len("/ui/")]) == "/ui/"
}

// securityHeaders are sent with every file of the page: no script, style
// or connection but the agent's own, no framing, no sniffing.
func securityHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// GET / → the dashboard page.
func (s *Server) dashboardPage(ctx *fasthttp.RequestCtx, _ params) {
	securityHeaders(ctx)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(ui.Index())
}

// GET /ui/{name} → one of the page's files; another name is 404 not_found.
func (s *Server) dashboardFile(ctx *fasthttp.RequestCtx, p params) {
	body, ct, ok := ui.Lookup(string(p.id))
	if !ok {
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound,
			fmt.Sprintf("no dashboard file %q", wire.Snippet(p.id)))
		return
	}
	securityHeaders(ctx)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(ct)
	ctx.SetBody(body)
}
