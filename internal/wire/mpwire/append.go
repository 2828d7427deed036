package mpwire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// The appenders write MessagePack values in their shortest form, as
// github.com/vmihailenco/msgpack/v5's Encoder does: the replies keep the
// bytes they had when it wrote them.

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

// AppendNil appends nil.
func AppendNil(b []byte) []byte { return append(b, codeNil) }

// AppendFloat appends f as a float 64.
func AppendFloat(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, codeDouble), math.Float64bits(f))
}

// AppendFromJSON appends the JSON value v as the same value in MessagePack:
// objects become maps (keys in their order), integers integers, other
// numbers float 64. It is for replies rendered as JSON off the hot path;
// its error is for v that is not one JSON value.
func AppendFromJSON(b, v []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	b, err := appendJSONValue(b, dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("transcoding JSON: data after the value")
	}
	return b, nil
}

// appendJSONValue transcodes the next JSON value of dec. A map's length
// comes first in MessagePack, so an object or array is read whole (as raw
// members) before it is written.
func appendJSONValue(b []byte, dec *json.Decoder, depth int) ([]byte, error) {
	if depth > 64 {
		return nil, fmt.Errorf("transcoding JSON: nested deeper than 64 levels")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("transcoding JSON: %w", err)
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
					return nil, fmt.Errorf("transcoding JSON: %w", err)
				}
				names = append(names, k.(string))
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, fmt.Errorf("transcoding JSON: %w", err)
			}
			members = append(members, raw)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, fmt.Errorf("transcoding JSON: %w", err)
		}
		if object {
			b = AppendMapLen(b, len(members))
		} else {
			b = AppendArrayLen(b, len(members))
		}
		for i, raw := range members {
			if object {
				b = AppendStr(b, names[i])
			}
			sub := json.NewDecoder(bytes.NewReader(raw))
			sub.UseNumber()
			if b, err = appendJSONValue(b, sub, depth+1); err != nil {
				return nil, err
			}
		}
	case json.Number:
		if v, err := t.Int64(); err == nil {
			b = AppendInt(b, v)
		} else if f, err := t.Float64(); err == nil {
			b = AppendFloat(b, f)
		} else {
			return nil, fmt.Errorf("transcoding JSON: number %s: %w", t, err)
		}
	case string:
		b = AppendStr(b, t)
	case bool:
		b = AppendBool(b, t)
	case nil:
		b = AppendNil(b)
	}
	return b, nil
}
