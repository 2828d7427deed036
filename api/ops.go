package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
)

// stateReply is the reply of GET /v1/state. Instants are Unix milliseconds.
type stateReply struct {
	Resource string      `json:"resource"`
	Domain   string      `json:"domain"`
	Kind     config.Kind `json:"kind"`
	// Tracked is false when the key has no state (it is fully reset).
	Tracked bool `json:"tracked"`
	// Tiers (kind tiers): every tier with its state, entry and hits.
	Tiers []tierStateReply `json:"tiers,omitempty"`
	// TATMs (kind gcra): the theoretical arrival time; 0 when the bucket is full.
	TATMs *int64 `json:"tat_ms,omitempty"`
	// Holds (kind copies): the domain's holds.
	Holds *int `json:"holds,omitempty"`
	// Pacer (kind pacer): the wait a call asking now would get, the last
	// remaining count seen and the rate paced at; the domain is ignored.
	Pacer *pacerStateReply `json:"pacer,omitempty"`
	// Peek (rate kinds): the reply a peek (copies 0) would get now.
	Peek json.RawMessage `json:"peek,omitempty"`
	// Kind adaptive (the domain plays no part): the window and the calls
	// outstanding now (tickets past the timeout are expired first), the
	// window's bounds, the ticket timeout, and the tickets expired so far
	// (since the window was made: a reload keeps it). Absent when the
	// resource has no window (its namespace ignores its config).
	Window      *int    `json:"window,omitempty"`
	Outstanding *int    `json:"outstanding,omitempty"`
	MinWindow   *int    `json:"min_window,omitempty"`
	MaxWindow   *int    `json:"max_window,omitempty"`
	TimeoutMs   *int64  `json:"timeout_ms,omitempty"`
	Expired     *uint64 `json:"expired,omitempty"`
	// Origins (in a cluster): each node's share of the key, this node's
	// own first; the tiers, holds and peek above are the merged view.
	Origins []Contribution `json:"origins,omitempty"`
}

type tierStateReply struct {
	Tier        int    `json:"tier"`
	Limit       int    `json:"limit"`
	State       string `json:"state"`
	EnteredAtMs int64  `json:"entered_at_ms,omitempty"` // 0 when inactive
	Hits        int    `json:"hits"`
}

