package client

import (
	"errors"
	"iter"
	"strconv"

	"github.com/obol-dev/obol/internal/wire/jsonwire"
	"github.com/obol-dev/obol/internal/wire/replies"
)

// The wire format is the agent's JSON (its wire contract). Bodies
// are appended by hand into pooled buffers and replies read by a lenient
// reader over the agent's own lexer (internal/wire/jsonwire) that knows the
// reply shapes, so that a decision costs no allocation for encoding or
// decoding. Unknown reply fields are skipped (the contract lets the agent
// add fields), a field given twice counts as its last value, and integers
// must be written as integers.

// errMalformed is a 2xx reply the client cannot read: the agent (or
// whatever answered) is broken, so the client fails open.
var errMalformed = errors.New("client: malformed reply from the agent")

// appendString appends s as a JSON string. Control characters, '"' and '\'
// are escaped; bytes that are not valid UTF-8 are sent as they are and the
// agent refuses them, naming the field (bad_request).
func appendString(b []byte, s string) []byte { return jsonwire.AppendStringAsIs(b, s) }

// appendStringField appends ,"name":"value" (no comma after '{').
func appendStringField(b []byte, name, v string) []byte {
	return appendString(appendKey(b, name), v)
}

func appendIntField(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, name), v, 10)
}

func appendKey(b []byte, name string) []byte {
	if len(b) > 0 && b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendRequest appends the body of /v1/request (and of a batch item).
func appendRequest(b []byte, resource, domain string, copies, minCopies int) []byte {
	b = append(b, '{')
	b = appendStringField(b, "resource", resource)
	b = appendStringField(b, "domain", domain)
	b = appendIntField(b, "copies", int64(copies))
	b = appendIntField(b, "min_copies", int64(minCopies))
	return append(b, '}')
}

// ceilMs returns d in whole milliseconds, rounded up; 0 for d ≤ 0.
func ceilMs(d int64) int64 {
	if d <= 0 {
		return 0
	}
	return (d + 999_999) / 1_000_000
}

// scanner reads one JSON reply, leniently, over the lexer. A reply that is
// not JSON sets bad and every later read returns a zero value, so that a
// decoder checks once, at the end.
type scanner struct {
	lx      jsonwire.Lexer
	scratch []byte // strings unescaped (keys compared, values copied)
	bad     bool
}

func newScanner(b []byte) *scanner {
	return &scanner{lx: jsonwire.Lexer{B: b, LoneSurrogates: true}}
}

func (s *scanner) fail() { s.bad, s.lx.I = true, len(s.lx.B) }

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte { return s.lx.Peek() }

// end checks that nothing but space follows the reply.
func (s *scanner) end() error {
	if s.bad || !s.lx.Empty() {
		return errMalformed
	}
	return nil
}

// object begins an object, whose keys key then reads.
func (s *scanner) object() bool {
	if s.bad || s.lx.Object("") != nil {
		s.fail()
		return false
	}
	return true
}

// key reads the next member's key; ok false after the last, or at an
// error.
func (s *scanner) key() (k []byte, ok bool) {
	if s.bad {
		return nil, false
	}
	s.scratch = s.scratch[:0]
	k, ok, err := s.lx.Key("", &s.scratch)
	if err != nil {
		s.fail()
		return nil, false
	}
	return k, ok
}

// array begins an array, whose elements elem then moves to.
func (s *scanner) array() bool {
	if s.bad {
		return false
	}
	if _, err := s.lx.Array(""); err != nil {
		s.fail()
		return false
	}
	return true
}

// elem moves to the next element; false after the last, or at an error.
func (s *scanner) elem() bool {
	if s.bad {
		return false
	}
	more, err := s.lx.Elem("")
	if err != nil {
		s.fail()
		return false
	}
	return more
}

// members returns the keys of the object at s in turn; the caller reads
// (or skips) each member's value before the next key.
func (s *scanner) members() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for ok := s.object(); ok; {
			var k []byte
			if k, ok = s.key(); ok {
				ok = yield(k)
			}
		}
	}
}

// elems moves to the elements of the array at s in turn; the caller reads
// each.
func (s *scanner) elems() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, ok := 0, s.array(); ok && s.elem(); i++ {
			ok = yield(i)
		}
	}
}

