package api

import (
	"errors"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// codeUnknownTicket is the error code of a ticket that is unknown,
// completed or expired: 404, like unknown_hold, unknown_session and
// unknown_transfer, the contract's codes for ids that are unknown, ended or
// expired (docs/api.md).
const codeUnknownTicket = "unknown_ticket"

// maxTicket is the longest ticket: a resource name, '#', two base-36
// numbers and the 26-character MAC, with their dots.
const maxTicket = maxName + 64

// POST /v1/admit {"resource"} → {"admitted": true, "ticket", "position",
// "window"} or {"admitted": false, "window"}; "shadow": true or "lenient":
// true are added to an admission made by shadow mode or without a window.
func (s *Server) admit(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, admitFields, admitFields)
	if !ok {
		return
	}
	defer putCall(c)
	b := &c.body
	resource := g.name(b.resource)
	client := ""
	if g.engine.BoundsClients(resource) {
		client = clientOf(ctx) // a syscall: only where a client share applies
	}
	a, err := g.engine.AdmitAs(s.now(), resource, client)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countAdmit(resource, &a)
	c.reply(ctx, writeAdmission(c.writer(ctx), c.out[:0], &a))
}

// POST /v1/complete {"ticket", "outcome": "success"|"backoff"} →
// {"window"}. A ticket that is unknown, completed already or expired is 404
// unknown_ticket.
func (s *Server) complete(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, completeFields, completeFields)
	if !ok {
		return
	}
	defer putCall(c)
	b := &c.body
	w, err := g.engine.Complete(s.now(), string(b.ticket), b.outcome)
	if err == nil || errors.Is(err, local.ErrUnknownTicket) {
		g.countComplete(b.ticket, b.outcome, err)
	}
	if err != nil {
		if errors.Is(err, local.ErrUnknownTicket) {
			err = &apiError{status: fasthttp.StatusNotFound, code: codeUnknownTicket, msg: strings.TrimPrefix(err.Error(), "local: ")}
		}
		s.fail(ctx, err)
		return
	}
	c.reply(ctx, replies.AppendInt(c.writer(ctx), c.out[:0], `,"window":`, int64(w)))
}

// writeAdmission writes the reply of an admit: "ticket" and "position" only
// when admitted, "client_share", "shadow" and "lenient" only when true.
func writeAdmission(w replies.Writer, b []byte, a *local.Admission) []byte {
	var tb [maxTicket]byte
	b = w.Object(b, 2+2*btoi(a.Admitted)+btoi(a.ClientShare)+btoi(a.Shadow)+btoi(a.Lenient))
	b = w.Bool(w.First(b, `,"admitted":`), a.Admitted)
	if a.Admitted {
		b = w.StringBytes(w.Key(b, `,"ticket":`), a.AppendTicket(tb[:0]))
		b = w.Int(w.Key(b, `,"position":`), int64(a.Position))
	}
	b = w.Int(w.Key(b, `,"window":`), int64(a.Window))
	if a.ClientShare {
		b = w.Bool(w.Key(b, `,"client_share":`), true)
	}
	if a.Shadow {
		b = w.Bool(w.Key(b, `,"shadow":`), true)
	}
	if a.Lenient {
		b = w.Bool(w.Key(b, `,"lenient":`), true)
	}
	return w.End(b)
}