// GET /v1/state?resource=R&domain=D → the key's state, without spending.
// The domain may be left out for an adaptive resource, whose window is the
// resource's.
func (s *Server) state(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	b := &c.body
	g := s.gen.Load()
	err := b.readQuery(ctx.QueryArgs(), fResource|fDomain)
	if err == nil {
		err = b.check(fResource)
	}
	if err == nil && !b.has(fDomain) {
		if rc := g.engine.Config().Resources[string(b.resource)]; rc == nil || rc.Kind != config.KindAdaptive {
			err = b.check(fResource | fDomain)
		}
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	ks, err := g.engine.State(s.now(), g.name(b.resource), string(b.domain))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	reply := stateReply{Resource: ks.Resource, Domain: ks.Domain, Kind: ks.Kind, Tracked: ks.Tracked}
	switch ks.Kind {
	case config.KindTiers:
		reply.Tiers = make([]tierStateReply, 0, len(ks.Tiers))
		for _, t := range ks.Tiers {
			tr := tierStateReply{Tier: t.Index, Limit: t.Limit, State: t.State, Hits: t.Hits}
			if !t.EnteredAt.IsZero() {
				tr.EnteredAtMs = t.EnteredAt.UnixMilli()
			}
			reply.Tiers = append(reply.Tiers, tr)
		}
	case config.KindGCRA:
		var tat int64
		if !ks.TAT.IsZero() {
			tat = ks.TAT.UnixMilli()
		}
		reply.TATMs = &tat
	case config.KindCopies:
		holds := ks.Holds
		reply.Holds = &holds
	case config.KindPacer:
		reply.Pacer = pacerState(g.engine, s.now(), ks.Resource)
	case config.KindAdaptive:
		if a := ks.Adaptive; a != nil {
			timeout := a.Timeout.Milliseconds()
			reply.Window, reply.Outstanding, reply.MinWindow, reply.MaxWindow = &a.Window, &a.Outstanding, &a.MinWindow, &a.MaxWindow
			reply.TimeoutMs, reply.Expired = &timeout, &a.Expired
		}
	}
	if ks.Peek != nil {
		reply.Peek = appendDecision(nil, ks.Peek)
	}
	if s.cluster != nil {
		reply.Origins = s.cluster.Contributions(ks.Resource, ks.Domain, s.now())
	}
	s.replyJSON(ctx, reply)
}

// GET /v1/config → {"version": N, "config": <the normalized config>}; the
// version counts the configs put in force since start (1 = the first).
func (s *Server) showConfig(ctx *fasthttp.RequestCtx, _ params) {
	g := s.gen.Load()
	cfg, err := json.Marshal(g.engine.Config())
	if err != nil {
		s.fail(ctx, fmt.Errorf("rendering the config: %w", err))
		return
	}
	out := append([]byte(`{"version":`), strconv.FormatInt(g.version, 10)...)
	out = append(out, `,"config":`...)
	out = append(out, cfg...)
	out = append(out, '}')
	writeJSON(ctx, out)
}

// GET /healthz → 200 {"status": "ok"} while the process serves.
func (s *Server) healthz(ctx *fasthttp.RequestCtx, _ params) {
	writeJSON(ctx, []byte(`{"status":"ok"}`))
}

// GET /readyz → 200 {"status": "ready"} once ready (SetReady), else 503
// not_ready.
func (s *Server) readyz(ctx *fasthttp.RequestCtx, _ params) {
	if !s.Ready() {
		writeError(ctx, fasthttp.StatusServiceUnavailable, codeNotReady, "the agent is starting or stopping")
		return
	}
	writeJSON(ctx, []byte(`{"status":"ready"}`))
}

// replyJSON writes v, rendered by encoding/json, as a 200 reply (for the
// operations endpoints, off the hot path).
func (s *Server) replyJSON(ctx *fasthttp.RequestCtx, v any) {
	out, err := json.Marshal(v)
	if err != nil {
		s.fail(ctx, fmt.Errorf("rendering the reply: %w", err))
		return
	}
	writeJSON(ctx, out)
}

// ReloadResult is what a reload did: the version now in force and what
// changed, resource by resource.
type ReloadResult struct {
	Version     int64    `json:"version"`
	Source      string   `json:"source"`
	Added       []string `json:"added"`
	Removed     []string `json:"removed"`
	Changed     []string `json:"changed"`
	KindChanged []string `json:"kind_changed"`
	Unchanged   int      `json:"unchanged"`
	Released    int      `json:"released"`
}

// errNoReload is a reload of an agent whose config cannot be re-read.
var errNoReload = errors.New("the agent runs on its built-in config (no --config file): there is nothing to re-read")

// Reload re-reads the config (Options.LoadConfig) and puts it in force with
// the counts and holds carried over (local.Engine.Reload). A config that does
// not load or validate is refused, and the config in force stays: the error
// is then a *config.Problems (errors.As) or names the file. One reload runs
// at a time. SIGHUP and POST /v1/config/reload both call it.
func (s *Server) Reload() (ReloadResult, error) {
	s.reload.Lock()
	defer s.reload.Unlock()
	if s.load == nil {
		s.metrics.reloads.WithLabelValues("refused").Inc()
		return ReloadResult{}, errNoReload
	}
	cfg, source, err := s.load()
	if err != nil {
		s.metrics.reloads.WithLabelValues("refused").Inc()
		s.log.Error("config reload refused; the config in force stays", "source", source, "error", err)
		return ReloadResult{}, err
	}
	n, ch := s.Engine().Reload(cfg)
	s.SetEngine(n)
	g := s.gen.Load()
	res := ReloadResult{
		Version: g.version, Source: source, Added: nonNil(ch.Added), Removed: nonNil(ch.Removed),
		Changed: nonNil(ch.Changed), KindChanged: nonNil(ch.KindChanged), Unchanged: ch.Unchanged, Released: ch.Released,
	}
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.source.Store(&source)
	s.log.Info("config reloaded", "source", source, "version", res.Version, "added", len(res.Added),
		"removed", len(res.Removed), "changed", len(res.Changed)+len(res.KindChanged), "released", res.Released)
	return res, nil
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// POST /v1/config/reload → ReloadResult; a bad file is 400 bad_request with
// every problem in the message (one per line) and in "problems".
func (s *Server) reloadConfig(ctx *fasthttp.RequestCtx, _ params) {
	res, err := s.Reload()
	if err == nil {
		s.replyJSON(ctx, res)
		return
	}
	var probs *config.Problems
	if errors.As(err, &probs) {
		list := make([]string, 0, len(*probs))
		for _, p := range *probs {
			list = append(list, p.String())
		}
		out, _ := json.Marshal(struct {
			Error struct {
				Code     string   `json:"code"`
				Message  string   `json:"message"`
				Problems []string `json:"problems"`
			} `json:"error"`
		}{Error: struct {
			Code     string   `json:"code"`
			Message  string   `json:"message"`
			Problems []string `json:"problems"`
		}{codeBadRequest, "the config was refused and the one in force stays: " + err.Error(), list}})
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		ctx.SetContentType(contentTypeJSON)
		ctx.SetBody(out)
		return
	}
	writeError(ctx, fasthttp.StatusBadRequest, codeBadRequest, "the config was refused and the one in force stays: "+err.Error())
}
