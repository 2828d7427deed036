package replies

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/obol-dev/obol/internal/wire/jsonwire"
	"github.com/obol-dev/obol/internal/wire/mpwire"
)

// Format is the encoding of a reply.
type Format uint8

const (
	JSON    Format = iota // application/json
	Msgpack               // application/msgpack
)

// Writer appends a reply in its format. An object is Object(n), then n
// members, each its key (First for the first, Key for the others) and its
// value, then End; an array is Array(n), then n
// elements, each Next and a value, then EndArray. n must be the true count:
// MessagePack writes it first (JSON ignores it). Each method returns the
// buffer it is given with its part appended; none fails, and none allocates
// but to grow the buffer. The zero value writes JSON.
type Writer struct {
	f Format
}

// NewWriter returns a Writer in format f.
func NewWriter(f Format) Writer { return Writer{f: f} }

// Format returns w's format.
func (w Writer) Format() Format { return w.f }

// Object appends the header of an object of n members.
func (w Writer) Object(b []byte, n int) []byte {
	if w.f == Msgpack {
		return mpwire.AppendMapLen(b, n)
	}
	return append(b, '{')
}

// End ends an object.
func (w Writer) End(b []byte) []byte {
	if w.f == Msgpack {
		return b
	}
	return append(b, '}')
}

// Array appends the header of an array of n elements.
func (w Writer) Array(b []byte, n int) []byte {
	if w.f == Msgpack {
		return mpwire.AppendArrayLen(b, n)
	}
	return append(b, '[')
}

// Next begins element i (from 0) of an array: in JSON, the comma after
// the element before.
func (w Writer) Next(b []byte, i int) []byte {
	if i > 0 && w.f == JSON {
		return append(b, ',')
	}
	return b
}

// EndArray ends an array.
func (w Writer) EndArray(b []byte) []byte {
	if w.f == Msgpack {
		return b
	}
	return append(b, ']')
}

// Key is a member's name in the form JSON writes it after another member,
// `,"name":`: a Writer appends it as it is, or without the comma (JSON's
// first member), or as a MessagePack str of the name. The name must need
// no JSON escaping and be shorter than 32 bytes (the agent's field names are
// short lowercase ASCII). Given as a constant, a key is copied as one.
type Key string

// Name returns k's name.
func (k Key) Name() string { return string(k[2 : len(k)-2]) }

// First appends the name of an object's first member.
func (w Writer) First(b []byte, k Key) []byte {
	if w.f == Msgpack {
		return mpKey(b, k)
	}
	return append(b, k[1:]...)
}

// Key appends the name of a member after the first.
func (w Writer) Key(b []byte, k Key) []byte {
	if w.f == Msgpack {
		return mpKey(b, k)
	}
	return append(b, k...)
}

// mpKey appends k as a MessagePack str. It is kept out of line on purpose
// (as Int is, too large to inline): a reply written with a Writer then
// inlines only each key's JSON copy, and its code stays about as small as a
// JSON-only appender's, which the request path measured as faster than
// faster-looking inlined code that evicts its neighbours from the
// instruction cache.
//
//go:noinline
func mpKey(b []byte, k Key) []byte {
	return append(append(b, 0xa0|byte(len(k)-4)), k[2:len(k)-2]...)
}

// Int appends v. A JSON digit (most fields of most replies: granted 1, a
// tier, a zero) is appended inline; anything else by a call.
func (w Writer) Int(b []byte, v int64) []byte {
	if w.f == JSON && uint64(v) < 10 {
		return append(b, '0'+byte(v))
	}
	return w.int(b, v)
}

func (w Writer) int(b []byte, v int64) []byte {
	if w.f == Msgpack {
		return mpwire.AppendInt(b, v)
	}
	return strconv.AppendInt(b, v, 10)
}

// Bool appends v.
func (w Writer) Bool(b []byte, v bool) []byte {
	if w.f == Msgpack {
		return mpwire.AppendBool(b, v)
	}
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// Float appends v rounded to 6 significant digits: in JSON in strconv's
// 'g' form, in MessagePack as the float 64 that form reads as (Round6).
func (w Writer) Float(b []byte, v float64) []byte {
	if w.f == Msgpack {
		return mpwire.AppendFloat(b, Round6(v))
	}
	return strconv.AppendFloat(b, v, 'g', 6, 64)
}

// String appends s. Bytes that are not valid UTF-8 are replaced by U+FFFD:
// each byte in JSON (jsonwire.AppendString), each run of them in
// MessagePack (strings.ToValidUTF8).
func (w Writer) String(b []byte, s string) []byte {
	if w.f == Msgpack {
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		return mpwire.AppendStr(b, s)
	}
	return jsonwire.AppendString(b, s)
}

// StringBytes is String for a string held in a byte slice.
func (w Writer) StringBytes(b []byte, s []byte) []byte {
	if w.f == Msgpack {
		if !utf8.Valid(s) {
			return w.String(b, string(s))
		}
		return mpwire.AppendStr(b, s)
	}
	return jsonwire.AppendString(b, s)
}

// JSON appends the JSON value v: as it is in JSON (the caller vouches that
// it is one value), transcoded in MessagePack (mpwire.AppendFromJSON). Off the
// hot path.
func (w Writer) JSON(b, v []byte) ([]byte, error) {
	if w.f == Msgpack {
		return mpwire.AppendFromJSON(b, v)
	}
	return append(b, v...), nil
}

// Round6 returns v rounded to 6 significant digits: the precision of a
// float in a reply.
func Round6(v float64) float64 {
	var buf [32]byte
	r, _ := strconv.ParseFloat(string(strconv.AppendFloat(buf[:0], v, 'g', 6, 64)), 64)
	return r
}
