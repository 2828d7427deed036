package api

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/netguard"
	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// Error codes of the wire contract (docs/api.md). codeNotFound is not in docs/api.md's
// table: it is the code of a path no endpoint serves (404).
const (
	codeBadRequest      = "bad_request"
	codeCostOverBurst   = "cost_over_burst"
	codeUnknownResource = "unknown_resource"
	codeUnknownHold     = "unknown_hold"
	codeUnknownSession  = "unknown_session"
	codeUnknownTransfer = "unknown_transfer"
	codeWrongKind       = "wrong_kind"
	codeOverRelease     = "over_release"
	codeAlreadySettled  = "already_settled"
	codeTooLarge        = "too_large"
	codeTooMany         = "too_many"
	codeBadLimit        = "bad_limit"
	codeUnauthorized    = "unauthorized"
	codeNotReady        = "not_ready"
	codeInternal        = "internal"
	codeNotFound        = "not_found"
)

// fieldError is a client error about one field of a request (400
// bad_request). Its message reads "field: what is wrong". The body readers
// of both formats return it.
type fieldError = wire.FieldError

// apiError is a client error with its own status and code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func tooLarge(format string, args ...any) error {
	return &apiError{status: fasthttp.StatusRequestEntityTooLarge, code: codeTooLarge, msg: fmt.Sprintf(format, args...)}
}

// sentinels maps the engine's sentinel errors to their status and code, in
// the order they are tested.
var sentinels = [...]struct {
	err    error
	status int
	code   string
}{
	{local.ErrCostOverBurst, fasthttp.StatusBadRequest, codeCostOverBurst},
	{local.ErrBadRequest, fasthttp.StatusBadRequest, codeBadRequest},
	{local.ErrUnknownResource, fasthttp.StatusNotFound, codeUnknownResource},
	{local.ErrUnknownHold, fasthttp.StatusNotFound, codeUnknownHold},
	{local.ErrUnknownSession, fasthttp.StatusNotFound, codeUnknownSession},
	{local.ErrUnknownTransfer, fasthttp.StatusNotFound, codeUnknownTransfer},
	{local.ErrWrongKind, fasthttp.StatusConflict, codeWrongKind},
	{local.ErrOverRelease, fasthttp.StatusConflict, codeOverRelease},
	{local.ErrTooMany, fasthttp.StatusTooManyRequests, codeTooMany},
	{local.ErrUnknownTicket, fasthttp.StatusNotFound, codeUnknownTicket},
	{local.ErrAlreadySettled, fasthttp.StatusConflict, codeAlreadySettled},
	{local.ErrBadLimit, fasthttp.StatusBadRequest, codeBadLimit},
}

// classify returns the status, code and message of a client error; ok is
// false for anything else, which is a bug (500 internal).
func classify(err error) (status int, code, msg string, ok bool) {
	// (errors.AsType, not errors.As: As's target escapes, an allocation
	// per error reply, and a flood of refusals is what an attack sends.)
	if le, ok := errors.AsType[limitFieldError](err); ok {
		return fasthttp.StatusBadRequest, codeBadLimit, le.Error(), true
	}
	if fe, ok := errors.AsType[*fieldError](err); ok {
		return fasthttp.StatusBadRequest, codeBadRequest, fe.Error(), true
	}
	if ae, ok := errors.AsType[*apiError](err); ok {
		return ae.status, ae.code, ae.msg, true
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.status, s.code, strings.TrimPrefix(err.Error(), "local: "), true
		}
	}
	return fasthttp.StatusInternalServerError, codeInternal, "", false
}

// fail writes the error reply for err. An error that is not a client error is
// logged with a fresh request id, which the reply carries.
func (s *Server) fail(ctx *fasthttp.RequestCtx, err error) {
	status, code, msg, ok := classify(err)
	if !ok {
		msg = s.internal(ctx, err)
	}
	writeError(ctx, status, code, msg)
}

// internal logs err as a bug and returns the message for the client.
func (s *Server) internal(ctx *fasthttp.RequestCtx, err error) string {
	id := s.requestID()
	s.log.Error("internal error", "request_id", id,
		"method", string(ctx.Method()), "path", string(ctx.Path()), "err", err)
	return "internal error; request id " + id
}

// requestID returns a process-unique id: a random prefix chosen at start and
// a counter.
func (s *Server) requestID() string {
	return fmt.Sprintf("%s-%d", s.idPrefix, s.reqSeq.Add(1))
}

// writeError writes an error reply: JSON, or MessagePack when the request
// asks for it (Accept), with the same fields.
func writeError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	ctx.Response.ResetBody()
	ctx.SetStatusCode(status)
	f := replyFormat(ctx)
	ctx.SetContentType(contentTypes[f])
	// Written on the stack and copied into the response's pooled body: no
	// allocation for a message of usual length.
	var buf [512]byte
	ctx.SetBody(replies.AppendError(replies.NewWriter(f), buf[:0], code, msg))
}

// errorHandler is the fasthttp ErrorHandler: a request that could not be
// read (malformed HTTP, a body over its limit) still gets an error reply
// (MessagePack when its headers, which were read, ask for it).
func (s *Server) errorHandler(ctx *fasthttp.RequestCtx, err error) {
	// A connection whose first request fails is how a flood of junk
	// connections looks: the listener paces its next accept.
	netguard.FirstRequestFailed(ctx.Conn())
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		limit := bodyLimit(ctx.Path())
		if limit == maxSimulateBody && s.sim.busy.Load() {
			ctx.Response.Header.Set("Retry-After", "1")
			writeError(ctx, fasthttp.StatusRequestEntityTooLarge, codeTooLarge,
				fmt.Sprintf("body: a simulation is already running on this agent, and meanwhile %s takes at most %d bytes; retry when it ends", string(ctx.Path()), maxBody))
			return
		}
		writeError(ctx, fasthttp.StatusRequestEntityTooLarge, codeTooLarge,
			fmt.Sprintf("body: larger than the limit of %s (%d bytes)", string(ctx.Path()), limit))
		return
	}
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		writeError(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, codeTooLarge, "request headers too large")
		return
	}
	writeError(ctx, fasthttp.StatusBadRequest, codeBadRequest, "malformed HTTP request: "+err.Error())
}

// recoverPanic turns a panic in a handler into a 500 internal reply; the server
// keeps serving.
func (s *Server) recoverPanic(ctx *fasthttp.RequestCtx) {
	if v := recover(); v != nil {
		id := s.requestID()
		s.log.Error("panic in handler", "request_id", id,
			"method", string(ctx.Method()), "path", string(ctx.Path()), "panic", fmt.Sprint(v),
			slog.String("stack", string(debug.Stack())))
		writeError(ctx, fasthttp.StatusInternalServerError, codeInternal, "internal error; request id "+id)
	}
}
