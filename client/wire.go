package client

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The wire format is the agent's JSON (API.md). Bodies are appended by hand
// into pooled buffers and replies read by a small scanner that knows the
// reply shapes, so that a decision costs no allocation for encoding or
// decoding. Unknown reply fields are skipped: the contract lets the agent
// add fields.

// errMalformed is a 2xx reply the client cannot read: the agent (or
// whatever answered) is broken, so the client fails open.
var errMalformed = errors.New("client: malformed reply from the agent")

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Control characters, '"' and '\'
// are escaped; bytes that are not valid UTF-8 are sent as they are and the
// agent refuses them, naming the field (bad_request).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

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

// scanner reads one JSON reply. A syntax error sets bad and every later
// read returns a zero value, so that a decoder checks once, at the end.
type scanner struct {
	b   []byte
	i   int
	bad bool
}

// maxDepth bounds the nesting of a skipped value.
const maxDepth = 32

func (s *scanner) fail() { s.bad, s.i = true, len(s.b) }

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) expect(c byte) bool {
	if s.peek() != c {
		s.fail()
		return false
	}
	s.i++
	return true
}

// end checks that nothing but space follows the reply.
func (s *scanner) end() error {
	if s.peek() != 0 || s.bad {
		return errMalformed
	}
	return nil
}

// next moves to the next member of an object or element of an array
// closed by close, whose members read so far n counts; it returns false
// (having read close) at the end.
func (s *scanner) next(n *int, close byte) bool {
	c := s.peek()
	if c == close {
		s.i++
		return false
	}
	if *n > 0 {
		if c != ',' {
			s.fail()
			return false
		}
		s.i++
	}
	*n++
	return !s.bad
}

// key reads a member's key and the colon after it. A key with escapes is
// returned raw (it matches no known field and is skipped).
func (s *scanner) key() []byte {
	if !s.expect('"') {
		return nil
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			k := s.b[start:s.i]
			s.i++
			s.expect(':')
			return k
		case '\\':
			s.i++
		}
		s.i++
	}
	s.fail()
	return nil
}

// int reads an integer.
func (s *scanner) int() int64 {
	s.ws()
	neg := false
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	start := s.i
	var n int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if n > (1<<62)/10 {
			s.fail()
			return 0
		}
		n = n*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	if s.i == start {
		s.fail()
		return 0
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			s.fail() // the agent writes integers
			return 0
		}
	}
	if neg {
		return -n
	}
	return n
}

// bool reads true or false.
func (s *scanner) bool() bool {
	switch s.peek() {
	case 't':
		return s.literal("true")
	case 'f':
		s.literal("false")
		return false
	}
	s.fail()
	return false
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		s.fail()
		return false
	}
	s.i += len(lit)
	return true
}

// str reads a string, unescaped.
func (s *scanner) str() string {
	if !s.expect('"') {
		return ""
	}
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			s.fail()
			return ""
		}
		s.i++
	}
	s.fail()
	return ""
}

// escaped reads the rest of a string that started at start and has an
// escape at s.i.
func (s *scanner) escaped(start int) string {
	out := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(out)
		case c < 0x20:
			s.fail()
			return ""
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		s.i++
		if s.i >= len(s.b) {
			break
		}
		e := s.b[s.i]
		s.i++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := s.hex4()
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					s.i += 2
					r2 = s.hex4()
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			s.fail()
			return ""
		}
	}
	s.fail()
	return ""
}

func (s *scanner) hex4() rune {
	if len(s.b)-s.i < 4 {
		s.fail()
		return 0
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			s.fail()
			return 0
		}
	}
	s.i += 4
	return r
}

// skip reads any value and drops it.
func (s *scanner) skip() { s.skipDepth(0) }

func (s *scanner) skipDepth(depth int) {
	if depth > maxDepth {
		s.fail()
		return
	}
	switch c := s.peek(); {
	case c == '"':
		s.i++
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				s.i++
				return
			case '\\':
				s.i++
			}
			s.i++
		}
		s.fail()
	case c == '{':
		s.i++
		n := 0
		for s.next(&n, '}') {
			s.key()
			s.skipDepth(depth + 1)
		}
	case c == '[':
		s.i++
		n := 0
		for s.next(&n, ']') {
			s.skipDepth(depth + 1)
		}
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		s.i++
		for s.i < len(s.b) && isNumberByte(s.b[s.i]) {
			s.i++
		}
	default:
		s.fail()
	}
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// decodeDecision reads the reply of /v1/request (or a batch item that is a
// decision) into r, which it overwrites whole.
func decodeDecision(b []byte, r *Reply) error {
	s := scanner{b: b}
	s.decision(r)
	return s.end()
}

