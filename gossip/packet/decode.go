package packet

// This file has one job, reading messages: the strict decoder that Decode,
// DecodeRequest and Peek share, which reads a message's type and origin
// (header) and then the fields of that type, naming the field and what was
// wrong in every error.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/obol-dev/obol/internal/wire/mpwire"
)

// decoder reads one message with the project's MessagePack reader
// (internal/wire/mpwire) and keeps where it is, so that errors name the
// field.
type decoder struct {
	r   mpwire.Reader
	grp int // current group, -1 outside
	ent int // current entry in the group's array, -1 outside
}

var decPool = sync.Pool{New: func() any { return new(decoder) }}

// Decode parses one sync message (MsgSync, MsgSeqSync, MsgSum or
// MsgTargeted) made by Encode or Split. It is strict: any input that is
// not exactly one well-formed sync message is an error wrapping
// ErrMalformed (or ErrVersion: a Request, a mesh state or an unknown type)
// that names the field and what was wrong. It never panics, and it never
// allocates more than the input's length can justify. Integers may use any
// msgpack integer encoding whose value fits the field. Safe for concurrent
// use.
func Decode(b []byte) (*Packet, error) { return withDecoder(b, (*decoder).packet) }

// DecodeRequest parses one Request (MsgRequest or MsgReship) made by
// EncodeRequest, as strictly as Decode parses a sync message: anything
// else is an error wrapping ErrMalformed or ErrVersion (a sync message
// among them). It never panics. Safe for concurrent use.
func DecodeRequest(b []byte) (*Request, error) { return withDecoder(b, (*decoder).request) }

// Peek returns the type and the origin name of the message b, read from
// its header alone (the type and the name), without decoding the rest: the
// name is a sub-slice of b, not a copy, valid while b is. Whenever Decode(b)
// or DecodeRequest(b) succeeds, Peek returns its type and From; when the
// header itself is wrong it returns the error both would (wrapping
// ErrMalformed or ErrVersion). An error in the rest of the message goes
// unnoticed, so a name is no promise that b decodes. It allocates nothing
// unless it fails. Safe for concurrent use.
func Peek(b []byte) (Type, []byte, error) {
	h, err := withDecoder(b, (*decoder).header)
	if err != nil {
		return 0, nil, err
	}
	return h.typ, h.from, nil
}

// withDecoder runs read on a pooled decoder over b and returns it to the
// pool.
func withDecoder[T any](b []byte, read func(*decoder) (T, error)) (T, error) {
	dc := decPool.Get().(*decoder)
	dc.r.Reset(b)
	dc.grp, dc.ent = -1, -1
	v, err := read(dc)
	dc.r.Reset(nil)
	decPool.Put(dc)
	return v, err
}

func (dc *decoder) where(field string) string {
	switch {
	case dc.grp < 0:
		return field
	case dc.ent < 0:
		return fmt.Sprintf("groups[%d].%s", dc.grp, field)
	}
	return fmt.Sprintf("groups[%d].%s[%d]", dc.grp, field, dc.ent)
}

// fail returns an ErrMalformed error for field, whose value starts at byte at.
func (dc *decoder) fail(field string, at int, format string, args ...any) error {
	return fmt.Errorf("%w: %s at byte %d: %s", ErrMalformed, dc.where(field), at, fmt.Sprintf(format, args...))
}

func (dc *decoder) pos() int { return dc.r.Pos() }

// peek returns the next msgpack code, or an error naming field when the input
// has ended.
func (dc *decoder) peek(field string) (byte, error) {
	c, err := dc.r.Peek()
	if err != nil {
		return 0, dc.fail(field, dc.pos(), "truncated (want a value, input ended)")
	}
	return c, nil
}

// uint reads a non-negative integer.
func (dc *decoder) uint(field string) (uint64, error) {
	at := dc.pos()
	c, err := dc.peek(field)
	if err != nil {
		return 0, err
	}
	if !mpwire.IsInt(c) {
		return 0, dc.fail(field, at, "want an unsigned integer, got %s", codeName(c))
	}
	v, err := dc.r.Uint()
	switch {
	case errors.Is(err, mpwire.ErrRange):
		return 0, dc.fail(field, at, "want an unsigned integer, got %d", int64(v))
	case err != nil:
		return 0, dc.fail(field, at, "truncated integer")
	}
	return v, nil
}

