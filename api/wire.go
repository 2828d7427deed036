package api

import (
	"bytes"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// Limits of the wire format.
const (
	// maxBody is the body limit of every endpoint but /v1/simulate.
	maxBody = 64 << 10
	// maxSimulateBody is the body limit of /v1/simulate, which carries up
	// to maxSimRequests requests.
	maxSimulateBody = 16 << 20
	// maxName is the longest resource, domain or id, in bytes: the
	// config's limit on resource names.
	maxName = config.MaxNameLen
	// maxCopies bounds copies and min_copies.
	maxCopies = 1_000_000_000
	// maxTTLms bounds ttl_ms (24 h).
	maxTTLms = 24 * 60 * 60 * 1000
	// defaultTTLms is the ttl_ms of a session or transfer that gives none.
	defaultTTLms = 30_000
	// maxAtMs bounds a simulated request's at_ms (about 31 years).
	maxAtMs = 1_000_000_000_000
)

const (
	contentTypeJSON    = "application/json"
	contentTypeMsgpack = "application/msgpack"
)

// bodyLimit returns the body limit of the endpoint at path.
func bodyLimit(path []byte) int {
	if string(path) == "/v1/simulate" {
		return maxSimulateBody
	}
	return maxBody
}

// headerReceived is the fasthttp HeaderReceived hook: it applies the body
// limit of the endpoint before the body is read, so that an oversized body
// is refused (413 too_large, by errorHandler) without being read.
func headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	uri := h.RequestURI()
	if i := bytes.Index(uri, []byte("://")); i >= 0 && bytes.IndexByte(uri[:i], '/') < 0 {
		// absolute form, http://host/path: keep the path
		rest := uri[i+3:]
		if j := bytes.IndexByte(rest, '/'); j >= 0 {
			uri = rest[j:]
		}
	}
	if i := bytes.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: bodyLimit(uri)}
}

// headerReceived is headerReceived, plus: while a simulation runs, another
// simulation's body is held to the 64 KiB of every other endpoint, so that a
// client looping on large simulations cannot make the agent read megabytes
// only to refuse them (413 too_large, saying why).
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	rc := headerReceived(h)
	if rc.MaxRequestBodySize == maxSimulateBody && s.sim.busy.Load() {
		rc.MaxRequestBodySize = maxBody
	}
	return rc
}

// format is the encoding of a body or a reply.
type format uint8

const (
	formatJSON    format = iota // application/json, the default
	formatMsgpack               // application/msgpack (or application/x-msgpack)
)

// contentTypes are the Content-Type of a reply in each format.
var contentTypes = [...]string{formatJSON: contentTypeJSON, formatMsgpack: contentTypeMsgpack}

// bodyFormat returns the format of ctx's body: MessagePack when its
// Content-Type is application/msgpack (or application/x-msgpack), with any
// parameters, else JSON (whatever else the Content-Type says, or none).
func bodyFormat(ctx *fasthttp.RequestCtx) format {
	if isMsgpackType(ctx.Request.Header.ContentType()) {
		return formatMsgpack
	}
	return formatJSON
}

// isMsgpackType reports whether the media type mt (parameters allowed) is
// application/msgpack or application/x-msgpack, in any case.
func isMsgpackType(mt []byte) bool {
	if len(mt) < len("application/msgpack") {
		return false
	}
	if i := bytes.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	mt = bytes.TrimSpace(mt)
	return bytes.EqualFold(mt, []byte(contentTypeMsgpack)) || bytes.EqualFold(mt, []byte("application/x-msgpack"))
}

// replyFormat returns the format ctx's reply is written in: MessagePack when
// the Accept header lists application/msgpack (or application/x-msgpack)
// with a q above 0 and not below application/json's (on a tie, the one
// listed first wins), else JSON. Wildcards choose nothing: JSON.
func replyFormat(ctx *fasthttp.RequestCtx) format {
	accept := ctx.Request.Header.PeekCanonical(hdrAccept)
	if len(accept) == 0 || bytes.Index(accept, []byte("msgpack")) < 0 {
		return formatJSON
	}
	return acceptFormat(accept)
}

