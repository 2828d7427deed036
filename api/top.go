package api

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/topk"
	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/local"
)

// top.go serves GET /v1/top: who is being limited. Every decision on a
// domain of a configured resource (tiers, gcra: /v1/request, /v1/check and
// each item of /v1/batch; copies: /v1/reserve) is counted, under the
// domain, in one of the resource's two windows: rejected (a rejection, or a
// shadow grant: what the limit would have rejected) or granted (a grant,
// whole or partial, lenient ones included). Peeks are not counted.
// Unconfigured resources have no windows: their names are the client's to
// choose, so they could grow the memory without bound.
//
// A window is a topk.Window of topSlots slots of topSpan (so it covers the
// current 10-second slot and the five before it: between 50 and 60 s, which
// the reply's window_ms gives exactly), each a Space-Saving summary of
// topCapacity domains. A reported count is at most error_bound above the
// true count, and error_bound ≤ total/topCapacity; a domain whose true
// count exceeds total/topCapacity is always ranked.

const (
	topSlots    = 6
	topSpan     = 10 * time.Second
	topCapacity = 256
	// topShards is 1: with 4 shards the parallel record path measured no
	// faster on two cores (the hash costs what the lock contention saves),
	// and one shard keeps the error bound the tightest for the memory.
	topShards = 1
	// topDefaultN and topMaxN bound n, the domains a reply lists.
	topDefaultN = 20
	topMaxN     = 100
)

// topConfig is the shape of every window: at most topCapacity × topSlots
// counters per resource and side, about 190 KiB with 20-byte domains and
// 580 KiB with 256-byte ones (a counter keeps a buffer as long as the
// longest domain it has held).
var topConfig = topk.Config{Capacity: topCapacity, Slots: topSlots, Span: topSpan, Shards: topShards}

// topSet is one resource's two windows. Its methods are safe for
// concurrent use.
type topSet struct {
	kind              config.Kind
	rejected, granted *topk.Window
}

// record counts domain once at now, as a rejection or a grant.
func (t *topSet) record(now time.Time, domain []byte, rejected bool) {
	if rejected {
		t.rejected.Add(now, domain)
	} else {
		t.granted.Add(now, domain)
	}
}

// topSets keeps the windows of the resources in force across engine
// generations: a reload keeps the windows of the resources it keeps (with
// the same kind), drops the others' and makes new ones for new resources.
type topSets struct {
	mu sync.Mutex
	m  map[string]*topSet
}

// hasDomains reports whether decisions of kind k are about domains.
func hasDomains(k config.Kind) bool {
	return k == config.KindTiers || k == config.KindGCRA || k == config.KindCopies
}

// forConfig returns the windows of cfg's resources whose kind has domains,
// made at now (their slots are aligned on it) when they are new.
func (ts *topSets) forConfig(cfg *config.Config, now time.Time) map[string]*topSet {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	next := map[string]*topSet{}
	if cfg != nil {
		for name, rc := range cfg.Resources {
			if !hasDomains(rc.Kind) {
				continue
			}
			if old := ts.m[name]; old != nil && old.kind == rc.Kind {
				next[name] = old
				continue
			}
			rej, err1 := topk.New(topConfig, now)
			gr, err2 := topk.New(topConfig, now)
			if err1 != nil || err2 != nil {
				panic(fmt.Sprintf("api: top window config: %v %v", err1, err2)) // topConfig is a valid constant
			}
			next[name] = &topSet{kind: rc.Kind, rejected: rej, granted: gr}
		}
	}
	ts.m = next
	return next
}

// topReply is the reply of GET /v1/top.
type topReply struct {
	Resource string `json:"resource"`
	By       string `json:"by"`
	// WindowMs is the span the counts cover, ending now: from the start of
	// the oldest slot (or the agent's start, when later) to now.
	WindowMs int64 `json:"window_ms"`
	// Total is the decisions counted in the window (exact).
	Total   uint64      `json:"total"`
	Domains []topDomain `json:"domains"`
}

type topDomain struct {
	Domain string `json:"domain"`
	// Count is an estimate, never below the true count and at most
	// ErrorBound above it.
	Count      uint64 `json:"count"`
	ErrorBound uint64 `json:"error_bound"`
}

// topQuery is a parsed /v1/top query.
type topQuery struct {
	resource []byte
	by       string
	n        int
}

// readTopQuery parses resource (required), by (rejected or granted;
// default rejected) and n (1..topMaxN; default topDefaultN).
func readTopQuery(args *fasthttp.Args) (topQuery, error) {
	q := topQuery{by: "rejected", n: topDefaultN}
	var seen [3]bool
	for k, v := range args.All() {
		i := -1
		switch string(k) {
		case "resource":
			i = 0
		case "by":
			i = 1
		case "n":
			i = 2
		default:
			return q, &fieldError{Field: wire.Snippet(k), Msg: "unknown query parameter; expected one of resource, by, n"}
		}
		if seen[i] {
			return q, &fieldError{Field: string(k), Msg: "given twice"}
		}
		seen[i] = true
		switch i {
		case 0:
			if err := checkName("resource", v); err != nil {
				return q, err
			}
			q.resource = v
		case 1:
			switch string(v) {
			case "rejected", "granted":
				q.by = string(v)
			default:
				return q, &fieldError{Field: "by", Msg: fmt.Sprintf(`must be "rejected" or "granted", got %s`, strconv.Quote(wire.Snippet(v)))}
			}
		case 2:
			n, err := queryInt("n", v, 1, topMaxN)
			if err != nil {
				return q, err
			}
			q.n = int(n)
		}
	}
	if !seen[0] {
		return q, &fieldError{Field: "resource", Msg: "required query parameter is missing"}
	}
	return q, nil
}

// GET /v1/top?resource=R[&by=rejected|granted][&n=N] → the heaviest
// domains of R over the last minute (see the top of this file): 404
// unknown_resource when R has no config, 409 wrong_kind when its decisions
// are not about domains (adaptive), 400 bad_request for a bad by or n.
func (s *Server) top(ctx *fasthttp.RequestCtx, _ params) {
	q, err := readTopQuery(ctx.QueryArgs())
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g := s.gen.Load()
	name := string(q.resource)
	var rc *config.Resource
	if cfg := g.engine.Config(); cfg != nil {
		rc = cfg.Resources[name]
	}
	if rc == nil {
		s.fail(ctx, fmt.Errorf("%w: %q has no config (/v1/top counts configured resources only)", local.ErrUnknownResource, name))
		return
	}
	rm := g.metrics[name]
	if rm == nil || rm.top == nil {
		s.fail(ctx, fmt.Errorf("%w: %q is %s resource: its decisions are not about domains; /v1/top is for tiers, gcra and copies resources",
			local.ErrWrongKind, name, kindWithArticle(rc.Kind)))
		return
	}
	w := rm.top.rejected
	if q.by == "granted" {
		w = rm.top.granted
	}
	now := s.now()
	snap := w.Top(now, q.n)
	reply := topReply{Resource: name, By: q.by, WindowMs: now.Sub(snap.From).Milliseconds(), Total: snap.Total,
		Domains: make([]topDomain, len(snap.Items))}
	for i, it := range snap.Items {
		reply.Domains[i] = topDomain{Domain: it.Key, Count: it.Count, ErrorBound: it.Err}
	}
	s.replyJSON(ctx, reply)
}

// kindWithArticle returns "an adaptive", "a pacer".
func kindWithArticle(k config.Kind) string {
	if k == config.KindAdaptive {
		return "an " + string(k)
	}
	return "a " + string(k)
}
