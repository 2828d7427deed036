package mpwire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// The appenders write MessagePack values in their shortest form, as
// github.com/vmihailenco/msgpack/v5's Encoder does: the replies keep the
// bytes they had when it wrote them. The agent writes MessagePack with that
// library (its gossip, and AppendFromJSON below) but where a benchmark shows
// a difference: the replies of the request path (replies.Writer).
// (gossip/packet also writes the header of its state message with them, off
// the request path, unmeasured.) The decision reply of a tiers
// resource took 97 ns written by the appenders, 249 ns by the library's
// Encoder called member by member into the same buffer, and 1,010 ns with
// 3 allocations (257 B) by the library encoding a tagged struct (the
// fastest of 12 runs each, on 2 shared cores):
//
//	go test -run XXX -bench DecisionMsgpack -benchmem -count 12 ./internal/wire/replies

// AppendMapLen appends the header of a map of n pairs.
func AppendMapLen(b []byte, n int) []byte { return appendLen(b, n, 0x80, codeMap16, codeMap32) }

// AppendArrayLen appends the header of an array of n elements.
func AppendArrayLen(b []byte, n int) []byte { return appendLen(b, n, 0x90, codeArray16, codeArray32) }

// appendLen appends the header of a map or an array of n: fix is the code
// of the fixed form (n < 16), c16 and c32 those of the others.
func appendLen(b []byte, n int, fix, c16, c32 byte) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, c16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, c32), uint32(n))
}

// AppendStr appends s as a str.
func AppendStr[S ~string | ~[]byte](b []byte, s S) []byte {
	return append(AppendStrLen(b, len(s)), s...)
}

// AppendStrLen appends the header of a str of n bytes.
func AppendStrLen(b []byte, n int) []byte {
	switch {
	case n < 32:
		return append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		return append(b, codeStr8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, codeStr16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, codeStr32), uint32(n))
}

// AppendInt appends v: a fixint, else the smallest uint (for v ≥ 0) or int
// that holds it.
func AppendInt(b []byte, v int64) []byte {
	if v >= 0 {
		switch u := uint64(v); {
		case u <= math.MaxInt8:
			return append(b, byte(u))
		case u <= math.MaxUint8:
			return append(b, codeUint8, byte(u))
		case u <= math.MaxUint16:
			return binary.BigEndian.AppendUint16(append(b, codeUint16), uint16(u))
		case u <= math.MaxUint32:
			return binary.BigEndian.AppendUint32(append(b, codeUint32), uint32(u))
		default:
			return binary.BigEndian.AppendUint64(append(b, codeUint64), u)
		}
	}
	switch {
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, codeInt8, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, codeInt16), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, codeInt32), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, codeInt64), uint64(v))
}

// AppendBool appends v.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, codeTrue)
	}
	return append(b, codeFalse)
}

// AppendFloat appends f as a float 64.
func AppendFloat(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, codeDouble), math.Float64bits(f))
}

// AppendFromJSON appends the JSON value v as the same value in MessagePack:
// objects become maps (keys in their order), integers integers, other
// numbers float 64. It is for replies rendered as JSON off the hot path;
// its error is for v that is not one JSON value. It writes with the
// library's Encoder, not the appenders above: decoding the JSON costs a
// hundred times what writing costs, and BenchmarkFromJSON measures the two
// alike (about 184 µs and 579 allocations for a 450-byte reply either way).
func AppendFromJSON(b, v []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	w := &sliceWriter{b: b}
	e := msgpack.GetEncoder()
	defer msgpack.PutEncoder(e)
	e.Reset(w)
	if err := encodeJSONValue(e, dec, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("transcoding JSON: data after the value")
	}
	return w.b, nil
}

// sliceWriter lets the library's Encoder append to a byte slice. Its
// writes do not fail.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *sliceWriter) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }

// encodeJSONValue transcodes the next JSON value of dec. A map's length
// comes first in MessagePack, so an object or array is read whole (as raw
// members) before it is written.
func encodeJSONValue(e *msgpack.Encoder, dec *json.Decoder, depth int) error {
	if depth > 64 {
		return fmt.Errorf("transcoding JSON: nested deeper than 64 levels")
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("transcoding JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		var members []json.RawMessage
		var names []string
		object := t == '{'
		for dec.More() {
			if object {
				k, err := dec.Token()
				if err != nil {
					return fmt.Errorf("transcoding JSON: %w", err)
				}
				names = append(names, k.(string))
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fmt.Errorf("transcoding JSON: %w", err)
			}
			members = append(members, raw)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return fmt.Errorf("transcoding JSON: %w", err)
		}
		if object {
			err = e.EncodeMapLen(len(members))
		} else {
			err = e.EncodeArrayLen(len(members))
		}
		for i := 0; err == nil && i < len(members); i++ {
			if object {
				if err = e.EncodeString(names[i]); err != nil {
					break
				}
			}
			sub := json.NewDecoder(bytes.NewReader(members[i]))
			sub.UseNumber()
			err = encodeJSONValue(e, sub, depth+1)
		}
		return err
	case json.Number:
		if v, err := t.Int64(); err == nil {
			return e.EncodeInt(v)
		}
		f, err := t.Float64()
		if err != nil {
			return fmt.Errorf("transcoding JSON: number %s: %w", t, err)
		}
		return e.EncodeFloat64(f)
	case string:
		return e.EncodeString(t)
	case bool:
		return e.EncodeBool(t)
	}
	return e.EncodeNil() // null
}