// hdrAccept is the Accept header's name as fasthttp stores it (normalized),
// so that looking it up costs no normalization.
var hdrAccept = []byte(fasthttp.HeaderAccept)

// acceptFormat chooses a reply format from an Accept header that mentions
// msgpack (see replyFormat).
func acceptFormat(accept []byte) format {
	mpQ, jsonQ := -1, -1 // q in thousandths; -1 when not listed
	mpFirst := false
	for len(accept) > 0 {
		var part []byte
		part, accept, _ = bytes.Cut(accept, []byte(","))
		mt, params, _ := bytes.Cut(part, []byte(";"))
		q := 1000
		for len(params) > 0 {
			var p []byte
			p, params, _ = bytes.Cut(params, []byte(";"))
			k, v, ok := bytes.Cut(bytes.TrimSpace(p), []byte("="))
			if ok && bytes.EqualFold(bytes.TrimSpace(k), []byte("q")) {
				q = parseQ(bytes.TrimSpace(v))
			}
		}
		switch {
		case isMsgpackType(mt):
			if mpQ < 0 {
				mpFirst = jsonQ < 0
			}
			mpQ = max(mpQ, q)
		case bytes.EqualFold(bytes.TrimSpace(mt), []byte(contentTypeJSON)):
			jsonQ = max(jsonQ, q)
		}
	}
	if mpQ > 0 && (mpQ > jsonQ || (mpQ == jsonQ && mpFirst)) {
		return formatMsgpack
	}
	return formatJSON
}

// parseQ parses a q value ("0", "0.5", "1.000") into thousandths; a
// malformed one counts as 0.
func parseQ(v []byte) int {
	if len(v) == 0 || len(v) > 5 || (v[0] != '0' && v[0] != '1') {
		return 0
	}
	q := int(v[0]-'0') * 1000
	if len(v) > 1 {
		if v[1] != '.' {
			return 0
		}
		scale := 100
		for _, c := range v[2:] {
			if c < '0' || c > '9' {
				return 0
			}
			q += int(c-'0') * scale
			scale /= 10
		}
	}
	return min(q, 1000)
}

// readBody returns the body of ctx, checked against its endpoint's limit,
// and its format. It is the one place that chooses a decoder by
// Content-Type.
func readBody(ctx *fasthttp.RequestCtx) ([]byte, format, error) {
	body := ctx.PostBody()
	if limit := bodyLimit(ctx.Path()); len(body) > limit {
		return nil, 0, tooLarge("body: %d bytes is over the limit of %d bytes", len(body), limit)
	}
	return body, bodyFormat(ctx), nil
}

// decodeBody reads ctx's body, JSON or MessagePack by its Content-Type, into
// c.body, with the allowed and required fields. It writes the error reply
// and returns false when the body is bad.
func (s *Server) decodeBody(ctx *fasthttp.RequestCtx, c *call, allowed, required fieldSet) bool {
	body, f, err := readBody(ctx)
	if err == nil {
		if f == formatMsgpack {
			err = c.body.decodeMsgpack(body, allowed, required)
		} else {
			err = c.body.decode(body, allowed, required)
		}
	}
	if err != nil {
		s.fail(ctx, err)
		return false
	}
	return true
}

// writeReply writes a 200 reply, out, in format f; out is copied.
func writeReply(ctx *fasthttp.RequestCtx, f format, out []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentTypes[f])
	ctx.SetBody(out)
}

// fieldSet is a set of the request fields the wire format knows.
type fieldSet uint16

const (
	fResource fieldSet = 1 << iota
	fDomain
	fCopies
	fMinCopies
	fSession
	fHold
	fTransfer
	fTTL
	fAtMs
	fOp
	numFields = iota
)

