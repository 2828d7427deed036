package api

import (
	"bytes"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/internal/wire/jsonwire"
	"github.com/obol-dev/obol/internal/wire/mpwire"
	"github.com/obol-dev/obol/local"
)

// fields.go is the one table of the fields a request body (or a query) may
// carry, for every endpoint, and the wireBody they are read into. A field
// is checked by its entry, the same way whatever reads it: a JSON or a
// MessagePack body (bodyread.go) or a query.

// fieldSet is a set of the request fields the wire format knows.
type fieldSet uint32

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
	fTicket
	fOutcome
	fStatus
	fRemaining
	fRateLimit
	fRateLimitRemaining
	fSettle
	fLimit
	numFields = iota
)

// fieldKind is how a field's value is read and checked.
type fieldKind uint8

const (
	kindName   fieldKind = iota // a string: non-empty valid UTF-8 of at most max bytes
	kindText                    // a string: valid UTF-8 of at most max bytes, maybe empty
	kindEnum                    // a string: one of enum
	kindInt                     // an integer in [lo, hi]
	kindBool                    // true or false
	kindObject                  // an object, kept as JSON (limit)
)

// fieldSpec is one field's entry.
type fieldSpec struct {
	name    string
	kind    fieldKind
	max     int      // kindName, kindText: the most bytes
	lo, hi  int64    // kindInt: the range
	enum    []string // kindEnum: the values accepted
	enumMsg string   // kindEnum: what the refusal says is expected
}

// fields is the table, by bit index. The order is that of messages listing
// fields.
var fields = [numFields]fieldSpec{
	{name: "resource", kind: kindName, max: maxName},
	{name: "domain", kind: kindName, max: maxName},
	{name: "copies", kind: kindInt, lo: 0, hi: maxCopies},
	{name: "min_copies", kind: kindInt, lo: 0, hi: maxCopies},
	{name: "session", kind: kindName, max: maxName},
	{name: "hold", kind: kindName, max: maxName},
	{name: "transfer", kind: kindName, max: maxName},
	{name: "ttl_ms", kind: kindInt, lo: 1, hi: maxTTLms},
	{name: "at_ms", kind: kindInt, lo: 0, hi: maxAtMs},
	{name: "op", kind: kindEnum, enum: []string{"", "request", "refund"}, enumMsg: `must be "request" or "refund"`},
	{name: "ticket", kind: kindName, max: maxTicket},
	{name: "outcome", kind: kindEnum, enum: []string{"success", "backoff"}, enumMsg: `must be "success" or "backoff"`},
	{name: "status", kind: kindInt, lo: 100, hi: 599},                  // an HTTP status
	{name: "remaining", kind: kindInt, lo: -1, hi: local.MaxRemaining}, // -1: none
	{name: "ratelimit", kind: kindText, max: maxHeaderValue},
	{name: "ratelimit_remaining", kind: kindText, max: maxHeaderValue},
	{name: "settle", kind: kindBool},
	{name: "limit", kind: kindObject},
}

// fieldOf returns the field key names; 0 when it names none.
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
	case "ticket":
		return fTicket
	case "outcome":
		return fOutcome
	case "status":
		return fStatus
	case "remaining":
		return fRemaining
	case "ratelimit":
		return fRateLimit
	case "ratelimit_remaining":
		return fRateLimitRemaining
	case "settle":
		return fSettle
	case "limit":
		return fLimit
	}
	return 0
}

// intFields are the integer fields; the others are strings.
const intFields = fCopies | fMinCopies | fTTL | fAtMs | fStatus | fRemaining

// boolFields are the boolean fields.
const boolFields = fSettle

// rawHeaderFields are the raw RateLimit header values of /v1/observe.
const rawHeaderFields = fRateLimit | fRateLimitRemaining

// The fields each body accepts.
const (
	requestFields = fResource | fDomain | fCopies | fMinCopies | fLimit
	refundFields  = fResource | fDomain | fCopies | fLimit
	// requestSettleFields are /v1/request's: a request alone may ask for
	// a settle ticket (not a batch's item).
	requestSettleFields = requestFields | fSettle
	settleFields        = fTicket | fCopies
	resetFields         = fResource | fDomain | fLimit
	reserveFields       = fResource | fDomain | fCopies | fMinCopies | fSession
	releaseFields       = fHold | fCopies
	transferFields      = fHold | fCopies | fTTL
	seizeFields         = fTransfer | fSession
	sessionFields       = fTTL
	simItemFields       = fAtMs | fDomain | fCopies | fMinCopies | fOp
	admitFields         = fResource
	completeFields      = fTicket | fOutcome
	paceFields          = fResource
	observeFields       = fResource | fStatus | fRemaining | rawHeaderFields
	// observeRequired are the fields /v1/observe requires.
	observeRequired = fResource | fStatus
)

