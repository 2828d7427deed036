package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// mpReader is a strict MessagePack reader over one request body, on the
// streaming Decoder of github.com/vmihailenco/msgpack/v5 (DecodeMapLen,
// DecodeArrayLen, DecodeBytesLen, DecodeInt64, ...) reading from a
// bytes.Reader. A bytes.Reader is an io.ByteScanner, so the Decoder reads
// straight from it without buffering of its own; that lets the reader know
// its offset in the body and return a string as a sub-slice of the body
// (after DecodeBytesLen, it moves the bytes.Reader past the string) instead
// of copying it. No method reflects on a type, and the success path
// allocates nothing.
//
// Every value is type-checked by peeking at its code before the Decoder
// reads it: the Decoder alone would read nil as 0 or as an empty map, an
// extension header before a map, and a uint64 above MaxInt64 as a negative
// int64. Every error is a *fieldError naming the value being read.
type mpReader struct {
	data []byte
	br   bytes.Reader
	dec  *msgpack.Decoder
}

// reset makes m read data.
func (m *mpReader) reset(data []byte) {
	m.data = data
	m.br.Reset(data)
	if m.dec == nil {
		m.dec = msgpack.NewDecoder(&m.br)
	} else {
		m.dec.ResetReader(&m.br)
	}
}

// release drops m's reference to the body.
func (m *mpReader) release() {
	m.data = nil
	m.br.Reset(nil)
}

// pos returns the offset of the next byte to read.
func (m *mpReader) pos() int { return len(m.data) - m.br.Len() }

// seek moves to offset i of the body.
func (m *mpReader) seek(i int) { _, _ = m.br.Seek(int64(i), io.SeekStart) }

func (m *mpReader) eof() bool { return m.br.Len() == 0 }

// syntax is the error for malformed MessagePack met while reading field.
func (m *mpReader) syntax(field, what string) error {
	return &fieldError{field: field, msg: fmt.Sprintf("invalid MessagePack at byte %d: %s", m.pos(), what)}
}

// peek returns the code of the next value without consuming it.
func (m *mpReader) peek(field string) (byte, error) {
	if m.eof() {
		return 0, m.syntax(field, "unexpected end of body, expected a value")
	}
	return m.data[m.pos()], nil
}

// decodeErr turns an error of the Decoder into a syntax error of field: the
// only ones possible, the code having been checked, are a truncated body.
func (m *mpReader) decodeErr(field string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return m.syntax(field, "unexpected end of body")
	}
	return m.syntax(field, err.Error())
}

func isMapCode(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isArrayCode(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isIntCode(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)
}

// openMap reads the header of a map of field and returns its length.
func (m *mpReader) openMap(field string) (int, error) {
	c, err := m.peek(field)
	if err != nil {
		return 0, err
	}
	if !isMapCode(c) {
		msg := "must be a map, got " + m.describe()
		if c == '{' && m.pos() == 0 {
			msg += " (the body looks like JSON: send it with Content-Type: application/json)"
		}
		return 0, &fieldError{field: field, msg: msg}
	}
	n, err := m.dec.DecodeMapLen()
	if err != nil {
		return 0, m.decodeErr(field, err)
	}
	return n, nil
}

// openArray reads the header of an array of field and returns its length.
func (m *mpReader) openArray(field string) (int, error) {
	c, err := m.peek(field)
	if err != nil {
		return 0, err
	}
	if !isArrayCode(c) {
		return 0, &fieldError{field: field, msg: "must be an array, got " + m.describe()}
	}
	n, err := m.dec.DecodeArrayLen()
	if err != nil {
		return 0, m.decodeErr(field, err)
	}
	return n, nil
}

// key reads a key of the map of field: a string.
func (m *mpReader) key(field string) ([]byte, error) {
	c, err := m.peek(field)
	if err != nil {
		return nil, err
	}
	if !msgpcode.IsString(c) {
		return nil, &fieldError{field: field, msg: "a field name must be a string, got " + m.describe()}
	}
	return m.readStr(field)
}

// str reads a string value of field; binary data is not a string.
func (m *mpReader) str(field string) ([]byte, error) {
	c, err := m.peek(field)
	if err != nil {
		return nil, err
	}
	if !msgpcode.IsString(c) {
		return nil, &fieldError{field: field, msg: "must be a string, got " + m.describe()}
	}
	return m.readStr(field)
}

// readStr reads the string (or binary) at m, whose code was checked, as a
// sub-slice of the body.
func (m *mpReader) readStr(field string) ([]byte, error) {
	n, err := m.dec.DecodeBytesLen()
	if err != nil {
		return nil, m.decodeErr(field, err)
	}
	return m.take(field, n)
}

// take returns the next n bytes of the body, consumed.
func (m *mpReader) take(field string, n int) ([]byte, error) {
	if n < 0 || n > m.br.Len() {
		return nil, m.syntax(field, fmt.Sprintf("unexpected end of body inside a value of %d bytes", n))
	}
	i := m.pos()
	m.seek(i + n)
	return m.data[i : i+n : i+n], nil
}

// integer reads an integer value of field in [lo, hi]. Like the JSON
// reader, it takes a float whose value is a whole number in range (2.0) and
// refuses one with a fraction, a NaN or an infinity.
func (m *mpReader) integer(field string, lo, hi int64) (int64, error) {
	c, err := m.peek(field)
	if err != nil {
		return 0, err
	}
	switch {
	case c == msgpcode.Uint64:
		u, err := m.dec.DecodeUint64()
		if err != nil {
			return 0, m.decodeErr(field, err)
		}
		if u > uint64(math.MaxInt64) || int64(u) < lo || int64(u) > hi {
			return 0, rangeError(field, lo, hi, strconv.FormatUint(u, 10))
		}
		return int64(u), nil
	case isIntCode(c):
		v, err := m.dec.DecodeInt64()
		if err != nil {
			return 0, m.decodeErr(field, err)
		}
		if v < lo || v > hi {
			return 0, rangeError(field, lo, hi, strconv.FormatInt(v, 10))
		}
		return v, nil
	case c == msgpcode.Float || c == msgpcode.Double:
		f, err := m.dec.DecodeFloat64()
		if err != nil {
			return 0, m.decodeErr(field, err)
		}
		if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
			return 0, rangeError(field, lo, hi, strconv.FormatFloat(f, 'g', -1, 64))
		}
		return int64(f), nil
	}
	return 0, rangeError(field, lo, hi, m.describe())
}

