package mpwire

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/internal/wire/jsonwire"
)

// MaxDepth bounds the nesting Skip and AppendJSON accept; deeper input is
// refused rather than recursed into.
const MaxDepth = jsonwire.MaxDepth

// Syntax is the error for malformed MessagePack met while reading field.
func (r *Reader) Syntax(field, what string) error {
	return &wire.FieldError{Field: field, Msg: fmt.Sprintf("invalid MessagePack at byte %d: %s", r.i, what)}
}

// peek is Peek with the strict layer's error.
func (r *Reader) peek(field string) (byte, error) {
	if r.EOF() {
		return 0, r.Syntax(field, "unexpected end of body, expected a value")
	}
	return r.b[r.i], nil
}

// fail turns an error of the typed layer, for a value whose code was
// checked (so a truncated one), into a syntax error of field.
func (r *Reader) fail(field string, err error) error {
	if err == ErrTruncated {
		return r.Syntax(field, "unexpected end of body")
	}
	return r.Syntax(field, err.Error())
}

var _ wire.Reader = (*Reader)(nil)

// Empty reports whether the body is empty.
func (r *Reader) Empty() bool { return len(r.b) == 0 }

// Object begins a map of field, for Key.
func (r *Reader) Object(field string) error {
	n, err := r.openMap(field)
	if err != nil {
		return err
	}
	return r.push(field, n)
}

// Key reads the next key of the map Object began: ok false after the last.
func (r *Reader) Key(field string, _ *[]byte) (key []byte, ok bool, err error) {
	if !r.next() {
		return nil, false, nil
	}
	key, err = r.key(field)
	return key, err == nil, err
}

// Array begins an array of field, for Elem, and returns its length.
func (r *Reader) Array(field string) (n int, err error) {
	if n, err = r.openArray(field); err != nil {
		return 0, err
	}
	return n, r.push(field, n)
}

// Elem moves to the next element of the array Array began: false after the
// last.
func (r *Reader) Elem(string) (bool, error) { return r.next(), nil }

// push notes a map or an array of n members.
func (r *Reader) push(field string, n int) error {
	if r.depth == len(r.left) { // no body nests this deep
		return r.Syntax(field, fmt.Sprintf("nested deeper than %d levels", len(r.left)))
	}
	r.left[r.depth] = n
	r.depth++
	return nil
}

// next reports whether the innermost map or array has a member left,
// counting it read; after the last it closes it.
func (r *Reader) next() bool {
	if r.left[r.depth-1] == 0 {
		r.depth--
		return false
	}
	r.left[r.depth-1]--
	return true
}

// Mark returns where r is.
func (r *Reader) Mark() wire.Mark { return wire.NewMark(r.i, r.depth) }

// SkipFrom moves r back to m and steps over the value there (Skip, one
// level deep).
func (r *Reader) SkipFrom(m wire.Mark, field string) error {
	r.i, r.depth = m.At()
	return r.Skip(field, 1)
}

// openMap reads the header of a map of field and returns its length.
func (r *Reader) openMap(field string) (int, error) {
	c, err := r.peek(field)
	if err != nil {
		return 0, err
	}
	if !IsMap(c) {
		msg := "must be a map, got " + r.Describe()
		if c == '{' && r.i == 0 {
			msg += " (the body looks like JSON: send it with Content-Type: application/json)"
		}
		return 0, &wire.FieldError{Field: field, Msg: msg}
	}
	n, err := r.MapLen()
	if err != nil {
		return 0, r.fail(field, err)
	}
	return n, nil
}

// openArray reads the header of an array of field and returns its length.
func (r *Reader) openArray(field string) (int, error) {
	c, err := r.peek(field)
	if err != nil {
		return 0, err
	}
	if !IsArray(c) {
		return 0, &wire.FieldError{Field: field, Msg: "must be an array, got " + r.Describe()}
	}
	n, err := r.ArrayLen()
	if err != nil {
		return 0, r.fail(field, err)
	}
	return n, nil
}

// key reads a key of the map of field: a string.
func (r *Reader) key(field string) ([]byte, error) {
	return r.strOf(field, "a field name must be a string, got ")
}