// index returns the bit index of the single field f.
func (f fieldSet) index() int { return bits.TrailingZeros32(uint32(f)) }

// name returns the name of the single field f.
func (f fieldSet) name() string { return fields[f.index()].name }

// bounds returns the range of the single integer field f.
func (f fieldSet) bounds() (lo, hi int64) {
	sp := &fields[f.index()]
	return sp.lo, sp.hi
}

// first returns the name of the lowest field in s ("" for none).
func (s fieldSet) first() string {
	if s == 0 {
		return ""
	}
	return (s & -s).name()
}

// list renders the fields of s, in order, for messages.
func (s fieldSet) list() string {
	var names []string
	for i := range numFields {
		if s&(1<<i) != 0 {
			names = append(names, fields[i].name)
		}
	}
	return strings.Join(names, ", ")
}

// wireBody is a decoded request body (or query), for every endpoint: the
// fields an endpoint does not accept stay unset. Both readers, JSON and
// MessagePack, fill it through the field table (field, setString, setInt),
// so a field is checked the same way in either. Strings alias the request
// body or unescaped and are valid only while the request is served; a
// wireBody is pooled and reused (reset) between requests, with the readers
// of both formats.
type wireBody struct {
	values

	// unescaped holds the strings of the body that had to be unescaped
	// (JSON), appended one after the other: they stay valid until reset.
	unescaped []byte

	lx jsonwire.Lexer // the readers, aimed at a body by jsonReader, mpReader
	mp mpwire.Reader
}

// values are the fields of a wireBody, cleared at once.
type values struct {
	seen                                                  fieldSet
	resource, domain, session, hold, transfer, op, ticket []byte
	ratelimit, ratelimitRemaining                         []byte
	copies, minCopies, ttlMs, atMs, status, remaining     int64
	outcome                                               adaptive.Outcome
	settle                                                bool
	// limit is the limit a request sets (fLimit), as JSON: it aliases the
	// body (JSON) or is unescaped's (MessagePack, turned into JSON).
	limit []byte
	// count is the remaining count an observe reports, from remaining or
	// the raw header values; -1 when it reports none. Set by check.
	count int64
}

// reset readies b for another request: clear, the unescaped strings
// dropped, and the readers' references to the last request's body too.
func (b *wireBody) reset() {
	b.clear()
	b.unescaped = b.unescaped[:0]
	b.lx.Reset(nil)
	b.mp.Reset(nil)
}

// clear unsets every field, for the next object of the same body (an item
// of a batch): the strings read before stay valid.
func (b *wireBody) clear() { b.values = values{} }

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

// field returns the field a key names, marking it seen: an error when the
// key is not one of the allowed fields or was given before.
func (b *wireBody) field(key []byte, allowed fieldSet) (fieldSet, error) {
	f := fieldOf(key)
	if f&allowed == 0 {
		return 0, &fieldError{Field: wire.Snippet(key), Msg: unknownField(allowed)}
	}
	if b.seen&f != 0 {
		return 0, &fieldError{Field: f.name(), Msg: "given twice"}
	}
	b.seen |= f
	return f, nil
}

// str returns where the string field f is held.
func (b *wireBody) str(f fieldSet) *[]byte {
	switch f {
	case fResource:
		return &b.resource
	case fDomain:
		return &b.domain
	case fSession:
		return &b.session
	case fHold:
		return &b.hold
	case fTransfer:
		return &b.transfer
	case fOp:
		return &b.op
	case fTicket:
		return &b.ticket
	case fRateLimit:
		return &b.ratelimit
	}
	return &b.ratelimitRemaining
}

// setString checks the value of the string field f by its entry and sets
// it. ascii says s is known to be ASCII, which spares the UTF-8 check.
func (b *wireBody) setString(f fieldSet, s []byte, ascii bool) error {
	sp := &fields[f.index()]
	if sp.kind != kindEnum {
		*b.str(f) = s
		if (f == fResource || f == fDomain) && bytes.IndexByte(s, 0) >= 0 {
			return &fieldError{Field: sp.name, Msg: "must not contain a NUL byte"} // it joins a resource's name to its limit's and its domain's (local.LimitedName, key hashes)
		}
		return checkString(sp.name, s, ascii, sp.max, sp.kind == kindName)
	}
	i := 0
	for i < len(sp.enum) && string(s) != sp.enum[i] {
		i++
	}
	switch {
	case i == len(sp.enum):
		return &fieldError{Field: sp.name, Msg: fmt.Sprintf("%s, got %s", sp.enumMsg, strconv.Quote(wire.Snippet(s)))}
	case f == fOutcome:
		b.outcome = [...]adaptive.Outcome{adaptive.Success, adaptive.Backoff}[i]
	default:
		*b.str(f) = s
	}
	return nil
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
	case fStatus:
		b.status = v
	default:
		b.remaining = v
	}
}