// int reads a number written as an integer.
func (s *scanner) int() int64 {
	v, ok := s.lx.PlainInt()
	if !ok {
		s.fail()
	}
	return v
}

// bool reads true or false.
func (s *scanner) bool() bool {
	v, ok := s.lx.Bool()
	if !ok {
		s.fail()
	}
	return v
}

// str reads a string, unescaped.
func (s *scanner) str() string {
	if s.peek() != '"' {
		s.fail()
		return ""
	}
	v, err := s.lx.ReadString("", &s.scratch)
	if err != nil {
		s.fail()
		return ""
	}
	return string(v)
}

// skip reads any value and drops it.
func (s *scanner) skip() {
	if _, err := s.lx.SkipValue("", 0); err != nil {
		s.fail()
	}
}

// decodeDecision reads the reply of /v1/request (or a batch item that is a
// decision) into r, which it overwrites whole.
func decodeDecision(b []byte, r *Reply) error {
	s := newScanner(b)
	s.decision(r)
	return s.end()
}

// decision reads a decision reply, whose fields replies.Decision lists,
// into r: a limit the reply leaves out is NoLimit.
func (s *scanner) decision(r *Reply) {
	d := replies.Decision{HardLimit: NoLimit, GlobalLimit: NoLimit}
	seen := false
	for k := range s.members() {
		switch i, b := d.Field(k); {
		case i != nil:
			*i = s.int()
			seen = seen || i == &d.Granted
		case b != nil:
			*b = s.bool()
		default:
			s.skip()
		}
	}
	if !seen {
		s.fail() // not a decision
	}
	*r = Reply{
		Granted: int(d.Granted), Remaining: int(d.Remaining), RetryAfterMs: d.RetryAfterMs, ResetAfterMs: d.ResetAfterMs,
		Tier: int(d.Tier), TierLimit: int(d.TierLimit), TierHits: int(d.TierHits), Burst: d.Burst,
		HardLimit: int(d.HardLimit), GlobalLimit: int(d.GlobalLimit),
		DomainHitsLastSecond: int(d.DomainHitsLastSecond), GlobalHitsLastSecond: int(d.GlobalHitsLastSecond),
		LimitedByHard: d.LimitedByHard, LimitedByGlobal: d.LimitedByGlobal, Shadow: d.Shadow, Lenient: d.Lenient,
	}
}

// decodeError reads an error reply {"error": {"code", "message"}}; ok is
// false when b is not one.
func decodeError(b []byte) (code, msg string, ok bool) {
	s := newScanner(b)
	code, msg, ok = s.errorObject()
	return code, msg, ok && s.end() == nil
}

// errorObject reads {"error": {...}}.
func (s *scanner) errorObject() (code, msg string, ok bool) {
	for k := range s.members() {
		if string(k) != "error" {
			s.skip()
			continue
		}
		code, msg, ok = s.errorBody()
	}
	return code, msg, ok && !s.bad
}

// errorBody reads the object {"code", "message"}.
func (s *scanner) errorBody() (code, msg string, ok bool) {
	for k := range s.members() {
		switch string(k) {
		case "code":
			code, ok = s.str(), true
		case "message":
			msg = s.str()
		default:
			s.skip()
		}
	}
	return code, msg, ok
}

// decodeReservation reads the reply of /v1/reserve.
func decodeReservation(b []byte, r *ReserveReply) error {
	*r = ReserveReply{DomainLimit: NoLimit, GlobalLimit: NoLimit} // absent from the reply: none
	s := newScanner(b)
	seen := false
	for k := range s.members() {
		switch string(k) {
		case "granted":
			r.Granted, seen = int(s.int()), true
		case "hold":
			r.Hold = s.str()
		case "domain_limit":
			r.DomainLimit = int(s.int())
		case "global_limit":
			r.GlobalLimit = int(s.int())
		case "domain_holds":
			r.DomainHolds = int(s.int())
		case "global_holds":
			r.GlobalHolds = int(s.int())
		case "groups":
			r.Groups = s.groupHolds()
		case "shadow":
			r.Shadow = s.bool()
		case "lenient":
			r.Lenient = s.bool()
		default:
			s.skip()
		}
	}
	if !seen || (r.Granted > 0 && r.Hold == "") {
		return errMalformed
	}
	return s.end()
}