// int reads a signed integer that fits int64.
func (dc *decoder) int(field string) (int64, error) {
	at := dc.pos()
	c, err := dc.peek(field)
	if err != nil {
		return 0, err
	}
	if !mpwire.IsInt(c) {
		return 0, dc.fail(field, at, "want an integer, got %s", codeName(c))
	}
	v, err := dc.r.Int()
	switch {
	case errors.Is(err, mpwire.ErrRange):
		return 0, dc.fail(field, at, "integer %d overflows int64", uint64(v))
	case err != nil:
		return 0, dc.fail(field, at, "truncated integer")
	}
	return v, nil
}

// arr reads an array header and checks that n elements of at least minElem
// bytes each can still be in the input (minElem 0: no check, for arrays
// whose length allocates nothing).
func (dc *decoder) arr(field string, minElem int) (int, error) {
	at := dc.pos()
	c, err := dc.peek(field)
	if err != nil {
		return 0, err
	}
	if !mpwire.IsArray(c) {
		return 0, dc.fail(field, at, "want an array, got %s", codeName(c))
	}
	n, err := dc.r.ArrayLen()
	if err != nil {
		return 0, dc.fail(field, at, "truncated array header")
	}
	if minElem > 0 && n > dc.r.Len()/minElem {
		return 0, dc.fail(field, at, "array of %d elements is longer than the %d bytes left", n, dc.r.Len())
	}
	return n, nil
}

// str reads a msgpack str.
func (dc *decoder) str(field string) (string, error) {
	b, err := dc.strBytes(field)
	return string(b), err
}

// strBytes reads a msgpack str as a sub-slice of the input.
func (dc *decoder) strBytes(field string) ([]byte, error) {
	at := dc.pos()
	c, err := dc.peek(field)
	if err != nil {
		return nil, err
	}
	if !mpwire.IsStr(c) {
		return nil, dc.fail(field, at, "want a string, got %s", codeName(c))
	}
	n, err := dc.r.StrLen()
	if err != nil {
		return nil, dc.fail(field, at, "truncated string header")
	}
	if n > dc.r.Len() {
		return nil, dc.fail(field, at, "string of %d bytes is longer than the %d bytes left", n, dc.r.Len())
	}
	b, err := dc.r.Take(n)
	if err != nil {
		return nil, dc.fail(field, at, "%v", err)
	}
	return b, nil
}

func (dc *decoder) bool(field string) (bool, error) {
	at := dc.pos()
	c, err := dc.peek(field)
	if err != nil {
		return false, err
	}
	if !mpwire.IsBool(c) {
		return false, dc.fail(field, at, "want a bool, got %s", codeName(c))
	}
	return dc.r.Bool()
}

// offset reads a time offset from base and returns base+offset, rejecting
// offsets that would overflow int64.
func (dc *decoder) offset(field string, base int64) (int64, error) {
	at := dc.pos()
	v, err := dc.uint(field)
	if err != nil {
		return 0, err
	}
	if v > uint64(math.MaxInt64)-uint64(base) {
		return 0, dc.fail(field, at, "offset %d from base %d overflows int64", v, base)
	}
	return int64(uint64(base) + v), nil
}

// head is a message's header up to its origin name.
type head struct {
	typ  Type
	from []byte // a sub-slice of the input
}

// header reads a message's header up to its origin name: the one reading of
// it that Decode, DecodeRequest and Peek share. It refuses a type that is
// not a datagram's (MsgState among them) and an array whose length is not
// the type's.
func (dc *decoder) header() (head, error) {
	n, err := dc.arr("message", 0)
	if err != nil {
		return head{}, err
	}
	if n < 1 {
		return head{}, dc.fail("message", 0, "empty array (want the version first)")
	}
	v, err := dc.uint("version")
	if err != nil {
		return head{}, err
	}
	want := 0
	if v <= math.MaxUint8 {
		want = Type(v).datagramLen()
	}
	if want == 0 {
		return head{}, fmt.Errorf("%w: version %d (this build reads %d to %d)", ErrVersion, v, MsgSync, MsgReship)
	}
	if n != want {
		return head{}, dc.fail("message", 0, "array of %d elements, want %d for version %d", n, want, v)
	}
	at := dc.pos()
	from, err := dc.strBytes("from")
	if err != nil {
		return head{}, err
	}
	if len(from) == 0 {
		return head{}, dc.fail("from", at, "empty origin name")
	}
	return head{typ: Type(v), from: from}, nil
}