// check verifies the required fields and the fields' relations: min_copies
// not above copies; for an observe, remaining or the raw header values, not
// both, and the remaining count they report (count).
func (b *wireBody) check(required fieldSet) error {
	if missing := required &^ b.seen; missing != 0 {
		return &fieldError{Field: missing.first(), Msg: "required field is missing"}
	}
	if b.has(fMinCopies) {
		if copies, minCopies := b.counts(); minCopies > copies {
			return &fieldError{Field: "min_copies", Msg: fmt.Sprintf(
				"must not exceed copies, got min_copies %d > copies %d", minCopies, copies)}
		}
	}
	b.count = -1
	if b.seen&(fRemaining|rawHeaderFields) != 0 {
		return b.observed()
	}
	return nil
}

// observed works out the remaining count an observe reports: remaining as
// given, else the raw RateLimit value's (its smallest r, or its remaining
// member), else the raw RateLimit-Remaining value's; an empty raw value is
// a header the reply did not have. A raw value that reports no count, or
// remaining given with a raw value, is an error.
func (b *wireBody) observed() error {
	if b.has(fRemaining) {
		if b.seen&rawHeaderFields != 0 {
			return &fieldError{Field: "remaining", Msg: "give either remaining or the raw header values (" + (b.seen & rawHeaderFields).list() + "), not both"}
		}
		b.count = b.remaining
		return nil
	}
	fromRemaining := int64(-1)
	if len(b.ratelimitRemaining) > 0 {
		n, ok := adaptive.ParseRateLimitRemaining(string(b.ratelimitRemaining))
		if !ok {
			return &fieldError{Field: "ratelimit_remaining", Msg: fmt.Sprintf(
				"expected a RateLimit-Remaining header value: a non-negative integer of at most 18 digits (or a comma-separated list of them), got %s",
				strconv.Quote(wire.Snippet(b.ratelimitRemaining)))}
		}
		fromRemaining = int64(n)
	}
	if len(b.ratelimit) > 0 {
		n, ok := adaptive.ParseRateLimit(string(b.ratelimit))
		if !ok {
			return &fieldError{Field: "ratelimit", Msg: fmt.Sprintf(
				`expected a RateLimit header value with a remaining count: items such as "default";r=4;t=1 (the IETF draft's form, the smallest r counts) or limit=10, remaining=4, reset=1; got %s`,
				strconv.Quote(wire.Snippet(b.ratelimit)))}
		}
		b.count = int64(n) // RateLimit wins, as adaptive.Remaining reads headers
		return nil
	}
	b.count = fromRemaining
	return nil
}

func unknownField(allowed fieldSet) string {
	if allowed == 0 {
		return "unknown field; this call takes no fields"
	}
	return "unknown field; expected one of " + allowed.list()
}

// checkName checks a name or id given as field: non-empty valid UTF-8 of at
// most maxName bytes.
func checkName(field string, s []byte) error { return checkString(field, s, false, maxName, true) }

// checkString checks a string value of field: at most max bytes, valid
// UTF-8 (known when ascii is true), and non-empty when nonEmpty is.
func checkString(field string, s []byte, ascii bool, max int, nonEmpty bool) error {
	switch {
	case nonEmpty && len(s) == 0:
		return &fieldError{Field: field, Msg: "must not be empty"}
	case len(s) > max:
		return &fieldError{Field: field, Msg: fmt.Sprintf("must be at most %d bytes, got %d bytes", max, len(s))}
	case !ascii && !utf8.Valid(s):
		return &fieldError{Field: field, Msg: fmt.Sprintf("must be valid UTF-8, got %d bytes that are not", len(s))}
	}
	return nil
}

// readQuery reads the query parameters of ctx into b (reset): each of the
// allowed fields at most once, no other.
func (b *wireBody) readQuery(args *fasthttp.Args, allowed fieldSet) error {
	for k, v := range args.All() {
		f := fieldOf(k)
		if f&allowed == 0 {
			return &fieldError{Field: wire.Snippet(k), Msg: "unknown query parameter; expected one of " + allowed.list()}
		}
		if err := b.setQuery(f, v); err != nil {
			return err
		}
	}
	return nil
}

// setQuery sets field f from the value v of a query parameter, at most once:
// a string as it is, an integer in plain decimal digits.
func (b *wireBody) setQuery(f fieldSet, v []byte) error {
	if b.seen&f != 0 {
		return &fieldError{Field: f.name(), Msg: "given twice"}
	}
	b.seen |= f
	if f&intFields == 0 {
		return b.setString(f, v, false)
	}
	lo, hi := f.bounds()
	n, err := queryInt(f.name(), v, lo, hi)
	b.setInt(f, n)
	return err
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
		return 0, wire.RangeError(field, lo, hi, strconv.Quote(wire.Snippet(v)))
	}
	return n, nil
}