func (s *scanner) groupHolds() []GroupHolds {
	var gs []GroupHolds
	for range s.elems() {
		g := GroupHolds{Limit: NoLimit}
		for k := range s.members() {
			switch string(k) {
			case "name":
				g.Name = s.str()
			case "limit":
				g.Limit = int(s.int())
			case "holds":
				g.Holds = int(s.int())
			default:
				s.skip()
			}
		}
		gs = append(gs, g)
	}
	if s.bad {
		return nil
	}
	return gs
}

func (s *scanner) strings() []string {
	var out []string
	for range s.elems() {
		out = append(out, s.str())
	}
	if s.bad {
		return nil
	}
	return out
}

// seized is the reply of /v1/seize.
type seized struct {
	hold, resource, domain string
	groups                 []string
	copies                 int
}

func decodeSeized(b []byte) (seized, error) {
	var r seized
	s := newScanner(b)
	for k := range s.members() {
		switch string(k) {
		case "hold":
			r.hold = s.str()
		case "resource":
			r.resource = s.str()
		case "domain":
			r.domain = s.str()
		case "groups":
			r.groups = s.strings()
		case "copies":
			r.copies = int(s.int())
		default:
			s.skip()
		}
	}
	if r.hold == "" {
		return r, errMalformed
	}
	return r, s.end()
}

// decodeInts reads a flat reply of integer fields: the value of name1 into
// v1 and of name2 into v2 (name2 may be ""); name1 is required.
func decodeInts(b []byte, name1 string, v1 *int64, name2 string, v2 *int64) error {
	s := newScanner(b)
	seen := false
	for k := range s.members() {
		switch {
		case string(k) == name1:
			*v1, seen = s.int(), true
		case name2 != "" && string(k) == name2:
			*v2 = s.int()
		default:
			s.skip()
		}
	}
	if !seen {
		return errMalformed
	}
	return s.end()
}

// decodeStringField reads a flat reply's string field name, which is
// required and non-empty.
func decodeStringField(b []byte, name string) (string, error) {
	s := newScanner(b)
	var v string
	for k := range s.members() {
		if string(k) == name {
			v = s.str()
		} else {
			s.skip()
		}
	}
	if v == "" {
		return "", errMalformed
	}
	return v, s.end()
}

// decodeBatch reads the reply of /v1/batch into out, one result per item
// (len(out) items are expected). An item that is an error becomes an
// *APIError.
func decodeBatch(b []byte, out []BatchResult) error {
	s := newScanner(b)
	got := -1
	for k := range s.members() {
		if string(k) != "responses" {
			s.skip()
			continue
		}
		got = 0
		for range s.elems() {
			if got >= len(out) {
				return errMalformed
			}
			s.batchItem(&out[got])
			got++
		}
	}
	if got != len(out) || s.bad {
		return errMalformed
	}
	return s.end()
}

// batchItem reads one response of a batch: a decision or {"error": {...}}.
func (s *scanner) batchItem(r *BatchResult) {
	if s.peek() != '{' {
		s.fail()
		return
	}
	// Look at the first key: "error" means an error item.
	start := s.lx.I
	if k, ok := s.firstKey(); ok && string(k) == "error" {
		s.lx.I = start
		code, msg, ok := s.errorObject()
		if !ok {
			s.fail()
			return
		}
		r.Err = &APIError{Status: codeStatus(code), Code: code, Message: msg}
		return
	}
	if !s.bad {
		s.lx.I = start
		s.decision(&r.Decision.Reply)
	}
}

// firstKey reads the '{' of an object and its first key.
func (s *scanner) firstKey() ([]byte, bool) {
	if !s.object() {
		return nil, false
	}
	return s.key()
}

// codeStatus returns the HTTP status the contract gives an error code, for
// the errors of batch items, which carry no status of their own.
func codeStatus(code string) int {
	switch code {
	case "unknown_resource", "unknown_hold", "unknown_session", "unknown_transfer", "not_found":
		return 404
	case "wrong_kind", "over_release":
		return 409
	case "too_large":
		return 413
	}
	return 400
}