// packet reads a sync message: its header, the fields of its type (one
// switch over the sync messages' types, the mirror of grouped.encode's),
// and its groups.
func (dc *decoder) packet() (*Packet, error) {
	h, err := dc.header()
	if err != nil {
		return nil, err
	}
	if h.typ.IsRequest() {
		return nil, fmt.Errorf("%w: version %d is a request, not a sync message (DecodeRequest reads it)", ErrVersion, uint8(h.typ))
	}
	p := &Packet{From: string(h.from)}
	if p.Incarnation, err = dc.uint("incarnation"); err != nil {
		return nil, err
	}
	switch h.typ {
	case MsgSync: // [1, from, incarnation, full, base, groups]
		if p.Full, err = dc.bool("full"); err != nil {
			return nil, err
		}
	case MsgSeqSync: // [2, from, incarnation, seq, full, base, groups]
		if p.Seq, err = dc.seq(); err != nil {
			return nil, err
		}
		if p.Full, err = dc.bool("full"); err != nil {
			return nil, err
		}
	case MsgSum: // [4, from, incarnation, false, base, groups]
		p.Sum = true
		at := dc.pos()
		full, err := dc.bool("full")
		if err != nil {
			return nil, err
		}
		if full {
			return nil, dc.fail("full", at, "a sum (version %d) is never full", MsgSum)
		}
	case MsgTargeted: // [5, from, incarnation, seq, sum, base, groups]
		p.Targeted = true
		if p.Seq, err = dc.seq(); err != nil {
			return nil, err
		}
		if p.Sum, err = dc.bool("sum"); err != nil {
			return nil, err
		}
	}
	base, err := dc.int("base")
	if err != nil {
		return nil, err
	}
	// A group takes at least 6 bytes: its array header, a hash, nil and
	// three empty arrays.
	ng, err := dc.arr("groups", 6)
	if err != nil {
		return nil, err
	}
	for i := 0; i < ng; i++ {
		dc.grp = i
		if err := dc.group(p, base); err != nil {
			return nil, err
		}
	}
	dc.grp = -1
	if dc.r.Len() != 0 {
		return nil, dc.fail("message", dc.pos(), "%d trailing bytes after the message", dc.r.Len())
	}
	if (h.typ == MsgSum || h.typ == MsgTargeted) && (len(p.Marks) > 0 || len(p.Gauges) > 0) {
		return nil, dc.fail("groups", dc.pos(), "a sum or targeted message (version %d) holds counts only, got %d marks and %d gauges", uint8(h.typ), len(p.Marks), len(p.Gauges))
	}
	return p, nil
}

// seq reads a sync message's seq: 1 to maxSeq.
func (dc *decoder) seq() (uint64, error) {
	at := dc.pos()
	s, err := dc.uint("seq")
	if err != nil {
		return 0, err
	}
	if s == 0 || s > maxSeq {
		return 0, dc.fail("seq", at, "want 1 to %d, got %d", uint64(maxSeq), s)
	}
	return s, nil
}

