package api

import (
	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/sim"
)

// simtrace.go is the trace of POST /v1/simulate?trace=true: after each
// simulated request, the key's state as GET /v1/state would show it at that
// virtual instant, so that a plot can show each tier's window fill (and a
// gcra bucket's level) over time, not only the tier a decision was made in.
// It is opt-in: without the parameter the reply is unchanged.

// traceParam reads the query of a simulation: "trace=true" asks for the
// trace; "trace=false" or no query does not. Any other parameter or value
// is 400 bad_request naming it.
func traceParam(ctx *fasthttp.RequestCtx) (bool, error) {
	var trace bool
	var err error
	seen := false
	ctx.QueryArgs().VisitAll(func(k, v []byte) {
		if err != nil {
			return
		}
		switch {
		case string(k) != "trace":
			err = &fieldError{Field: wire.Snippet(k), Msg: "unknown query parameter; expected trace"}
		case seen:
			err = &fieldError{Field: "trace", Msg: "given twice"}
		case string(v) == "true":
			trace = true
		case string(v) == "false":
		default:
			err = &fieldError{Field: "trace", Msg: "must be true or false, got " + quoteSnippet(v)}
		}
		seen = true
	})
	if err != nil {
		return false, err
	}
	return trace, nil
}

func quoteSnippet(b []byte) string { return `"` + wire.Snippet(b) + `"` }

// traceCost is the factor the trace multiplies a simulation's work by: the
// state read after each request walks the tiers again.
func traceCost(trace bool) int {
	if trace {
		return 2
	}
	return 1
}

// writeTrace appends trace item i: the state of the request's key at its
// instant, after request i (o, its outcome). For tiers, {"tiers": [{"state", "hits"}, ...]} with each
// tier's state and its hits within its window; for gcra, {"tat_ms": N},
// the bucket's theoretical arrival time on the at_ms scale, never before
// the request's own at_ms (a TAT at or before now is a full bucket).
func writeTrace(w replies.Writer, b []byte, i int, o *sim.Outcome) ([]byte, error) {
	ks, err := o.State()
	if err != nil {
		return b, err
	}
	b = w.Next(b, i)
	b = w.Object(b, 1)
	if ks.Kind == config.KindGCRA {
		tat := ks.TAT
		if tat.Before(o.At) {
			tat = o.At
		}
		b = w.Int(w.First(b, `,"tat_ms":`), tat.Sub(sim.Base).Milliseconds())
		return w.End(b), nil
	}
	b = w.Array(w.First(b, `,"tiers":`), len(ks.Tiers))
	for j, ts := range ks.Tiers {
		b = w.Next(b, j)
		b = w.Object(b, 2)
		b = w.String(w.First(b, `,"state":`), ts.State)
		b = w.Int(w.Key(b, `,"hits":`), int64(ts.Hits))
		b = w.End(b)
	}
	return w.End(w.EndArray(b)), nil
}