// Str reads a string value of field, a sub-slice of the body; binary data
// is not a string. The UTF-8 is not checked: ascii is false.
func (r *Reader) Str(field string, _ *[]byte) (s []byte, ascii bool, err error) {
	s, err = r.str(field)
	return s, false, err
}

// Boolean reads a bool value of field; anything else is refused, naming
// what it is.
func (r *Reader) Boolean(field string) (bool, error) {
	c, err := r.peek(field)
	if err != nil {
		return false, err
	}
	if !IsBool(c) {
		return false, &wire.FieldError{Field: field, Msg: "must be true or false, got " + r.Describe()}
	}
	return r.Bool()
}

func (r *Reader) str(field string) ([]byte, error) { return r.strOf(field, "must be a string, got ") }

// strOf reads a str of field; anything else is refused with notStr and
// what it is.
func (r *Reader) strOf(field, notStr string) ([]byte, error) {
	c, err := r.peek(field)
	if err != nil {
		return nil, err
	}
	if !IsStr(c) {
		return nil, &wire.FieldError{Field: field, Msg: notStr + r.Describe()}
	}
	return r.readBytes(field)
}

// readBytes reads the str or binary data at r, whose code was checked, as
// a sub-slice of the input.
func (r *Reader) readBytes(field string) ([]byte, error) {
	n, err := r.BytesLen()
	if err != nil {
		return nil, r.fail(field, err)
	}
	return r.take(field, n)
}

// take is Take with the strict layer's error.
func (r *Reader) take(field string, n int) ([]byte, error) {
	s, err := r.Take(n)
	if err != nil {
		return nil, r.Syntax(field, fmt.Sprintf("unexpected end of body inside a value of %d bytes", n))
	}
	return s, nil
}

// Integer reads an integer value of field in [lo, hi]. Like the JSON
// reader, it takes a float whose value is a whole number in range (2.0) and
// refuses one with a fraction, a NaN or an infinity.
func (r *Reader) Integer(field string, lo, hi int64) (int64, error) {
	c, err := r.peek(field)
	if err != nil {
		return 0, err
	}
	switch {
	case c == codeUint64:
		u, err := r.Uint()
		if err != nil {
			return 0, r.fail(field, err)
		}
		if u > uint64(math.MaxInt64) || int64(u) < lo || int64(u) > hi {
			return 0, wire.RangeError(field, lo, hi, strconv.FormatUint(u, 10))
		}
		return int64(u), nil
	case IsInt(c):
		v, err := r.Int()
		if err != nil {
			return 0, r.fail(field, err)
		}
		if v < lo || v > hi {
			return 0, wire.RangeError(field, lo, hi, strconv.FormatInt(v, 10))
		}
		return v, nil
	case IsFloat(c):
		f, err := r.Float()
		if err != nil {
			return 0, r.fail(field, err)
		}
		if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
			return 0, wire.RangeError(field, lo, hi, strconv.FormatFloat(f, 'g', -1, 64))
		}
		return int64(f), nil
	}
	return 0, wire.RangeError(field, lo, hi, r.Describe())
}

// End checks that nothing follows the top-level value.
func (r *Reader) End() error {
	if !r.EOF() {
		return r.Syntax("body", "unexpected data after the MessagePack map")
	}
	return nil
}

// Describe renders the value at r for an error message, without consuming
// it.
func (r *Reader) Describe() string {
	if r.EOF() {
		return "nothing"
	}
	at := r.i
	defer r.Seek(at)
	switch c := r.b[at]; {
	case IsMap(c):
		return "a map"
	case IsArray(c):
		return "an array"
	case c == codeNil:
		return "nil"
	case c == codeTrue:
		return "true"
	case c == codeFalse:
		return "false"
	case IsBin(c):
		return "binary data"
	case IsExt(c):
		return "an extension"
	case IsStr(c):
		s, err := r.readBytes("")
		if err != nil {
			return "a truncated string"
		}
		return "string " + strconv.Quote(wire.Snippet(s))
	case c == codeUint64:
		if u, err := r.Uint(); err == nil {
			return strconv.FormatUint(u, 10)
		}
	case IsInt(c):
		if v, err := r.Int(); err == nil {
			return strconv.FormatInt(v, 10)
		}
	case IsFloat(c):
		if f, err := r.Float(); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	default:
		return fmt.Sprintf("the reserved code 0x%02x", c) // 0xc1, the only one left
	}
	return "a truncated number"
}

