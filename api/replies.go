package api

import (
	"bytes"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/wire/mpwire"
	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// The replies of the endpoints are written by one function each, over a
// replies.Writer: JSON, or MessagePack when the Accept header asks for it,
// with the same members in the same order (see package replies). A handler
// ends with
//
//	c.reply(ctx, writeX(c.writer(ctx), c.out[:0], &x))
//
// which writes into the call's pooled buffer and allocates nothing. Each
// reply's members, their order and when each is present are package
// replies' (AppendDecision, AppendReservation, AppendError, ...); a writeX
// here only converts the engine's value (package local) to the reply's. The
// operations endpoints render JSON with encoding/json, which the router
// transcodes when MessagePack is asked for (transcodeReply).

// writer returns the Writer of ctx's reply, in the format its Accept header
// asks for, noted in c for reply.
func (c *call) writer(ctx *fasthttp.RequestCtx) replies.Writer {
	c.f = replyFormat(ctx)
	return replies.NewWriter(c.f)
}

// reply writes out, a reply written from the start of c.out by the Writer
// of c.writer, as ctx's 200 reply.
func (c *call) reply(ctx *fasthttp.RequestCtx, out []byte) {
	c.out = out
	writeReply(ctx, c.f, out)
}

// A limit the engine has not (local.NoLimit) is replies.NoLimit, which the
// reply leaves out: the same value.
var _ [0]struct{} = [local.NoLimit - replies.NoLimit]struct{}{}

// wireDecision returns decision d as its reply carries it.
func wireDecision(d *local.Decision) replies.Decision {
	return replies.Decision{
		Granted:              int64(d.Granted),
		Remaining:            int64(d.Remaining),
		RetryAfterMs:         retryMs(d.RetryAfter),
		ResetAfterMs:         ceilMs(d.ResetAfter),
		Tiers:                d.Kind == config.KindTiers,
		Tier:                 int64(d.Tier),
		TierLimit:            int64(d.TierLimit),
		TierHits:             int64(d.TierHits),
		Burst:                d.Burst,
		HardLimit:            int64(d.HardLimit),
		GlobalLimit:          int64(d.GlobalLimit),
		DomainHitsLastSecond: int64(d.DomainHitsLastSecond),
		GlobalHitsLastSecond: int64(d.GlobalHitsLastSecond),
		LimitedByHard:        d.LimitedByHard,
		LimitedByGlobal:      d.LimitedByGlobal,
		Shadow:               d.Shadow,
		Lenient:              d.Lenient,
	}
}

// writeDecision writes the reply of a rate decision (replies.AppendDecision):
// the fields of the contract that apply to its kind.
func writeDecision(w replies.Writer, b []byte, d *local.Decision) []byte {
	wd := wireDecision(d)
	return replies.AppendDecision(w, b, &wd)
}

// appendDecision appends the JSON reply of decision d to b.
func appendDecision(b []byte, d *local.Decision) []byte {
	return writeDecision(replies.NewWriter(formatJSON), b, d)
}

// transcodeReply rewrites a JSON reply as MessagePack when the request
// asked for MessagePack (Accept). The endpoints but the operations ones
// write MessagePack themselves; this is for the handlers that render JSON
// only, so that every reply honours Accept. Replies of any other type
// (text, HTML, no body) are left alone. A reply that cannot be transcoded
// (a bug) becomes a 500.
func (s *Server) transcodeReply(ctx *fasthttp.RequestCtx) {
	resp := &ctx.Response
	// (Body last: it would read a body stream into a buffer.)
	if !bytes.Equal(resp.Header.ContentType(), []byte(contentTypeJSON)) || replyFormat(ctx) != formatMsgpack ||
		len(resp.Body()) == 0 {
		return
	}
	out, err := mpwire.AppendFromJSON(nil, resp.Body())
	if err != nil {
		s.fail(ctx, err)
		return
	}
	resp.SetBodyRaw(out)
	resp.Header.SetContentType(contentTypeMsgpack)
}

// ceilMs returns d in whole milliseconds, rounded up; 0 for d ≤ 0.
func ceilMs(d time.Duration) int64 { return ceilTo(d, time.Millisecond) }

// ceilSec returns d in whole seconds, rounded up; 0 for d ≤ 0.
func ceilSec(d time.Duration) int64 { return ceilTo(d, time.Second) }

// ceilTo returns d in whole units, rounded up; 0 for d ≤ 0.
func ceilTo(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := d / unit
	if d%unit != 0 {
		q++
	}
	return int64(q)
}

// retryMs renders a RetryAfter: local.Never is -1, anything else is rounded
// up to the millisecond.
func retryMs(d time.Duration) int64 {
	if d == local.Never {
		return -1
	}
	return ceilMs(d)
}
