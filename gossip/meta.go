package gossip

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Node meta, what memberlist carries about each member for this package:
// the msgpack array [1, incarnation uint, leaving bool].

func encodeMeta(inc uint64, leaving bool) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	_ = e.EncodeArrayLen(3) // a bytes.Buffer does not fail
	_ = e.EncodeUint(1)
	_ = e.EncodeUint(inc)
	_ = e.EncodeBool(leaving)
	return buf.Bytes()
}

// decodeMeta parses node meta; ok is false for meta this package did not
// write (a foreign or newer member). It is strict: exactly the three
// elements, a version of 1, a non-negative incarnation in any msgpack
// integer encoding, a bool, nothing after.
func decodeMeta(b []byte) (inc uint64, leaving, ok bool) {
	r := bytes.NewReader(b)
	d := msgpack.GetDecoder()
	defer msgpack.PutDecoder(d)
	d.Reset(r)
	if n, err := d.DecodeArrayLen(); err != nil || n != 3 {
		return 0, false, false
	}
	if v, ok := metaUint(d); !ok || v != 1 {
		return 0, false, false
	}
	inc, ok = metaUint(d)
	if !ok {
		return 0, false, false
	}
	if c, err := d.PeekCode(); err != nil || c != msgpcode.True && c != msgpcode.False {
		return 0, false, false
	}
	leaving, err := d.DecodeBool()
	if err != nil || r.Len() != 0 {
		return 0, false, false
	}
	return inc, leaving, true
}

// metaUint reads a non-negative integer of any msgpack integer encoding
// (msgpack's own DecodeUint64 also takes nil, and a negative as its two's
// complement).
func metaUint(d *msgpack.Decoder) (uint64, bool) {
	c, err := d.PeekCode()
	if err != nil || c == msgpcode.Nil {
		return 0, false
	}
	if c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64 ||
		msgpcode.IsFixedNum(c) && c > msgpcode.PosFixedNumHigh {
		v, err := d.DecodeInt64()
		return uint64(v), err == nil && v >= 0
	}
	v, err := d.DecodeUint64()
	return v, err == nil
}