var fieldNames = [numFields]string{
	"resource", "domain", "copies", "min_copies", "session", "hold", "transfer", "ttl_ms", "at_ms", "op",
}

// intFields are the integer fields; the others are strings.
const intFields = fCopies | fMinCopies | fTTL | fAtMs

// intRanges are the bounds of each integer field, by bit index: the same
// in JSON, in MessagePack and in a query.
var intRanges = [numFields]struct{ lo, hi int64 }{
	2: {0, maxCopies}, // copies
	3: {0, maxCopies}, // min_copies
	7: {1, maxTTLms},  // ttl_ms
	8: {0, maxAtMs},   // at_ms
}

// name returns the name of the single field f.
func (f fieldSet) name() string { return fieldNames[bits.TrailingZeros16(uint16(f))] }

// bounds returns the range of the single integer field f.
func (f fieldSet) bounds() (lo, hi int64) {
	r := intRanges[bits.TrailingZeros16(uint16(f))]
	return r.lo, r.hi
}

// The fields each body accepts.
const (
	requestFields  = fResource | fDomain | fCopies | fMinCopies
	refundFields   = fResource | fDomain | fCopies
	reserveFields  = fResource | fDomain | fCopies | fMinCopies | fSession
	releaseFields  = fHold | fCopies
	transferFields = fHold | fCopies | fTTL
	seizeFields    = fTransfer | fSession
	sessionFields  = fTTL
	simItemFields  = fAtMs | fDomain | fCopies | fMinCopies | fOp
)

func fieldOf(key []byte) fieldSet {
	switch string(key) {
	case "resource":
		return fResource
	case "domain":
		return fDomain
	case "copies":
		return fCopies
	case "min_copies":
		return fMinCopies
	case "session":
		return fSession
	case "hold":
		return fHold
	case "transfer":
		return fTransfer
	case "ttl_ms":
		return fTTL
	case "at_ms":
		return fAtMs
	case "op":
		return fOp
	}
	return 0
}

// first returns the name of the lowest field in s.
func (s fieldSet) first() string {
	for i := range numFields {
		if s&(1<<i) != 0 {
			return fieldNames[i]
		}
	}
	return ""
}

// list renders the fields of s, in order, for messages.
func (s fieldSet) list() string {
	var names []string
	for i := range numFields {
		if s&(1<<i) != 0 {
			names = append(names, fieldNames[i])
		}
	}
	return strings.Join(names, ", ")
}

// wireBody is a decoded request body (or query), for every endpoint: the
// fields an endpoint does not accept stay unset. Both decoders, JSON
// (decode) and MessagePack (decodeMsgpack), fill it through the same field
// table (field, setString, setInt), so a field is checked the same way in
// either. Strings alias the request body or the scratch buffers and are valid
// only while the request is served; a wireBody is pooled and reused (reset)
// between requests.
type wireBody struct {
	seen                                          fieldSet
	resource, domain, session, hold, transfer, op []byte
	copies, minCopies, ttlMs, atMs                int64

	scratch [6][]byte // unescape buffers, one per string field
	key     []byte    // unescape buffer for keys

	mp *mpCodec // the MessagePack reader and encoder, made on first use
}

// reset readies b for another request: clear, and the codec's references to
// the last request's buffers dropped.
func (b *wireBody) reset() {
	b.clear()
	if b.mp != nil {
		b.mp.release()
	}
}

// clear unsets every field, for the next object of the same body (an item
// of a batch).
func (b *wireBody) clear() {
	b.seen = 0
	b.resource, b.domain, b.session, b.hold, b.transfer, b.op = nil, nil, nil, nil, nil, nil
	b.copies, b.minCopies, b.ttlMs, b.atMs = 0, 0, 0, 0
}

// codec returns b's MessagePack reader and encoder, making them on first use.
func (b *wireBody) codec() *mpCodec {
	if b.mp == nil {
		b.mp = newMPCodec()
	}
	return b.mp
}