func (dc *decoder) group(p *Packet, base int64) error {
	at := dc.pos()
	n, err := dc.arr("group", 0)
	if err != nil {
		return err
	}
	if n != 5 {
		return dc.fail("group", at, "array of %d elements, want 5", n)
	}
	hash, err := dc.uint("hash")
	if err != nil {
		return err
	}
	c, err := dc.peek("name")
	if err != nil {
		return err
	}
	if mpwire.IsNil(c) {
		_ = dc.r.Nil() // the code was peeked: it cannot fail
	} else {
		at = dc.pos()
		k, err := dc.arr("name", 0)
		if err != nil {
			return err
		}
		if k != 2 {
			return dc.fail("name", at, "array of %d elements, want nil or [resource, domain]", k)
		}
		nm := Name{Hash: hash}
		if nm.Resource, err = dc.str("name.resource"); err != nil {
			return err
		}
		if nm.Domain, err = dc.str("name.domain"); err != nil {
			return err
		}
		p.Names = append(p.Names, nm)
	}

	at = dc.pos()
	k, err := dc.arr("counts", 1)
	if err != nil {
		return err
	}
	if k%3 != 0 {
		return dc.fail("counts", at, "%d values is not a multiple of 3 (slot, bucket, value)", k)
	}
	p.Counts = slices.Grow(p.Counts, k/3)
	for j := 0; j < k/3; j++ {
		dc.ent = j
		at = dc.pos()
		slot, err := dc.uint("counts")
		if err != nil {
			return err
		}
		if slot > math.MaxUint32 {
			return dc.fail("counts", at, "slot %d overflows uint32", slot)
		}
		bucket, err := dc.offset("counts", base)
		if err != nil {
			return err
		}
		val, err := dc.uint("counts")
		if err != nil {
			return err
		}
		p.Counts = append(p.Counts, Count{Hash: hash, Slot: uint32(slot), Bucket: bucket, Value: val})
	}
	dc.ent = -1

	at = dc.pos()
	k, err = dc.arr("marks", 1)
	if err != nil {
		return err
	}
	if k%2 != 0 {
		return dc.fail("marks", at, "%d values is not a multiple of 2 (slot, at)", k)
	}
	p.Marks = slices.Grow(p.Marks, k/2)
	for j := 0; j < k/2; j++ {
		dc.ent = j
		at = dc.pos()
		slot, err := dc.uint("marks")
		if err != nil {
			return err
		}
		if slot > math.MaxUint32 {
			return dc.fail("marks", at, "slot %d overflows uint32", slot)
		}
		t, err := dc.offset("marks", base)
		if err != nil {
			return err
		}
		p.Marks = append(p.Marks, Mark{Hash: hash, Slot: uint32(slot), At: t})
	}
	dc.ent = -1

	at = dc.pos()
	k, err = dc.arr("gauges", 1)
	if err != nil {
		return err
	}
	if k%2 != 0 {
		return dc.fail("gauges", at, "%d values is not a multiple of 2 (value, version)", k)
	}
	p.Gauges = slices.Grow(p.Gauges, k/2)
	for j := 0; j < k/2; j++ {
		dc.ent = j
		val, err := dc.int("gauges")
		if err != nil {
			return err
		}
		ver, err := dc.uint("gauges")
		if err != nil {
			return err
		}
		p.Gauges = append(p.Gauges, Gauge{Hash: hash, Value: val, Version: ver})
	}
	dc.ent = -1
	return nil
}

// request reads a Request: its header and the fields both of its types
// share.
func (dc *decoder) request() (*Request, error) {
	h, err := dc.header()
	if err != nil {
		return nil, err
	}
	if !h.typ.IsRequest() {
		return nil, fmt.Errorf("%w: version %d is a sync message, not a request (Decode reads it)", ErrVersion, uint8(h.typ))
	}
	// [3 or 6, from, incarnation, target, seqs, hashes]
	r := &Request{From: string(h.from), Reship: h.typ == MsgReship}
	if r.Incarnation, err = dc.uint("incarnation"); err != nil {
		return nil, err
	}
	if r.Target, err = dc.uint("target"); err != nil {
		return nil, err
	}
	if r.Seqs, err = dc.uints("seqs", true); err != nil {
		return nil, err
	}
	if r.Hashes, err = dc.uints("hashes", false); err != nil {
		return nil, err
	}
	if dc.r.Len() != 0 {
		return nil, dc.fail("message", dc.pos(), "%d trailing bytes after the request", dc.r.Len())
	}
	return r, nil
}

// uints reads an array of at most MaxRequestItems unsigned integers (seqs:
// each 1 to maxSeq).
func (dc *decoder) uints(field string, seqs bool) ([]uint64, error) {
	at := dc.pos()
	n, err := dc.arr(field, 1)
	if err != nil {
		return nil, err
	}
	if n > MaxRequestItems {
		return nil, dc.fail(field, at, "%d items, at most %d", n, MaxRequestItems)
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]uint64, n)
	for i := range out {
		dc.ent = i
		at = dc.pos()
		if out[i], err = dc.uint(field); err != nil {
			return nil, err
		}
		if seqs && (out[i] == 0 || out[i] > maxSeq) {
			return nil, dc.fail(field, at, "want 1 to %d, got %d", uint64(maxSeq), out[i])
		}
	}
	dc.ent = -1
	return out, nil
}

// codeName describes a msgpack code for error messages.
func codeName(c byte) string {
	switch {
	case mpwire.IsNil(c):
		return "nil"
	case mpwire.IsBool(c):
		return "a bool"
	case mpwire.IsInt(c):
		return "an integer"
	case mpwire.IsStr(c):
		return "a string"
	case mpwire.IsBin(c):
		return "binary"
	case mpwire.IsArray(c):
		return "an array"
	case mpwire.IsMap(c):
		return "a map"
	case mpwire.IsFloat(c):
		return "a float"
	case mpwire.IsExt(c):
		return "an extension"
	}
	return fmt.Sprintf("code %#x", c)
}