// end checks that nothing follows the top-level value.
func (m *mpReader) end() error {
	if !m.eof() {
		return m.syntax("body", "unexpected data after the MessagePack map")
	}
	return nil
}

// describe renders the value at m for an error message, without consuming it.
func (m *mpReader) describe() string {
	if m.eof() {
		return "nothing"
	}
	i := m.pos()
	c := m.data[i]
	switch {
	case isMapCode(c):
		return "a map"
	case isArrayCode(c):
		return "an array"
	case c == msgpcode.Nil:
		return "nil"
	case c == msgpcode.True:
		return "true"
	case c == msgpcode.False:
		return "false"
	case msgpcode.IsBin(c):
		return "binary data"
	case msgpcode.IsExt(c):
		return "an extension"
	case msgpcode.IsString(c):
		s, err := m.readStr("")
		m.seek(i)
		if err != nil {
			return "a truncated string"
		}
		return "string " + strconv.Quote(quoteSnippet(s))
	case isIntCode(c) || c == msgpcode.Float || c == msgpcode.Double:
		var s string
		if c == msgpcode.Uint64 {
			u, err := m.dec.DecodeUint64()
			s = strconv.FormatUint(u, 10)
			if err != nil {
				s = "a truncated number"
			}
		} else if isIntCode(c) {
			v, err := m.dec.DecodeInt64()
			s = strconv.FormatInt(v, 10)
			if err != nil {
				s = "a truncated number"
			}
		} else {
			f, err := m.dec.DecodeFloat64()
			s = strconv.FormatFloat(f, 'g', -1, 64)
			if err != nil {
				s = "a truncated number"
			}
		}
		m.seek(i)
		return s
	}
	return fmt.Sprintf("the reserved code 0x%02x", c) // 0xc1, the only one left
}