// has reports whether the body gave field f.
func (b *wireBody) has(f fieldSet) bool { return b.seen&f != 0 }

// counts returns copies (default 1) and min_copies (default copies).
func (b *wireBody) counts() (copies, minCopies int) {
	copies = 1
	if b.has(fCopies) {
		copies = int(b.copies)
	}
	minCopies = copies
	if b.has(fMinCopies) {
		minCopies = int(b.minCopies)
	}
	return copies, minCopies
}

// ttl returns ttl_ms, or defaultTTLms when absent.
func (b *wireBody) ttl() int64 {
	if b.has(fTTL) {
		return b.ttlMs
	}
	return defaultTTLms
}

// decode reads data, a JSON object of the allowed fields, into b (reset).
// An empty body reads as {}. Required fields must be present.
func (b *wireBody) decode(data []byte, allowed, required fieldSet) error {
	r := reader{b: data}
	r.ws()
	if !r.eof() {
		if err := b.read(&r, "body", allowed); err != nil {
			return err
		}
		if err := r.end(); err != nil {
			return err
		}
	}
	return b.check(required)
}

// read reads one object of the allowed fields at r into b. where names the
// object in messages about the object itself ("body"); messages about a field
// name the field alone, and callers nesting objects prefix them.
func (b *wireBody) read(r *reader, where string, allowed fieldSet) error {
	if err := r.openObject(where); err != nil {
		return err
	}
	for n := 0; ; n++ {
		key, ok, err := r.nextKey(where, n, &b.key)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		f, err := b.field(key, allowed)
		if err != nil {
			return err
		}
		if f&intFields != 0 {
			lo, hi := f.bounds()
			var v int64
			if v, err = r.integer(f.name(), lo, hi); err == nil {
				b.setInt(f, v)
			}
		} else {
			var s []byte
			if s, err = r.str(f.name(), b.scratchOf(f)); err == nil {
				err = b.setString(f, s, r.ascii)
			}
		}
		if err != nil {
			return err
		}
	}
}

// field returns the field a key names, marking it seen: an error when the
// key is not one of the allowed fields or was given before.
func (b *wireBody) field(key []byte, allowed fieldSet) (fieldSet, error) {
	f := fieldOf(key)
	if f&allowed == 0 {
		return 0, &fieldError{field: quoteSnippet(key), msg: unknownField(allowed)}
	}
	if b.seen&f != 0 {
		return 0, &fieldError{field: f.name(), msg: "given twice"}
	}
	b.seen |= f
	return f, nil
}

// scratchOf returns the unescape buffer of the string field f.
func (b *wireBody) scratchOf(f fieldSet) *[]byte {
	switch f {
	case fResource:
		return &b.scratch[0]
	case fDomain:
		return &b.scratch[1]
	case fSession:
		return &b.scratch[2]
	case fHold:
		return &b.scratch[3]
	case fTransfer:
		return &b.scratch[4]
	}
	return &b.scratch[5]
}

// setString checks the value of the string field f and sets it: a name or
// id (resource, domain, session, hold, transfer) is non-empty valid UTF-8 of
// at most maxName bytes; op is "", "request" or "refund". ascii says s is
// known to be ASCII, which spares the UTF-8 check.
func (b *wireBody) setString(f fieldSet, s []byte, ascii bool) error {
	switch f {
	case fResource:
		b.resource = s
	case fDomain:
		b.domain = s
	case fSession:
		b.session = s
	case fHold:
		b.hold = s
	case fTransfer:
		b.transfer = s
	case fOp:
		b.op = s
		return checkOp(s)
	}
	return checkNameFast(f.name(), s, ascii)
}

// setInt sets the integer field f, whose range the reader checked.
func (b *wireBody) setInt(f fieldSet, v int64) {
	switch f {
	case fCopies:
		b.copies = v
	case fMinCopies:
		b.minCopies = v
	case fTTL:
		b.ttlMs = v
	case fAtMs:
		b.atMs = v
	}
}

