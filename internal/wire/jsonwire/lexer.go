package jsonwire

import (
	"fmt"

	"github.com/obol-dev/obol/internal/wire"
)

// MaxDepth bounds the nesting SkipValue accepts (a raw resource config is a
// few levels deep); deeper input is refused rather than recursed into.
const MaxDepth = 32

// Lexer reads one JSON text in place. Set B (and LoneSurrogates) and read;
// I is the offset of the next byte. Every error is a *wire.FieldError
// naming the value being read.
type Lexer struct {
	B []byte
	I int
	// ASCII is true when the last string ReadString returned was all
	// ASCII, without escapes: its UTF-8 needs no check.
	ASCII bool
	// LoneSurrogates makes a \u escape of half a surrogate pair read as
	// U+FFFD instead of an error (the lenient rule).
	LoneSurrogates bool
	// first is true between the opening of an object or an array by Object
	// or Array and its first member: a member after another needs a comma.
	first bool
}

var _ wire.Reader = (*Lexer)(nil)

// Reset makes l read b, with the strict rules.
func (l *Lexer) Reset(b []byte) { *l = Lexer{B: b} }

// WS skips whitespace.
func (l *Lexer) WS() {
	if l.I < len(l.B) && l.B[l.I] > ' ' {
		return // the common case, compact JSON
	}
	for l.I < len(l.B) {
		switch l.B[l.I] {
		case ' ', '\t', '\n', '\r':
			l.I++
		default:
			return
		}
	}
}

// Syntax is the error for malformed JSON met while reading field.
func (l *Lexer) Syntax(field, what string) error {
	return &wire.FieldError{Field: field, Msg: fmt.Sprintf("invalid JSON at byte %d: %s", l.I, what)}
}

// EOF reports whether the text ended; it assumes WS was called.
func (l *Lexer) EOF() bool { return l.I >= len(l.B) }

// Peek skips whitespace and returns the next byte, or 0 at the end.
func (l *Lexer) Peek() byte {
	l.WS()
	if l.EOF() {
		return 0
	}
	return l.B[l.I]
}

// OpenObject consumes the '{' of an object of field.
func (l *Lexer) OpenObject(field string) error {
	l.WS()
	if l.EOF() {
		return l.Syntax(field, "unexpected end of body, expected an object")
	}
	if l.B[l.I] != '{' {
		return &wire.FieldError{Field: field, Msg: "must be a JSON object, got " + l.Describe()}
	}
	l.I++
	return nil
}

// OpenArray consumes the '[' of an array of field.
func (l *Lexer) OpenArray(field string) error {
	l.WS()
	if l.EOF() {
		return l.Syntax(field, "unexpected end of body, expected an array")
	}
	if l.B[l.I] != '[' {
		if !l.ValueStart() {
			return l.Syntax(field, "expected a value")
		}
		return &wire.FieldError{Field: field, Msg: "must be an array, got " + l.Describe()}
	}
	l.I++
	return nil
}

// Empty reports whether nothing but whitespace is left.
func (l *Lexer) Empty() bool {
	l.WS()
	return l.EOF()
}

// Object begins an object of field (OpenObject), whose keys Key reads.
func (l *Lexer) Object(field string) error {
	l.first = true
	return l.OpenObject(field)
}

// Key reads the next key of the object Object began, and the ':' after it,
// unescaping it into scratch when it has escapes. It returns ok false at the
// closing '}' (consumed).
func (l *Lexer) Key(field string, scratch *[]byte) (key []byte, ok bool, err error) {
	l.WS()
	if l.EOF() {
		return nil, false, l.Syntax(field, "unexpected end of body inside an object")
	}
	c := l.B[l.I]
	if c == '}' {
		l.I++
		l.first = false
		return nil, false, nil
	}
	if !l.first {
		if c != ',' {
			return nil, false, l.Syntax(field, "expected ',' or '}' after a field")
		}
		l.I++
		l.WS()
		if l.EOF() || l.B[l.I] != '"' {
			return nil, false, l.Syntax(field, "expected a field name after ','")
		}
	} else if c != '"' {
		return nil, false, l.Syntax(field, "expected a field name or '}'")
	}
	l.first = false
	key, err = l.ReadString(field, scratch)
	if err != nil {
		return nil, false, err
	}
	l.WS()
	if l.EOF() || l.B[l.I] != ':' {
		return nil, false, l.Syntax(field, "expected ':' after a field name")
	}
	l.I++
	return key, true, nil
}

