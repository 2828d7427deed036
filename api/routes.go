package api

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire"
)

// handler serves one endpoint. p holds the path parameter of a pattern route.
type handler func(s *Server, ctx *fasthttp.RequestCtx, p params)

// params are the parameters taken from a pattern route's path.
type params struct {
	id []byte // the {id} segment
}

// route is one line of the route table.
type route struct {
	method string
	path   string // exact, or with one {id} segment
	h      handler
}

// routes is the route table: every endpoint the agent serves. Handlers read
// bodies in JSON or MessagePack (by Content-Type, through decodeBody or
// readBody) and reply in the format Accept asks for; serve transcodes the
// replies of handlers that write JSON only (the operations endpoints).
var routes = []route{
	// Rate decisions (rate.go).
	{"POST", "/v1/request", (*Server).request},
	{"POST", "/v1/refund", (*Server).refund},
	{"POST", "/v1/settle", (*Server).settle}, // settle.go: a request's real cost in place of its estimate
	{"GET", "/v1/check", (*Server).check},    // check.go: one decision for an HTTP proxy, with RateLimit fields
	{"POST", "/v1/batch", (*Server).batch},   // batch.go: up to 1000 requests, each decided alone
	{"POST", "/v1/reset", (*Server).reset},   // reset.go: a key forgotten on every node

	// Copy-limited resources (copies.go).
	{"POST", "/v1/sessions", (*Server).openSession},
	{"POST", "/v1/sessions/{id}/keepalive", (*Server).keepAlive},
	{"DELETE", "/v1/sessions/{id}", (*Server).endSession},
	{"POST", "/v1/reserve", (*Server).reserve},
	{"POST", "/v1/release", (*Server).release},
	{"POST", "/v1/transfer", (*Server).transfer},
	{"POST", "/v1/seize", (*Server).seize},

	// Adaptive windows (adaptive.go).
	{"POST", "/v1/admit", (*Server).admit},
	{"POST", "/v1/complete", (*Server).complete},

	// Client pacing (pacer.go).
	{"POST", "/v1/pace", (*Server).pace},
	{"POST", "/v1/observe", (*Server).observe},

	// Simulation (simulate.go).
	{"POST", "/v1/simulate", (*Server).simulate},
	{"POST", "/v1/simulate/cluster", (*Server).simulateCluster},            // simcluster.go: N agents on a virtual clock
	{"POST", "/v1/simulate/cluster/sweep", (*Server).simulateClusterSweep}, // simsweep.go: that cluster at each drift of a list

	// Operations (ops.go).
	{"GET", "/v1/state", (*Server).state},
	{"GET", "/v1/top", (*Server).top}, // top.go: the heaviest domains of the last minute
	{"GET", "/v1/config", (*Server).showConfig},
	{"POST", "/v1/config/reload", (*Server).reloadConfig},
	{"GET", "/metrics", (*Server).metricsPage},
	{"GET", "/v1/peers", (*Server).peers},
	{"GET", "/v1/status", (*Server).agentStatus}, // agentstatus.go: build, uptime, config in force, listeners
	{"GET", "/healthz", (*Server).healthz},
	{"GET", "/readyz", (*Server).readyz},

	// The dashboard (dashboard.go): static files, served without the token.
	{"GET", "/", (*Server).dashboardPage},
	{"GET", "/ui/{id}", (*Server).dashboardFile},
}

// statusRoutes are the routes of the status listener (ListenConfig.Status):
// the probes and the metrics, read-only, served to whoever reaches it.
var statusRoutes = []route{
	{"GET", "/metrics", (*Server).metricsPage},
	{"GET", "/healthz", (*Server).healthz},
	{"GET", "/readyz", (*Server).readyz},
}

// endpoint is one path of the router with the methods it serves.
type endpoint struct {
	path     string
	segments []string // of a pattern path, split at '/'; nil for an exact path
	methods  []string
	handlers []handler
	allow    string // the Allow header: the methods, comma-separated
}

// router dispatches a request by path, then by method.
type router struct {
	exact    map[string]*endpoint
	patterns []*endpoint
}

func newRouter(table []route) *router {
	rt := &router{exact: map[string]*endpoint{}}
	byPath := map[string]*endpoint{}
	for _, r := range table {
		ep := byPath[r.path]
		if ep == nil {
			ep = &endpoint{path: r.path}
			byPath[r.path] = ep
			if strings.Contains(r.path, "{") {
				ep.segments = strings.Split(strings.TrimPrefix(r.path, "/"), "/")
				rt.patterns = append(rt.patterns, ep)
			} else {
				rt.exact[r.path] = ep
			}
		}
		ep.methods = append(ep.methods, r.method)
		ep.handlers = append(ep.handlers, r.h)
		ep.allow = strings.Join(ep.methods, ", ")
	}
	return rt
}

// match reports whether path matches the pattern endpoint, and its {id}.
func (ep *endpoint) match(path []byte) (id []byte, ok bool) {
	rest := path
	for _, seg := range ep.segments {
		if len(rest) == 0 || rest[0] != '/' {
			return nil, false
		}
		rest = rest[1:]
		j := bytes.IndexByte(rest, '/')
		if j < 0 {
			j = len(rest)
		}
		part := rest[:j]
		rest = rest[j:]
		if seg == "{id}" {
			if len(part) == 0 {
				return nil, false
			}
			id = part
		} else if string(part) != seg {
			return nil, false
		}
	}
	return id, len(rest) == 0
}

// serve dispatches ctx. An unknown path is 404 not_found; a known path asked
// with another method is 405 bad_request naming the allowed methods; a body
// that is neither JSON nor MessagePack by its Content-Type is 415
// unsupported_media_type (origin.go).
func (rt *router) serve(s *Server, ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	var p params
	ep := rt.exact[string(path)]
	if ep == nil {
		for _, cand := range rt.patterns {
			if id, ok := cand.match(path); ok {
				ep, p.id = cand, id
				break
			}
		}
	}
	if ep == nil {
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound,
			fmt.Sprintf("no endpoint %s %s", ctx.Method(), wire.Snippet(path)))
		return
	}
	method := ctx.Method()
	for i, m := range ep.methods {
		if string(method) == m {
			if !bodyTypeAllowed(ctx) { // origin.go: JSON or MessagePack only
				return
			}
			ep.handlers[i](s, ctx, p)
			s.transcodeReply(ctx) // a JSON-only handler's reply, when Accept asks for MessagePack
			return
		}
	}
	ctx.Response.Header.Set("Allow", ep.allow)
	writeError(ctx, fasthttp.StatusMethodNotAllowed, codeBadRequest,
		fmt.Sprintf("method %s is not allowed on %s; use %s", wire.Snippet(method), ep.path, ep.allow))
}
