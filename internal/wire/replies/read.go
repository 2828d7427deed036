package replies

import (
	"errors"
	"iter"

	"github.com/obol-dev/obol/internal/wire/jsonwire"
)

// ErrMalformed is the error of a JSON reply a Read function cannot read: it
// is not JSON, not the reply's shape, or lacks a field the reply always
// has.
var ErrMalformed = errors.New("malformed reply")

// The Read functions read the JSON replies the Append functions write,
// leniently, over the agent's own lexer (jsonwire): unknown fields are
// skipped (the agent may add fields), a field given twice counts as its
// last value, integers must be written as integers, and a string is
// unescaped (a lone surrogate escape reads as U+FFFD). A field the reply
// leaves out reads as its zero value, or NoLimit for a limit. Reading a
// decision allocates nothing; strings read are copied out of the body.

// reader reads one JSON reply over the lexer. A reply that is not JSON
// sets bad and every later read returns a zero value, so that a Read
// function checks once, at the end.
type reader struct {
	lx      jsonwire.Lexer
	scratch []byte // strings unescaped (keys compared, values copied)
	bad     bool
}

func newReader(b []byte) *reader {
	return &reader{lx: jsonwire.Lexer{B: b, LoneSurrogates: true}}
}

func (s *reader) fail() { s.bad, s.lx.I = true, len(s.lx.B) }

// peek returns the next non-space byte, or 0 at the end.
func (s *reader) peek() byte { return s.lx.Peek() }

// end checks that nothing but space follows the reply.
func (s *reader) end() error {
	if s.bad || !s.lx.Empty() {
		return ErrMalformed
	}
	return nil
}

// object begins an object, whose keys key then reads.
func (s *reader) object() bool {
	if s.bad || s.lx.Object("") != nil {
		s.fail()
		return false
	}
	return true
}

// key reads the next member's key; ok false after the last, or at an
// error.
func (s *reader) key() (k []byte, ok bool) {
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
func (s *reader) array() bool {
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
func (s *reader) elem() bool {
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
func (s *reader) members() iter.Seq[[]byte] {
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
func (s *reader) elems() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, ok := 0, s.array(); ok && s.elem(); i++ {
			ok = yield(i)
		}
	}
}

// int reads a number written as an integer.
func (s *reader) int() int64 {
	v, ok := s.lx.PlainInt()
	if !ok {
		s.fail()
	}
	return v
}

// bool reads true or false.
func (s *reader) bool() bool {
	v, ok := s.lx.Bool()
	if !ok {
		s.fail()
	}
	return v
}

// str reads a string, unescaped.
func (s *reader) str() string {
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

// strings reads an array of strings (nil when it is not one).
func (s *reader) strings() []string {
	var out []string
	for range s.elems() {
		out = append(out, s.str())
	}
	if s.bad {
		return nil
	}
	return out
}

// skip reads any value and drops it.
func (s *reader) skip() {
	if _, err := s.lx.SkipValue("", 0); err != nil {
		s.fail()
	}
}

// firstKey reads the '{' of an object and its first key.
func (s *reader) firstKey() ([]byte, bool) {
	if !s.object() {
		return nil, false
	}
	return s.key()
}

// ReadDecision reads a decision reply (AppendDecision's) into d, which it
// overwrites whole: a limit the reply leaves out is NoLimit, and Tiers is
// false. granted is required.
func ReadDecision(b []byte, d *Decision) error {
	s := newReader(b)
	s.decision(d)
	return s.end()
}

// decision reads a decision reply into d.
func (s *reader) decision(d *Decision) {
	*d = Decision{HardLimit: NoLimit, GlobalLimit: NoLimit}
	seen := false
	for k := range s.members() {
		switch i, b := d.Field(k); {
		case i != nil:
			*i = s.int()
			seen = seen || i == &d.Granted
		case b != nil:
			*b = s.bool()
		case string(k) == nTicket:
			d.Ticket = s.str()
		default:
			s.skip()
		}
	}
	if !seen {
		s.fail() // not a decision
	}
}

// ReadError reads an error reply (AppendError's) and returns its code and
// message; ok is false when b is not one (code is required).
func ReadError(b []byte) (code, msg string, ok bool) {
	s := newReader(b)
	code, msg, ok = s.errorObject()
	return code, msg, ok && s.end() == nil
}

// errorObject reads {"error": {...}}.
func (s *reader) errorObject() (code, msg string, ok bool) {
	for k := range s.members() {
		if string(k) != nError {
			s.skip()
			continue
		}
		code, msg, ok = s.errorBody()
	}
	return code, msg, ok && !s.bad
}

// errorBody reads the object {"code", "message"}.
func (s *reader) errorBody() (code, msg string, ok bool) {
	for k := range s.members() {
		switch string(k) {
		case nCode:
			code, ok = s.str(), true
		case nMessage:
			msg = s.str()
		default:
			s.skip()
		}
	}
	return code, msg, ok
}

// ReadBatch reads the reply of a batch, {"responses": [...]}, whose n
// items are each a decision or an error object. For item i it calls each,
// with the decision read into *d (AppendDecision's, as ReadDecision reads
// it) or, for an error item, isErr true with its code and message. A reply
// of other than n items is ErrMalformed (each may have been called for the
// first ones).
func ReadBatch(b []byte, n int, d *Decision, each func(i int, isErr bool, code, msg string)) error {
	s := newReader(b)
	got := -1
	for k := range s.members() {
		if string(k) != nResponses {
			s.skip()
			continue
		}
		got = 0
		for range s.elems() {
			if got >= n {
				return ErrMalformed
			}
			if !s.batchItem(got, d, each) {
				return ErrMalformed
			}
			got++
		}
	}
	if got != n || s.bad {
		return ErrMalformed
	}
	return s.end()
}

// batchItem reads item i of a batch: a decision or {"error": {...}}.
func (s *reader) batchItem(i int, d *Decision, each func(i int, isErr bool, code, msg string)) bool {
	if s.peek() != '{' {
		s.fail()
		return false
	}
	// Look at the first key: "error" means an error item.
	start := s.lx.I
	if k, ok := s.firstKey(); ok && string(k) == nError {
		s.lx.I = start
		code, msg, ok := s.errorObject()
		if !ok {
			s.fail()
			return false
		}
		each(i, true, code, msg)
		return true
	}
	if s.bad {
		return false
	}
	s.lx.I = start
	s.decision(d)
	if s.bad {
		return false
	}
	each(i, false, "", "")
	return true
}

// ReadBool reads a reply of one boolean member name, which is required
// (other members are skipped): the reply of a reset ("reset").
func ReadBool(b []byte, name string) (bool, error) {
	s := newReader(b)
	var v, seen bool
	for k := range s.members() {
		if string(k) == name {
			v, seen = s.bool(), true
		} else {
			s.skip()
		}
	}
	if !seen {
		return false, ErrMalformed
	}
	return v, s.end()
}

// ReadInt reads a reply of one integer member name, which is required
// (other members are skipped): the reply of a refund ("remaining") or the
// wait of a pacing ("wait_ms").
func ReadInt(b []byte, name string) (int64, error) {
	s := newReader(b)
	var v int64
	seen := false
	for k := range s.members() {
		if string(k) == name {
			v, seen = s.int(), true
		} else {
			s.skip()
		}
	}
	if !seen {
		return 0, ErrMalformed
	}
	return v, s.end()
}