func (s *scanner) decision(r *Reply) {
	*r = Reply{HardLimit: NoLimit, GlobalLimit: NoLimit} // absent from the reply: none
	if !s.expect('{') {
		return
	}
	n := 0
	seen := false
	for s.next(&n, '}') {
		switch string(s.key()) {
		case "granted":
			r.Granted, seen = int(s.int()), true
		case "remaining":
			r.Remaining = int(s.int())
		case "retry_after_ms":
			r.RetryAfterMs = s.int()
		case "reset_after_ms":
			r.ResetAfterMs = s.int()
		case "tier":
			r.Tier = int(s.int())
		case "tier_limit":
			r.TierLimit = int(s.int())
		case "tier_hits":
			r.TierHits = int(s.int())
		case "burst":
			r.Burst = s.bool()
		case "hard_limit":
			r.HardLimit = int(s.int())
		case "global_limit":
			r.GlobalLimit = int(s.int())
		case "domain_hits_last_second":
			r.DomainHitsLastSecond = int(s.int())
		case "global_hits_last_second":
			r.GlobalHitsLastSecond = int(s.int())
		case "limited_by_hard":
			r.LimitedByHard = s.bool()
		case "limited_by_global":
			r.LimitedByGlobal = s.bool()
		case "shadow":
			r.Shadow = s.bool()
		case "lenient":
			r.Lenient = s.bool()
		default:
			s.skip()
		}
	}
	if !seen {
		s.fail() // not a decision
	}
}

// decodeError reads an error reply {"error": {"code", "message"}}; ok is
// false when b is not one.
func decodeError(b []byte) (code, msg string, ok bool) {
	s := scanner{b: b}
	code, msg, ok = s.errorObject()
	return code, msg, ok && s.end() == nil
}

// errorObject reads {"error": {...}}.
func (s *scanner) errorObject() (code, msg string, ok bool) {
	if !s.expect('{') {
		return "", "", false
	}
	n := 0
	for s.next(&n, '}') {
		if string(s.key()) != "error" {
			s.skip()
			continue
		}
		code, msg, ok = s.errorBody()
	}
	return code, msg, ok && !s.bad
}

// errorBody reads the object {"code", "message"}.
func (s *scanner) errorBody() (code, msg string, ok bool) {
	if !s.expect('{') {
		return "", "", false
	}
	n := 0
	for s.next(&n, '}') {
		switch string(s.key()) {
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
	s := scanner{b: b}
	if !s.expect('{') {
		return errMalformed
	}
	n := 0
	seen := false
	for s.next(&n, '}') {
		switch string(s.key()) {
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
	if !s.expect('[') {
		return nil
	}
	var gs []GroupHolds
	n := 0
	for s.next(&n, ']') {
		g := GroupHolds{Limit: NoLimit}
		if !s.expect('{') {
			return nil
		}
		m := 0
		for s.next(&m, '}') {
			switch string(s.key()) {
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
	return gs
}

func (s *scanner) strings() []string {
	if !s.expect('[') {
		return nil
	}
	var out []string
	n := 0
	for s.next(&n, ']') {
		out = append(out, s.str())
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
	s := scanner{b: b}
	if !s.expect('{') {
		return r, errMalformed
	}
	n := 0
	for s.next(&n, '}') {
		switch string(s.key()) {
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
	s := scanner{b: b}
	if !s.expect('{') {
		return errMalformed
	}
	n := 0
	seen := false
	for s.next(&n, '}') {
		switch k := s.key(); {
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
	s := scanner{b: b}
	if !s.expect('{') {
		return "", errMalformed
	}
	var v string
	n := 0
	for s.next(&n, '}') {
		if string(s.key()) == name {
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
	s := scanner{b: b}
	if !s.expect('{') {
		return errMalformed
	}
	got := -1
	n := 0
	for s.next(&n, '}') {
		if string(s.key()) != "responses" {
			s.skip()
			continue
		}
		if !s.expect('[') {
			return errMalformed
		}
		got = 0
		m := 0
		for s.next(&m, ']') {
			if got >= len(out) {
				return errMalformed
			}
			s.batchItem(&out[got])
			got++
		}
	}
	if got != len(out) {
		return errMalformed
	}
	return s.end()
}

// batchItem reads one response of a batch: a decision or {"error": {...}}.
func (s *scanner) batchItem(r *BatchResult) {
	start := s.i
	if s.peek() != '{' {
		s.fail()
		return
	}
	// Look at the first key: "error" means an error item.
	probe := scanner{b: s.b, i: s.i + 1}
	if probe.peek() == '"' && string(probe.key()) == "error" {
		code, msg, ok := s.errorObject()
		if !ok {
			s.fail()
			return
		}
		r.Err = &APIError{Status: codeStatus(code), Code: code, Message: msg}
		return
	}
	s.i = start
	s.decision(&r.Decision.Reply)
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