// Skip reads and checks any value of field, nested at most MaxDepth levels
// below depth: how a value refused alone (a batch item) is stepped over.
// Strings, binary data and extensions are stepped over without reading
// them.
func (r *Reader) Skip(field string, depth int) error {
	c, err := r.peek(field)
	if err != nil {
		return err
	}
	if depth > MaxDepth {
		return r.Syntax(field, fmt.Sprintf("nested deeper than %d levels", MaxDepth))
	}
	switch {
	case IsMap(c) || IsArray(c):
		var n int
		if IsMap(c) {
			n, err = r.MapLen()
			n *= 2
		} else {
			n, err = r.ArrayLen()
		}
		if err != nil {
			return r.fail(field, err)
		}
		for range n {
			if err := r.Skip(field, depth+1); err != nil {
				return err
			}
		}
		return nil
	case IsStr(c) || IsBin(c):
		_, err := r.readBytes(field)
		return err
	case IsExt(c):
		_, n, err := r.ExtHeader()
		if err != nil {
			return r.fail(field, err)
		}
		_, err = r.take(field, n)
		return err
	case c == codeReserved:
		return r.Syntax(field, "the reserved code 0xc1")
	}
	if err := r.skipScalar(c); err != nil { // a number, a bool or nil: at most 9 bytes
		return r.fail(field, err)
	}
	return nil
}

// AppendJSON appends the value of field at r as JSON: how a resource config
// sent in MessagePack reaches the config parser, which reads JSON. Keys
// must be strings and strings valid UTF-8; binary data, extensions, NaN and
// infinities have no JSON form and are refused. Off the hot path.
func (r *Reader) AppendJSON(out []byte, field string, depth int) ([]byte, error) {
	c, err := r.peek(field)
	if err != nil {
		return nil, err
	}
	if depth > MaxDepth {
		return nil, r.Syntax(field, fmt.Sprintf("nested deeper than %d levels", MaxDepth))
	}
	switch {
	case IsMap(c):
		n, err := r.openMap(field)
		if err != nil {
			return nil, err
		}
		out = append(out, '{')
		for i := range n {
			if i > 0 {
				out = append(out, ',')
			}
			k, err := r.key(field)
			if err != nil {
				return nil, err
			}
			if !utf8.Valid(k) {
				return nil, &wire.FieldError{Field: field, Msg: "a field name must be valid UTF-8"}
			}
			out = jsonwire.AppendString(out, k)
			out = append(out, ':')
			if out, err = r.AppendJSON(out, field+"."+string(k), depth+1); err != nil {
				return nil, err
			}
		}
		return append(out, '}'), nil
	case IsArray(c):
		n, err := r.openArray(field)
		if err != nil {
			return nil, err
		}
		out = append(out, '[')
		for i := range n {
			if i > 0 {
				out = append(out, ',')
			}
			if out, err = r.AppendJSON(out, fmt.Sprintf("%s[%d]", field, i), depth+1); err != nil {
				return nil, err
			}
		}
		return append(out, ']'), nil
	case IsStr(c):
		s, err := r.str(field)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(s) {
			return nil, &wire.FieldError{Field: field, Msg: "must be valid UTF-8"}
		}
		return jsonwire.AppendString(out, s), nil
	case c == codeNil:
		r.i++
		return append(out, "null"...), nil
	case IsBool(c):
		r.i++
		if c == codeTrue {
			return append(out, "true"...), nil
		}
		return append(out, "false"...), nil
	case c == codeUint64:
		u, err := r.Uint()
		if err != nil {
			return nil, r.fail(field, err)
		}
		return strconv.AppendUint(out, u, 10), nil
	case IsInt(c):
		v, err := r.Int()
		if err != nil {
			return nil, r.fail(field, err)
		}
		return strconv.AppendInt(out, v, 10), nil
	case IsFloat(c):
		f, err := r.Float()
		if err != nil {
			return nil, r.fail(field, err)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &wire.FieldError{Field: field, Msg: "must be a finite number, got " + strconv.FormatFloat(f, 'g', -1, 64)}
		}
		return strconv.AppendFloat(out, f, 'g', -1, 64), nil
	}
	return nil, &wire.FieldError{Field: field, Msg: "has no JSON form: " + r.Describe()}
}