// NextKey is Key in an object whose '{' was consumed (OpenObject) and n
// of whose keys were read.
func (l *Lexer) NextKey(field string, n int, scratch *[]byte) (key []byte, ok bool, err error) {
	l.first = n == 0
	return l.Key(field, scratch)
}

// Array begins an array of field (OpenArray), whose elements Elem moves
// to. JSON does not say the array's length first: n is -1.
func (l *Lexer) Array(field string) (n int, err error) {
	l.first = true
	return -1, l.OpenArray(field)
}

// Elem moves to the next element of the array Array began: false at its
// closing ']' (consumed).
func (l *Lexer) Elem(field string) (bool, error) {
	l.WS()
	if l.EOF() {
		return false, l.Syntax(field, "unexpected end of body inside an array")
	}
	c := l.B[l.I]
	if c == ']' {
		l.I++
		l.first = false
		return false, nil
	}
	if !l.first {
		if c != ',' {
			return false, l.Syntax(field, "expected ',' or ']' after an element")
		}
		l.I++
		l.WS()
		if l.EOF() || l.B[l.I] == ']' {
			return false, l.Syntax(field, "expected an element after ','")
		}
	}
	l.first = false
	return true, nil
}

// NextElem is Elem in an array whose '[' was consumed (OpenArray) and n of
// whose elements were read.
func (l *Lexer) NextElem(field string, n int) (bool, error) {
	l.first = n == 0
	return l.Elem(field)
}

// Mark returns where l is.
func (l *Lexer) Mark() wire.Mark { return wire.NewMark(l.I, 0) }

// SkipFrom moves l back to m and steps over the value there (SkipValue, one
// level deep).
func (l *Lexer) SkipFrom(m wire.Mark, field string) error {
	l.I, _ = m.At()
	l.first = false
	_, err := l.SkipValue(field, 1)
	return err
}

// End checks that nothing but whitespace follows the top-level value.
func (l *Lexer) End() error {
	l.WS()
	if !l.EOF() {
		return l.Syntax("body", "unexpected data after the JSON object")
	}
	return nil
}

// Str reads a string value of field (the strict rule: nothing else is a
// string); ascii reports it all ASCII without escapes.
func (l *Lexer) Str(field string, scratch *[]byte) (s []byte, ascii bool, err error) {
	l.WS()
	if l.EOF() {
		return nil, false, l.Syntax(field, "unexpected end of body, expected a value")
	}
	if l.B[l.I] != '"' {
		if !l.ValueStart() {
			return nil, false, l.Syntax(field, "expected a value")
		}
		return nil, false, &wire.FieldError{Field: field, Msg: "must be a string, got " + l.Describe()}
	}
	s, err = l.ReadString(field, scratch)
	return s, l.ASCII, err
}

// Integer reads an integer value of field in [lo, hi] (the strict rule). A
// number with an exponent or a decimal point is accepted when its value is
// a whole number (1e3, 2.0); one with a fraction, out of range, or not a
// number is refused.
func (l *Lexer) Integer(field string, lo, hi int64) (int64, error) {
	l.WS()
	if l.EOF() {
		return 0, l.Syntax(field, "unexpected end of body, expected a value")
	}
	c := l.B[l.I]
	if c != '-' && (c < '0' || c > '9') {
		if !l.ValueStart() {
			return 0, l.Syntax(field, "expected a value")
		}
		return 0, wire.RangeError(field, lo, hi, l.Describe())
	}
	if v, end, ok := SmallInt(l.B, l.I); ok {
		if v >= lo && v <= hi {
			l.I = end
			return v, nil
		}
	}
	start := l.I
	end, ok := ScanNumber(l.B, l.I)
	l.I = end
	if !ok {
		return 0, l.Syntax(field, "malformed number")
	}
	v, ok := ExactInt(l.B[start:end])
	if !ok || v < lo || v > hi {
		return 0, wire.RangeError(field, lo, hi, wire.Snippet(l.B[start:end]))
	}
	return v, nil
}

