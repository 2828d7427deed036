package mpwire

import (
	"encoding/binary"
	"errors"
	"math"
)

// The errors of the typed layer. A value of another type is not consumed;
// after a truncated value the reader is at the end of its input.
var (
	ErrType      = errors.New("mpwire: a value of another type")
	ErrRange     = errors.New("mpwire: an integer out of range")
	ErrTruncated = errors.New("mpwire: unexpected end of input")
)

// The codes the readers test (the MessagePack specification's names).
const (
	codeNil      = 0xc0
	codeReserved = 0xc1
	codeFalse    = 0xc2
	codeTrue     = 0xc3
	codeBin8     = 0xc4
	codeBin16    = 0xc5
	codeBin32    = 0xc6
	codeExt8     = 0xc7
	codeExt16    = 0xc8
	codeExt32    = 0xc9
	codeFloat    = 0xca
	codeDouble   = 0xcb
	codeUint8    = 0xcc
	codeUint16   = 0xcd
	codeUint32   = 0xce
	codeUint64   = 0xcf
	codeInt8     = 0xd0
	codeInt16    = 0xd1
	codeInt32    = 0xd2
	codeInt64    = 0xd3
	codeFixExt1  = 0xd4
	codeFixExt16 = 0xd8
	codeStr8     = 0xd9
	codeStr16    = 0xda
	codeStr32    = 0xdb
	codeArray16  = 0xdc
	codeArray32  = 0xdd
	codeMap16    = 0xde
	codeMap32    = 0xdf
)

// IsMap reports whether c is the code of a map.
func IsMap(c byte) bool { return c&0xf0 == 0x80 || c == codeMap16 || c == codeMap32 }

// IsArray reports whether c is the code of an array.
func IsArray(c byte) bool { return c&0xf0 == 0x90 || c == codeArray16 || c == codeArray32 }

// IsStr reports whether c is the code of a str.
func IsStr(c byte) bool { return c&0xe0 == 0xa0 || (c >= codeStr8 && c <= codeStr32) }

// IsBin reports whether c is the code of binary data.
func IsBin(c byte) bool { return c >= codeBin8 && c <= codeBin32 }

// IsExt reports whether c is the code of an extension.
func IsExt(c byte) bool {
	return (c >= codeExt8 && c <= codeExt32) || (c >= codeFixExt1 && c <= codeFixExt16)
}

// IsInt reports whether c is the code of an integer, of any size or sign.
func IsInt(c byte) bool { return c <= 0x7f || c >= 0xe0 || (c >= codeUint8 && c <= codeInt64) }

// IsFloat reports whether c is the code of a float (32 or 64 bits).
func IsFloat(c byte) bool { return c == codeFloat || c == codeDouble }

// IsNil, IsBool and IsReserved report whether c is nil, a bool, or the one
// code MessagePack never uses.
func IsNil(c byte) bool      { return c == codeNil }
func IsBool(c byte) bool     { return c == codeFalse || c == codeTrue }
func IsReserved(c byte) bool { return c == codeReserved }

// Reader reads MessagePack values from a byte slice, in place. The zero
// value reads nothing; Reset gives it its input. Not safe for concurrent
// use.
type Reader struct {
	b []byte
	i int
	// left holds, for each map or array Object or Array opened, how many
	// of its members are still to read, the innermost last.
	left  [4]int
	depth int
}

// Reset makes r read b from its start.
func (r *Reader) Reset(b []byte) { r.b, r.i, r.depth = b, 0, 0 }

// Input returns what r reads.
func (r *Reader) Input() []byte { return r.b }

// Pos returns the offset of the next byte to read.
func (r *Reader) Pos() int { return r.i }

// Seek moves to offset i of the input.
func (r *Reader) Seek(i int) { r.i = i }

// Len returns how many bytes are left.
func (r *Reader) Len() int { return len(r.b) - r.i }

// EOF reports whether the input is all read.
func (r *Reader) EOF() bool { return r.i >= len(r.b) }

// Peek returns the code of the next value without consuming it.
func (r *Reader) Peek() (byte, error) {
	if r.EOF() {
		return 0, ErrTruncated
	}
	return r.b[r.i], nil
}

// truncated moves r to the end of its input and returns ErrTruncated.
func (r *Reader) truncated() error {
	r.i = len(r.b)
	return ErrTruncated
}

