package api

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/adaptive"
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

// The fields of the adaptive bodies. They are read by their own small
// table, next to the shared one of wire.go, with the same readers and the
// same checks and messages.
const (
	aResource uint8 = 1 << iota
	aTicket
	aOutcome
	numAdaptiveFields = iota
)

var adaptiveFieldNames = [numAdaptiveFields]string{"resource", "ticket", "outcome"}

// The fields each body accepts (all of them required).
const (
	admitFields    = aResource
	completeFields = aTicket | aOutcome
)

// adaptiveBody is a decoded /v1/admit or /v1/complete body. Its strings
// alias the request body or the call's scratch buffers, valid while the
// request is served.
type adaptiveBody struct {
	seen     uint8
	resource []byte
	ticket   []byte
	outcome  adaptive.Outcome
}

func adaptiveField(key []byte) uint8 {
	switch string(key) {
	case "resource":
		return aResource
	case "ticket":
		return aTicket
	case "outcome":
		return aOutcome
	}
	return 0
}

// adaptiveList renders the fields of s, in order, for messages.
func adaptiveList(s uint8) string {
	var names []string
	for i, n := range adaptiveFieldNames {
		if s&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

func adaptiveName(f uint8) string {
	for i, n := range adaptiveFieldNames {
		if f == 1<<i {
			return n
		}
	}
	return ""
}

// field marks the field key names as seen: an error when it is not one of
// the allowed fields or was given before.
func (b *adaptiveBody) field(key []byte, allowed uint8) (uint8, error) {
	f := adaptiveField(key)
	if f&allowed == 0 {
		return 0, &fieldError{field: quoteSnippet(key), msg: "unknown field; expected one of " + adaptiveList(allowed)}
	}
	if b.seen&f != 0 {
		return 0, &fieldError{field: adaptiveName(f), msg: "given twice"}
	}
	b.seen |= f
	return f, nil
}

// set checks the value of the string field f and sets it: resource is a
// name (non-empty valid UTF-8 of at most maxName bytes), ticket non-empty
// valid UTF-8 of at most maxTicket bytes, outcome "success" or "backoff".
func (b *adaptiveBody) set(f uint8, s []byte, ascii bool) error {
	switch f {
	case aResource:
		b.resource = s
		return checkNameFast("resource", s, ascii)
	case aTicket:
		b.ticket = s
		if len(s) > maxTicket {
			return &fieldError{field: "ticket", msg: fmt.Sprintf("must be at most %d bytes, got %d bytes", maxTicket, len(s))}
		}
		if len(s) == 0 {
			return &fieldError{field: "ticket", msg: "must not be empty"}
		}
		if !ascii && !utf8.Valid(s) {
			return &fieldError{field: "ticket", msg: fmt.Sprintf("must be valid UTF-8, got %d bytes that are not", len(s))}
		}
		return nil
	default:
		switch string(s) {
		case "success":
			b.outcome = adaptive.Success
		case "backoff":
			b.outcome = adaptive.Backoff
		default:
			return &fieldError{field: "outcome", msg: fmt.Sprintf(`must be "success" or "backoff", got %s`, strconv.Quote(quoteSnippet(s)))}
		}
		return nil
	}
}

// scratch returns the unescape buffer of the field f in c.
func adaptiveScratch(c *call, f uint8) *[]byte {
	switch f {
	case aResource:
		return &c.body.scratch[0]
	case aTicket:
		return &c.body.scratch[3]
	}
	return &c.body.scratch[5]
}

// check verifies the required fields.
func (b *adaptiveBody) check(required uint8) error {
	if missing := required &^ b.seen; missing != 0 {
		return &fieldError{field: adaptiveName(missing & -missing), msg: "required field is missing"}
	}
	return nil
}

// decodeJSON reads data, a JSON object of the allowed fields (every one a
// string), into b. An empty body reads as {}.
func (b *adaptiveBody) decodeJSON(c *call, data []byte, allowed uint8) error {
	r := reader{b: data}
	r.ws()
	if r.eof() {
		return b.check(allowed)
	}
	if err := r.openObject("body"); err != nil {
		return err
	}
	for n := 0; ; n++ {
		key, ok, err := r.nextKey("body", n, &c.body.key)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		f, err := b.field(key, allowed)
		if err != nil {
			return err
		}
		s, err := r.str(adaptiveName(f), adaptiveScratch(c, f))
		if err == nil {
			err = b.set(f, s, r.ascii)
		}
		if err != nil {
			return err
		}
	}
	if err := r.end(); err != nil {
		return err
	}
	return b.check(allowed)
}

// decodeMsgpack is decodeJSON's MessagePack twin: a map of the allowed
// fields, every one a string (binary data is not a string). An empty body
// reads as an empty map.
func (b *adaptiveBody) decodeMsgpack(c *call, data []byte, allowed uint8) error {
	if len(data) == 0 {
		return b.check(allowed)
	}
	m := &c.body.codec().r
	m.reset(data)
	n, err := m.openMap("body")
	if err != nil {
		return err
	}
	for range n {
		key, err := m.key("body")
		if err != nil {
			return err
		}
		f, err := b.field(key, allowed)
		if err != nil {
			return err
		}
		s, err := m.str(adaptiveName(f))
		if err == nil {
			err = b.set(f, s, false)
		}
		if err != nil {
			return err
		}
	}
	if err := m.end(); err != nil {
		return err
	}
	return b.check(allowed)
}

// decodeAdaptive reads ctx's body, JSON or MessagePack by its Content-Type,
// into b. It writes the error reply and returns false when the body is bad.
func (s *Server) decodeAdaptive(ctx *fasthttp.RequestCtx, c *call, b *adaptiveBody, allowed uint8) bool {
	body, f, err := readBody(ctx)
	if err == nil {
		if f == formatMsgpack {
			err = b.decodeMsgpack(c, body, allowed)
		} else {
			err = b.decodeJSON(c, body, allowed)
		}
	}
	if err != nil {
		s.fail(ctx, err)
		return false
	}
	return true
}

// POST /v1/admit {"resource"} → {"admitted": true, "ticket", "position",
// "window"} or {"admitted": false, "window"}; "shadow": true or "lenient":
// true are added to an admission made by shadow mode or without a window.
func (s *Server) admit(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	var b adaptiveBody
	if !s.decodeAdaptive(ctx, c, &b, admitFields) {
		return
	}
	g := s.gen.Load()
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
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.admission(&a)
		c.out = e.end()
	} else {
		c.out = appendAdmission(c.out[:0], &a)
	}
	writeReply(ctx, f, c.out)
}

// POST /v1/complete {"ticket", "outcome": "success"|"backoff"} →
// {"window"}. A ticket that is unknown, completed already or expired is 404
// unknown_ticket.
func (s *Server) complete(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	var b adaptiveBody
	if !s.decodeAdaptive(ctx, c, &b, completeFields) {
		return
	}
	g := s.gen.Load()
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
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.mapLen(1)
		e.intField("window", int64(w))
		c.out = e.end()
	} else {
		c.out = append(c.out[:0], '{')
		c.out = appendIntField(c.out, "window", int64(w))
		c.out = append(c.out, '}')
	}
	writeReply(ctx, f, c.out)
}

