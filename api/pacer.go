package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/local"
)

// The client pacer (kind pacer): POST /v1/pace before a call to the paced
// API, POST /v1/observe after it. The bodies are read by their own small
// table, like the adaptive ones, with the shared readers, checks and
// messages.

// maxHeaderValue is the longest raw header value /v1/observe takes.
const maxHeaderValue = 8 << 10

// The fields of the pacer bodies.
const (
	pResource uint8 = 1 << iota
	pStatus
	pRemaining
	pRateLimit
	pRateLimitRemaining
	numPacerFields = iota
)

var pacerFieldNames = [numPacerFields]string{"resource", "status", "remaining", "ratelimit", "ratelimit_remaining"}

// The fields each body accepts, and those it requires.
const (
	paceFields      = pResource
	observeFields   = pResource | pStatus | pRemaining | pRateLimit | pRateLimitRemaining
	observeRequired = pResource | pStatus
	pacerIntFields  = pStatus | pRemaining
	rawHeaderFields = pRateLimit | pRateLimitRemaining
)

// pacerBody is a decoded /v1/pace or /v1/observe body. Its byte slices
// alias the request body or the call's scratch buffers, valid while the
// request is served.
type pacerBody struct {
	seen               uint8
	resource           []byte
	status             int64
	remaining          int64 // as given; -1 = none
	ratelimit          []byte
	ratelimitRemaining []byte
	// count is the remaining count the body reports, from remaining or
	// the raw header values; -1 when it reports none. Set by check.
	count int64
}

func pacerField(key []byte) uint8 {
	for i, n := range pacerFieldNames {
		if string(key) == n {
			return 1 << i
		}
	}
	return 0
}

func pacerName(f uint8) string {
	for i, n := range pacerFieldNames {
		if f == 1<<i {
			return n
		}
	}
	return ""
}