// Boolean reads a value of field that is true or false; anything else is
// refused, naming what it is.
func (l *Lexer) Boolean(field string) (bool, error) {
	l.WS()
	if l.EOF() {
		return false, l.Syntax(field, "unexpected end of body, expected a value")
	}
	if v, ok := l.Bool(); ok {
		return v, nil
	}
	if !l.ValueStart() {
		return false, l.Syntax(field, "expected a value")
	}
	return false, &wire.FieldError{Field: field, Msg: "must be true or false, got " + l.Describe()}
}

// PlainInt reads a number written as an integer (the lenient rule of
// replies: the agent writes integers): an optional '-' and digits, of
// magnitude at most 4611686018427387909 (a guard against overflow; the
// agent's integers are far smaller); ok is false for anything else, a
// fraction or an exponent included.
func (l *Lexer) PlainInt() (v int64, ok bool) {
	l.WS()
	if u, end, ok := SmallInt(l.B, l.I); ok {
		l.I = end
		return u, true
	}
	start := l.I
	end, ok := ScanNumber(l.B, l.I)
	l.I = end
	if !ok {
		return 0, false
	}
	tok := l.B[start:end]
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	for _, c := range tok {
		if c < '0' || c > '9' || v > (1<<62)/10 {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// Bool reads true or false; ok is false for anything else.
func (l *Lexer) Bool() (v, ok bool) {
	switch l.Peek() {
	case 't':
		return true, l.literal("true")
	case 'f':
		return false, l.literal("false")
	}
	return false, false
}

// literal consumes lit, which must be next, ended by a delimiter.
func (l *Lexer) literal(lit string) bool {
	if !hasPrefix(l.B[l.I:], lit) {
		return false
	}
	l.I += len(lit)
	return true
}

// ValueStart reports whether the byte at I can start a JSON value.
func (l *Lexer) ValueStart() bool {
	switch c := l.B[l.I]; {
	case c == '"' || c == '{' || c == '[' || c == '-' || c == 't' || c == 'f' || c == 'n':
		return true
	case c >= '0' && c <= '9':
		return true
	}
	return false
}

// Describe renders the value at I for an error message, without consuming it.
func (l *Lexer) Describe() string {
	if l.EOF() {
		return "nothing"
	}
	switch c := l.B[l.I]; c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		end := l.I + 1
		for end < len(l.B) && l.B[end] != '"' {
			if l.B[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(l.B) {
			end = len(l.B) - 1
		}
		return "string " + wire.Snippet(l.B[l.I:end+1])
	case 't', 'f', 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if hasPrefix(l.B[l.I:], lit) {
				return lit
			}
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			end, _ := ScanNumber(l.B, l.I)
			return wire.Snippet(l.B[l.I:end])
		}
	}
	return "invalid JSON"
}

func hasPrefix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[:len(s)]) == s
}

// SkipValue reads and checks any JSON value of field, nested at most
// MaxDepth levels below depth, and returns its raw bytes: how a value
// handed whole to another parser (a resource config) is read, and how an
// unknown or refused one is stepped over.
func (l *Lexer) SkipValue(field string, depth int) ([]byte, error) {
	l.WS()
	if l.EOF() {
		return nil, l.Syntax(field, "unexpected end of body, expected a value")
	}
	if depth > MaxDepth {
		return nil, l.Syntax(field, fmt.Sprintf("nested deeper than %d levels", MaxDepth))
	}
	start := l.I
	var scratch []byte // what is unescaped is dropped
	switch c := l.B[l.I]; {
	case c == '{' || c == '[':
		l.I++
		for n := 0; ; n++ {
			var more bool
			var err error
			if c == '{' {
				scratch = scratch[:0]
				_, more, err = l.NextKey(field, n, &scratch)
			} else {
				more, err = l.NextElem(field, n)
			}
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
			if _, err := l.SkipValue(field, depth+1); err != nil {
				return nil, err
			}
		}
	case c == '"':
		if _, err := l.ReadString(field, &scratch); err != nil {
			return nil, err
		}
	case c == '-' || (c >= '0' && c <= '9'):
		end, ok := ScanNumber(l.B, l.I)
		l.I = end
		if !ok {
			return nil, l.Syntax(field, "malformed number")
		}
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if hasPrefix(l.B[l.I:], lit) {
				l.I += len(lit)
				return l.B[start:l.I], nil
			}
		}
		return nil, l.Syntax(field, "expected a value")
	}
	return l.B[start:l.I], nil
}