// appendAdmission appends the reply of an admit.
func appendAdmission(b []byte, a *local.Admission) []byte {
	b = append(b, '{')
	b = appendBoolField(b, "admitted", a.Admitted)
	if a.Admitted {
		var tb [maxTicket]byte
		b = appendStringField(b, "ticket", a.AppendTicket(tb[:0]))
		b = appendIntField(b, "position", int64(a.Position))
	}
	b = appendIntField(b, "window", int64(a.Window))
	if a.ClientShare {
		b = appendBoolField(b, "client_share", true)
	}
	if a.Shadow {
		b = appendBoolField(b, "shadow", true)
	}
	if a.Lenient {
		b = appendBoolField(b, "lenient", true)
	}
	return append(b, '}')
}

// admission encodes the reply of an admit: appendAdmission's fields, in its
// order.
func (e *mpEncoder) admission(a *local.Admission) {
	n := 2
	if a.Admitted {
		n += 2
	}
	if a.ClientShare {
		n++
	}
	if a.Shadow {
		n++
	}
	if a.Lenient {
		n++
	}
	e.mapLen(n)
	e.boolField("admitted", a.Admitted)
	if a.Admitted {
		e.strField("ticket", a.Ticket())
		e.intField("position", int64(a.Position))
	}
	e.intField("window", int64(a.Window))
	if a.ClientShare {
		e.boolField("client_share", true)
	}
	if a.Shadow {
		e.boolField("shadow", true)
	}
	if a.Lenient {
		e.boolField("lenient", true)
	}
}