// pacerList renders the fields of s, in order, for messages.
func pacerList(s uint8) string {
	var names []string
	for i, n := range pacerFieldNames {
		if s&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// field marks the field key names as seen: an error when it is not one of
// the allowed fields or was given before.
func (b *pacerBody) field(key []byte, allowed uint8) (uint8, error) {
	f := pacerField(key)
	if f&allowed == 0 {
		return 0, &fieldError{field: quoteSnippet(key), msg: "unknown field; expected one of " + pacerList(allowed)}
	}
	if b.seen&f != 0 {
		return 0, &fieldError{field: pacerName(f), msg: "given twice"}
	}
	b.seen |= f
	return f, nil
}

// pacerBounds returns the range of the integer field f: status an HTTP status
// code, remaining a count of at most 18 digits or -1 (none).
func pacerBounds(f uint8) (lo, hi int64) {
	if f == pStatus {
		return 100, 599
	}
	return -1, local.MaxRemaining
}

// setInt sets the integer field f, read within its bounds.
func (b *pacerBody) setInt(f uint8, v int64) {
	if f == pStatus {
		b.status = v
	} else {
		b.remaining = v
	}
}

// setString checks the string field f and sets it: resource is a name;
// a raw header value is valid UTF-8 of at most maxHeaderValue bytes (it is
// parsed by check).
func (b *pacerBody) setString(f uint8, s []byte, ascii bool) error {
	switch f {
	case pResource:
		b.resource = s
		return checkNameFast("resource", s, ascii)
	case pRateLimit:
		b.ratelimit = s
	default:
		b.ratelimitRemaining = s
	}
	name := pacerName(f)
	if len(s) > maxHeaderValue {
		return &fieldError{field: name, msg: fmt.Sprintf("must be at most %d bytes, got %d bytes", maxHeaderValue, len(s))}
	}
	if !ascii && !utf8.Valid(s) {
		return &fieldError{field: name, msg: fmt.Sprintf("must be valid UTF-8, got %d bytes that are not", len(s))}
	}
	return nil
}

// pacerScratch returns the unescape buffer of the string field f in c.
func pacerScratch(c *call, f uint8) *[]byte {
	switch f {
	case pResource:
		return &c.body.scratch[0]
	case pRateLimit:
		return &c.body.scratch[1]
	}
	return &c.body.scratch[2]
}

// check verifies the required fields and works out the remaining count:
// remaining as given, else the raw RateLimit value's (its smallest r, or
// its remaining member), else the raw RateLimit-Remaining value's; an
// empty raw value is a header the reply did not have. A raw value that
// reports no count, or remaining given with a raw value, is an error.
func (b *pacerBody) check(required uint8) error {
	if missing := required &^ b.seen; missing != 0 {
		return &fieldError{field: pacerName(missing & -missing), msg: "required field is missing"}
	}
	b.count = -1
	if b.seen&pRemaining != 0 {
		if b.seen&rawHeaderFields != 0 {
			return &fieldError{field: "remaining", msg: "give either remaining or the raw header values (" + pacerList(b.seen&rawHeaderFields) + "), not both"}
		}
		b.count = b.remaining
		return nil
	}
	fromRemaining := int64(-1)
	if len(b.ratelimitRemaining) > 0 {
		n, ok := adaptive.ParseRateLimitRemaining(string(b.ratelimitRemaining))
		if !ok {
			return &fieldError{field: "ratelimit_remaining", msg: fmt.Sprintf(
				"expected a RateLimit-Remaining header value: a non-negative integer of at most 18 digits (or a comma-separated list of them), got %s",
				strconv.Quote(quoteSnippet(b.ratelimitRemaining)))}
		}
		fromRemaining = int64(n)
	}
	if len(b.ratelimit) > 0 {
		n, ok := adaptive.ParseRateLimit(string(b.ratelimit))
		if !ok {
			return &fieldError{field: "ratelimit", msg: fmt.Sprintf(
				`expected a RateLimit header value with a remaining count: items such as "default";r=4;t=1 (the IETF draft's form, the smallest r counts) or limit=10, remaining=4, reset=1; got %s`,
				strconv.Quote(quoteSnippet(b.ratelimit)))}
		}
		b.count = int64(n) // RateLimit wins, as adaptive.Remaining reads headers
		return nil
	}
	b.count = fromRemaining
	return nil
}

// decodeJSON reads data, a JSON object of the allowed fields, into b. An
// empty body reads as {}.
func (b *pacerBody) decodeJSON(c *call, data []byte, allowed, required uint8) error {
	r := reader{b: data}
	r.ws()
	if r.eof() {
		return b.check(required)
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
		if f&pacerIntFields != 0 {
			lo, hi := pacerBounds(f)
			var v int64
			if v, err = r.integer(pacerName(f), lo, hi); err == nil {
				b.setInt(f, v)
			}
		} else {
			var s []byte
			if s, err = r.str(pacerName(f), pacerScratch(c, f)); err == nil {
				err = b.setString(f, s, r.ascii)
			}
		}
		if err != nil {
			return err
		}
	}
	if err := r.end(); err != nil {
		return err
	}
	return b.check(required)
}

// decodeMsgpack is decodeJSON's MessagePack twin: a map of the allowed
// fields (binary data is not a string, nil is not a missing field). An
// empty body reads as an empty map.
func (b *pacerBody) decodeMsgpack(c *call, data []byte, allowed, required uint8) error {
	if len(data) == 0 {
		return b.check(required)
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
		if f&pacerIntFields != 0 {
			lo, hi := pacerBounds(f)
			var v int64
			if v, err = m.integer(pacerName(f), lo, hi); err == nil {
				b.setInt(f, v)
			}
		} else {
			var s []byte
			if s, err = m.str(pacerName(f)); err == nil {
				err = b.setString(f, s, false)
			}
		}
		if err != nil {
			return err
		}
	}
	if err := m.end(); err != nil {
		return err
	}
	return b.check(required)
}

// decodePacer reads ctx's body, JSON or MessagePack by its Content-Type,
// into b. It writes the error reply and returns false when the body is bad.
func (s *Server) decodePacer(ctx *fasthttp.RequestCtx, c *call, b *pacerBody, allowed, required uint8) bool {
	body, f, err := readBody(ctx)
	if err == nil {
		if f == formatMsgpack {
			err = b.decodeMsgpack(c, body, allowed, required)
		} else {
			err = b.decodeJSON(c, body, allowed, required)
		}
	}
	if err != nil {
		s.fail(ctx, err)
		return false
	}
	return true
}

// POST /v1/pace {"resource"} → {"wait_ms"}: how long to wait before the
// call (rounded up to the millisecond), which the pacer counts as made
// then; "lenient": true when the resource is paced without a pacer.
func (s *Server) pace(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	var b pacerBody
	if !s.decodePacer(ctx, c, &b, paceFields, paceFields) {
		return
	}
	g := s.gen.Load()
	p, err := g.engine.Pace(s.now(), g.name(b.resource))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writePacing(ctx, c, &p, false)
}

// POST /v1/observe {"resource", "status", "remaining"} (or the raw
// "ratelimit" and/or "ratelimit_remaining" header values instead of
// remaining) → {"wait_ms", "remaining", "rate_per_s"}: what the pacer
// knows after the reply.
func (s *Server) observe(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	var b pacerBody
	if !s.decodePacer(ctx, c, &b, observeFields, observeRequired) {
		return
	}
	g := s.gen.Load()
	p, err := g.engine.Observe(s.now(), g.name(b.resource), int(b.status), int(b.count))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writePacing(ctx, c, &p, true)
}

// writePacing writes the reply of pace (wait_ms) or, with full, of observe
// (wait_ms, then remaining when the pacer has seen one and rate_per_s when
// it paces); lenient is added when true.
func (s *Server) writePacing(ctx *fasthttp.RequestCtx, c *call, p *local.Pacing, full bool) {
	showRemaining := full && p.Remaining >= 0
	showRate := full && !math.IsInf(p.Rate, 0) && !math.IsNaN(p.Rate)
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.mapLen(1 + btoi(showRemaining) + btoi(showRate) + btoi(p.Lenient))
		e.intField("wait_ms", ceilMs(p.Wait))
		if showRemaining {
			e.intField("remaining", int64(p.Remaining))
		}
		if showRate {
			_ = e.enc.EncodeString("rate_per_s")
			_ = e.enc.EncodeFloat64(roundRate(p.Rate))
		}
		if p.Lenient {
			e.boolField("lenient", true)
		}
		c.out = e.end()
	} else {
		b := append(c.out[:0], '{')
		b = appendIntField(b, "wait_ms", ceilMs(p.Wait))
		if showRemaining {
			b = appendIntField(b, "remaining", int64(p.Remaining))
		}
		if showRate {
			b = strconv.AppendFloat(appendField(b, "rate_per_s"), p.Rate, 'g', 6, 64)
		}
		if p.Lenient {
			b = appendBoolField(b, "lenient", true)
		}
		c.out = append(b, '}')
	}
	writeReply(ctx, f, c.out)
}

// roundRate keeps 6 significant digits of a rate, as the JSON reply
// writes it, so that both formats carry the same number.
func roundRate(r float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(r, 'g', 6, 64), 64)
	return v
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pacerStateReply is the "pacer" object of GET /v1/state for a pacer
// resource: what POST /v1/observe would report, without observing.
type pacerStateReply struct {
	WaitMs    int64    `json:"wait_ms"`
	Remaining *int     `json:"remaining,omitempty"`
	RatePerS  *float64 `json:"rate_per_s,omitempty"`
}

// pacerState returns the pacer object of GET /v1/state, nil when the
// resource has no pacer (its namespace ignores its config).
func pacerState(e *local.Engine, now time.Time, resource string) *pacerStateReply {
	p, ok := e.PacerStatus(now, resource)
	if !ok {
		return nil
	}
	r := &pacerStateReply{WaitMs: ceilMs(p.Wait)}
	if p.Remaining >= 0 {
		r.Remaining = &p.Remaining
	}
	if !math.IsInf(p.Rate, 0) && !math.IsNaN(p.Rate) {
		rate := roundRate(p.Rate)
		r.RatePerS = &rate
	}
	return r
}