// head consumes the code and the n bytes of a value's header after it and
// returns those bytes as a big-endian number.
func (r *Reader) head(n int) (uint64, error) {
	if r.Len() < 1+n {
		return 0, r.truncated()
	}
	p := r.b[r.i+1 : r.i+1+n]
	r.i += 1 + n
	switch n {
	case 0:
		return 0, nil
	case 1:
		return uint64(p[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), nil
	}
	return binary.BigEndian.Uint64(p), nil
}

// MapLen reads a map's header and returns its number of pairs.
func (r *Reader) MapLen() (int, error) { return r.header(0x80, 0x0f, codeMap16, codeMap32, 2) }

// ArrayLen reads an array's header and returns its number of elements.
func (r *Reader) ArrayLen() (int, error) { return r.header(0x90, 0x0f, codeArray16, codeArray32, 2) }

// StrLen reads a str's header and returns its length in bytes; Take then
// returns the bytes.
func (r *Reader) StrLen() (int, error) { return r.header(0xa0, 0x1f, codeStr8, codeStr32, 1) }

// BytesLen is StrLen for a str or binary data.
func (r *Reader) BytesLen() (int, error) {
	c, err := r.Peek()
	if err != nil {
		return 0, err
	}
	if IsBin(c) {
		v, err := r.head(1 << (c - codeBin8))
		return int(v), err
	}
	return r.StrLen()
}

// header reads the header of a map, an array or a str: in its fixed form,
// a code from fix on whose low bits (mask) are the length; in the others,
// codes first to last, a length of n, 2n, 4n bytes after the code.
func (r *Reader) header(fix, mask, first, last byte, n int) (int, error) {
	c, err := r.Peek()
	if err != nil {
		return 0, err
	}
	switch {
	case c&^mask == fix:
		r.i++
		return int(c & mask), nil
	case c >= first && c <= last:
		v, err := r.head(n << (c - first))
		return int(v), err
	}
	return 0, ErrType
}

// Take returns the next n bytes, consumed, as a sub-slice of the input. When
// fewer are left it returns ErrTruncated and consumes nothing.
func (r *Reader) Take(n int) ([]byte, error) {
	if n < 0 || n > r.Len() {
		return nil, ErrTruncated
	}
	s := r.b[r.i : r.i+n : r.i+n]
	r.i += n
	return s, nil
}

// ReadStr reads a str, as a sub-slice of the input.
func (r *Reader) ReadStr() ([]byte, error) {
	n, err := r.StrLen()
	if err != nil {
		return nil, err
	}
	return r.Take(n)
}

// Int reads an integer, of any size or sign, that fits an int64: a uint64
// above MaxInt64 is ErrRange (consumed).
func (r *Reader) Int() (int64, error) {
	c, err := r.Peek()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= 0x7f:
		r.i++
		return int64(c), nil
	case c >= 0xe0:
		r.i++
		return int64(int8(c)), nil
	case c >= codeUint8 && c <= codeUint64:
		v, err := r.head(1 << (c - codeUint8))
		if err == nil && v > math.MaxInt64 {
			err = ErrRange
		}
		return int64(v), err
	case c >= codeInt8 && c <= codeInt64:
		n := 1 << (c - codeInt8)
		v, err := r.head(n)
		shift := 64 - 8*n
		return int64(v<<shift) >> shift, err
	}
	return 0, ErrType
}

// Uint reads a non-negative integer, of any size: a negative one is
// ErrRange (consumed).
func (r *Reader) Uint() (uint64, error) {
	c, err := r.Peek()
	if err != nil {
		return 0, err
	}
	if c >= codeUint8 && c <= codeUint64 {
		return r.head(1 << (c - codeUint8))
	}
	v, err := r.Int()
	if err == nil && v < 0 {
		err = ErrRange
	}
	return uint64(v), err
}

// Float reads a float, of 32 or 64 bits, as a float64.
func (r *Reader) Float() (float64, error) {
	c, err := r.Peek()
	if err != nil {
		return 0, err
	}
	switch c {
	case codeFloat:
		v, err := r.head(4)
		return float64(math.Float32frombits(uint32(v))), err
	case codeDouble:
		v, err := r.head(8)
		return math.Float64frombits(v), err
	}
	return 0, ErrType
}

// Bool reads a bool.
func (r *Reader) Bool() (bool, error) {
	c, err := r.Peek()
	if err != nil {
		return false, err
	}
	if !IsBool(c) {
		return false, ErrType
	}
	r.i++
	return c == codeTrue, nil
}

// Nil reads nil.
func (r *Reader) Nil() error {
	c, err := r.Peek()
	if err != nil {
		return err
	}
	if c != codeNil {
		return ErrType
	}
	r.i++
	return nil
}

// ExtHeader reads an extension's header and returns its type and the length
// of its data, which Take then returns.
func (r *Reader) ExtHeader() (typ int8, n int, err error) {
	c, err := r.Peek()
	if err != nil {
		return 0, 0, err
	}
	switch {
	case c >= codeFixExt1 && c <= codeFixExt16:
		n = 1 << (c - codeFixExt1)
		r.i++
	case c >= codeExt8 && c <= codeExt32:
		v, err := r.head(1 << (c - codeExt8))
		if err != nil {
			return 0, 0, err
		}
		n = int(v)
	default:
		return 0, 0, ErrType
	}
	if r.EOF() {
		return 0, 0, r.truncated()
	}
	typ = int8(r.b[r.i])
	r.i++
	return typ, n, nil
}

// skipScalar consumes a number, a bool or nil, whose code c was checked.
func (r *Reader) skipScalar(c byte) error {
	n := 0
	switch {
	case c >= codeUint8 && c <= codeUint64:
		n = 1 << (c - codeUint8)
	case c >= codeInt8 && c <= codeInt64:
		n = 1 << (c - codeInt8)
	case c == codeFloat:
		n = 4
	case c == codeDouble:
		n = 8
	}
	_, err := r.head(n)
	return err
}