// check verifies required fields and the fields' relations.
func (b *wireBody) check(required fieldSet) error {
	if missing := required &^ b.seen; missing != 0 {
		return &fieldError{field: missing.first(), msg: "required field is missing"}
	}
	if b.has(fMinCopies) {
		if copies, minCopies := b.counts(); minCopies > copies {
			return &fieldError{field: "min_copies", msg: fmt.Sprintf(
				"must not exceed copies, got min_copies %d > copies %d", minCopies, copies)}
		}
	}
	return nil
}

func unknownField(allowed fieldSet) string {
	if allowed == 0 {
		return "unknown field; this call takes no fields"
	}
	return "unknown field; expected one of " + allowed.list()
}

func checkName(field string, s []byte) error { return checkNameFast(field, s, false) }

// checkNameFast is checkName for s known to be ASCII when ascii is true.
func checkNameFast(field string, s []byte, ascii bool) error {
	switch {
	case len(s) == 0:
		return &fieldError{field: field, msg: "must not be empty"}
	case len(s) > maxName:
		return &fieldError{field: field, msg: fmt.Sprintf("must be at most %d bytes, got %d bytes", maxName, len(s))}
	case !ascii && !utf8.Valid(s):
		return &fieldError{field: field, msg: fmt.Sprintf("must be valid UTF-8, got %d bytes that are not", len(s))}
	}
	return nil
}

func checkOp(op []byte) error {
	switch string(op) {
	case "", "request", "refund":
		return nil
	}
	return &fieldError{field: "op", msg: fmt.Sprintf(`must be "request" or "refund", got %s`, strconv.Quote(quoteSnippet(op)))}
}