// skip reads and checks any value of field, nested at most maxDepth levels
// deep; it is how a batch item refused alone is stepped over. Strings,
// binary data and extensions are stepped over without reading them.
func (m *mpReader) skip(field string, depth int) error {
	c, err := m.peek(field)
	if err != nil {
		return err
	}
	if depth > maxDepth {
		return m.syntax(field, fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	switch {
	case isMapCode(c) || isArrayCode(c):
		var n int
		if isMapCode(c) {
			n, err = m.dec.DecodeMapLen()
			n *= 2
		} else {
			n, err = m.dec.DecodeArrayLen()
		}
		if err != nil {
			return m.decodeErr(field, err)
		}
		for range n {
			if err := m.skip(field, depth+1); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		_, err := m.readStr(field)
		return err
	case msgpcode.IsExt(c):
		_, n, err := m.dec.DecodeExtHeader()
		if err != nil {
			return m.decodeErr(field, err)
		}
		_, err = m.take(field, n)
		return err
	case c == 0xc1: // never used
		return m.syntax(field, "the reserved code 0xc1")
	}
	if err := m.dec.Skip(); err != nil { // a number, a bool or nil: at most 9 bytes
		return m.decodeErr(field, err)
	}
	return nil
}

// decodeMsgpack reads data, a MessagePack map of the allowed fields, into b
// (reset): the MessagePack twin of decode, with the same fields, checks and
// messages. An empty body reads as an empty map. Required fields must be
// present.
func (b *wireBody) decodeMsgpack(data []byte, allowed, required fieldSet) error {
	if len(data) > 0 {
		m := &b.codec().r
		m.reset(data)
		if err := b.readMsgpack(m, "body", allowed); err != nil {
			return err
		}
		if err := m.end(); err != nil {
			return err
		}
	}
	return b.check(required)
}

// readMsgpack reads one map of the allowed fields at m into b; where names
// the map in messages about the map itself (as in read).
func (b *wireBody) readMsgpack(m *mpReader, where string, allowed fieldSet) error {
	n, err := m.openMap(where)
	if err != nil {
		return err
	}
	for range n {
		key, err := m.key(where)
		if err != nil {
			return err
		}
		f, err := b.field(key, allowed)
		if err != nil {
			return err
		}
		if f&intFields != 0 {
			lo, hi := f.bounds()
			var v int64
			if v, err = m.integer(f.name(), lo, hi); err == nil {
				b.setInt(f, v)
			}
		} else {
			var s []byte
			if s, err = m.str(f.name()); err == nil {
				err = b.setString(f, s, false)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// appendJSONOf appends the value at m as JSON: how a resource config sent
// in MessagePack reaches the config parser, which reads JSON. Keys must be
// strings and strings valid UTF-8; binary data, extensions, NaN and
// infinities have no JSON form and are refused. Off the hot path.
func (m *mpReader) appendJSONOf(out []byte, field string, depth int) ([]byte, error) {
	c, err := m.peek(field)
	if err != nil {
		return nil, err
	}
	if depth > maxDepth {
		return nil, m.syntax(field, fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	switch {
	case isMapCode(c):
		n, err := m.openMap(field)
		if err != nil {
			return nil, err
		}
		out = append(out, '{')
		for i := range n {
			if i > 0 {
				out = append(out, ',')
			}
			k, err := m.key(field)
			if err != nil {
				return nil, err
			}
			if !utf8.Valid(k) {
				return nil, &fieldError{field: field, msg: "a field name must be valid UTF-8"}
			}
			out = appendString(out, k)
			out = append(out, ':')
			if out, err = m.appendJSONOf(out, field+"."+string(k), depth+1); err != nil {
				return nil, err
			}
		}
		return append(out, '}'), nil
	case isArrayCode(c):
		n, err := m.openArray(field)
		if err != nil {
			return nil, err
		}
		out = append(out, '[')
		for i := range n {
			if i > 0 {
				out = append(out, ',')
			}
			if out, err = m.appendJSONOf(out, fmt.Sprintf("%s[%d]", field, i), depth+1); err != nil {
				return nil, err
			}
		}
		return append(out, ']'), nil
	case msgpcode.IsString(c):
		s, err := m.str(field)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(s) {
			return nil, &fieldError{field: field, msg: "must be valid UTF-8"}
		}
		return appendString(out, s), nil
	case c == msgpcode.Nil:
		_ = m.dec.DecodeNil() // the code, peeked: cannot fail
		return append(out, "null"...), nil
	case c == msgpcode.True || c == msgpcode.False:
		v, _ := m.dec.DecodeBool() // the code, peeked: cannot fail
		return appendBool(out, v), nil
	case c == msgpcode.Uint64:
		u, err := m.dec.DecodeUint64()
		if err != nil {
			return nil, m.decodeErr(field, err)
		}
		return strconv.AppendUint(out, u, 10), nil
	case isIntCode(c):
		v, err := m.dec.DecodeInt64()
		if err != nil {
			return nil, m.decodeErr(field, err)
		}
		return strconv.AppendInt(out, v, 10), nil
	case c == msgpcode.Float || c == msgpcode.Double:
		f, err := m.dec.DecodeFloat64()
		if err != nil {
			return nil, m.decodeErr(field, err)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &fieldError{field: field, msg: "must be a finite number, got " + strconv.FormatFloat(f, 'g', -1, 64)}
		}
		return strconv.AppendFloat(out, f, 'g', -1, 64), nil
	}
	return nil, &fieldError{field: field, msg: "has no JSON form: " + m.describe()}
}