// readQuery reads the query parameters of ctx into b (reset): each of the
// allowed fields at most once, no other.
func (b *wireBody) readQuery(args *fasthttp.Args, allowed fieldSet) error {
	for k, v := range args.All() {
		f := fieldOf(k)
		if f&allowed == 0 {
			return &fieldError{field: quoteSnippet(k), msg: "unknown query parameter; expected one of " + allowed.list()}
		}
		if b.seen&f != 0 {
			return &fieldError{field: f.first(), msg: "given twice"}
		}
		b.seen |= f
		var err error
		switch f {
		case fResource:
			b.resource, err = v, checkName("resource", v)
		case fDomain:
			b.domain, err = v, checkName("domain", v)
		case fCopies:
			lo, hi := fCopies.bounds()
			b.copies, err = queryInt("copies", v, lo, hi)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// queryInt parses a query parameter of plain decimal digits in [lo, hi].
func queryInt(field string, v []byte, lo, hi int64) (int64, error) {
	var n int64
	ok := len(v) > 0 && len(v) <= 19
	for _, c := range v {
		if c < '0' || c > '9' {
			ok = false
			break
		}
		n = n*10 + int64(c-'0')
	}
	if !ok || n < lo || n > hi {
		return 0, rangeError(field, lo, hi, strconv.Quote(quoteSnippet(v)))
	}
	return n, nil
}

// appendDecision appends the reply of a rate decision: the fields of
// SEMANTICS.md that apply to its kind. A tiers reply has every tier field; a
// gcra reply (and the reply for an unconfigured resource) has granted,
// remaining, retry_after_ms, reset_after_ms and shadow. "lenient" is added,
// true, only for a grant made without a limit.
func appendDecision(b []byte, d *local.Decision) []byte {
	b = append(b, `{"granted":`...)
	b = strconv.AppendInt(b, int64(d.Granted), 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, int64(d.Remaining), 10)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, retryMs(d.RetryAfter), 10)
	b = append(b, `,"reset_after_ms":`...)
	b = strconv.AppendInt(b, ceilMs(d.ResetAfter), 10)
	if d.Kind == config.KindTiers {
		b = append(b, `,"tier":`...)
		b = strconv.AppendInt(b, int64(d.Tier), 10)
		b = append(b, `,"tier_limit":`...)
		b = strconv.AppendInt(b, int64(d.TierLimit), 10)
		b = append(b, `,"tier_hits":`...)
		b = strconv.AppendInt(b, int64(d.TierHits), 10)
		b = append(b, `,"burst":`...)
		b = appendBool(b, d.Burst)
		if d.HardLimit != local.NoLimit {
			b = append(b, `,"hard_limit":`...)
			b = strconv.AppendInt(b, int64(d.HardLimit), 10)
		}
		if d.GlobalLimit != local.NoLimit {
			b = append(b, `,"global_limit":`...)
			b = strconv.AppendInt(b, int64(d.GlobalLimit), 10)
		}
		b = append(b, `,"domain_hits_last_second":`...)
		b = strconv.AppendInt(b, int64(d.DomainHitsLastSecond), 10)
		b = append(b, `,"global_hits_last_second":`...)
		b = strconv.AppendInt(b, int64(d.GlobalHitsLastSecond), 10)
		b = append(b, `,"limited_by_hard":`...)
		b = appendBool(b, d.LimitedByHard)
		b = append(b, `,"limited_by_global":`...)
		b = appendBool(b, d.LimitedByGlobal)
	}
	b = append(b, `,"shadow":`...)
	b = appendBool(b, d.Shadow)
	if d.Lenient {
		b = append(b, `,"lenient":true`...)
	}
	return append(b, '}')
}

// appendRefund appends the reply of a refund.
func appendRefund(b []byte, remaining int) []byte {
	b = append(b, `{"remaining":`...)
	b = strconv.AppendInt(b, int64(remaining), 10)
	return append(b, '}')
}

// appendReservation appends the reply of a reserve: "hold" only when
// granted, "groups" always (empty when the domain is in none), "shadow" and
// "lenient" only when true.
func appendReservation(b []byte, r *local.Reservation) []byte {
	b = append(b, '{')
	b = appendIntField(b, "granted", int64(r.Granted))
	if r.Hold != "" {
		b = appendStringField(b, "hold", r.Hold)
	}
	if r.DomainLimit != local.NoLimit {
		b = appendIntField(b, "domain_limit", int64(r.DomainLimit))
	}
	if r.GlobalLimit != local.NoLimit {
		b = appendIntField(b, "global_limit", int64(r.GlobalLimit))
	}
	b = appendIntField(b, "domain_holds", int64(r.DomainHolds))
	b = appendIntField(b, "global_holds", int64(r.GlobalHolds))
	b = appendField(b, "groups")
	b = append(b, '[')
	for i, g := range r.Groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendStringField(b, "name", g.Name)
		if g.Limit != local.NoLimit {
			b = appendIntField(b, "limit", int64(g.Limit))
		}
		b = appendIntField(b, "holds", int64(g.Holds))
		b = append(b, '}')
	}
	b = append(b, ']')
	if r.Shadow {
		b = appendBoolField(b, "shadow", true)
	}
	if r.Lenient {
		b = appendBoolField(b, "lenient", true)
	}
	return append(b, '}')
}

// appendSeized appends the reply of a seize.
func appendSeized(b []byte, s *local.Seized) []byte {
	b = append(b, '{')
	b = appendStringField(b, "hold", s.Hold)
	b = appendStringField(b, "resource", s.Resource)
	b = appendStringField(b, "domain", s.Domain)
	b = appendField(b, "groups")
	b = append(b, '[')
	for i, g := range s.Groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, g)
	}
	b = append(b, ']')
	b = appendIntField(b, "copies", int64(s.Copies))
	return append(b, '}')
}

// appendSession appends the reply of opening or renewing a session.
func appendSession(b []byte, id string, ttlMs int64) []byte {
	b = append(b, '{')
	b = appendStringField(b, "session", id)
	b = appendIntField(b, "ttl_ms", ttlMs)
	return append(b, '}')
}
