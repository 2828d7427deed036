package packet

// This file has one job, the mesh state: a node's push/pull state (or its
// state file) with what it holds for other origins beside its own, so that
// a node that joins learns every live count the mesh holds.

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/obol-dev/obol/internal/wire/mpwire"
)

// A mesh state (MsgState) is a Full packet with Held origins (EncodeState,
// DecodeState). It is never a datagram: Decode and Peek refuse it, and only
// a push/pull state or a state file holds one.
//
//	state = [7, from str, incarnation uint, own bin, held]
//	      | [7, from str, incarnation uint, own bin, held, sums bin]
//	held  = [bin, …]
//
// own is the node's own snapshot, a MsgSync or MsgSeqSync message with
// Full set, from the same origin and incarnation; each held bin is a
// MsgSync message (not Full, no gauges) whose origin is the origin held;
// sums, present only when the state has some (Packet.Sums), is a MsgSum
// message from the same origin and incarnation. A key's name rides the
// first message of the state that has the key. A release that reads only
// the five-element form refuses the six (gossip sends sums only to
// members that read them).

// MaxHeld bounds the origins one state holds: DecodeState refuses more,
// EncodeState too.
const MaxHeld = 1 << 16

// Held is what a node keeps of another origin's counts and tier entries
// (an origin live, departed or dead, or an earlier incarnation of a name,
// the node's own included), passed on in a mesh state until their windows
// end. A receiver keeps the max per (origin, incarnation, key, slot,
// bucket), as for the origin's own messages, so nothing is counted twice.
type Held struct {
	From        string
	Incarnation uint64
	Counts      []Count
	Marks       []Mark
}

// EncodeState returns p, a Full packet, as one message: a mesh state when
// p.Held is not empty, else the message Encode writes. Names of held keys
// are taken from p.Names. It fails, wrapping ErrInvalid, for a packet that
// is not Full, a Sum or Targeted, a held origin with no name, or more than
// MaxHeld of them.
func EncodeState(p *Packet) ([]byte, error) {
	if p == nil || !p.Full || p.Sum || p.Targeted {
		return nil, fmt.Errorf("%w: a state is a full packet, not a sum or targeted message", ErrInvalid)
	}
	if len(p.Held) == 0 && len(p.Sums) == 0 {
		return Encode(p)
	}
	if len(p.Held) > MaxHeld {
		return nil, fmt.Errorf("%w: %d held origins, at most %d", ErrInvalid, len(p.Held), MaxHeld)
	}
	names := make(map[uint64]*Name, len(p.Names))
	for i := range p.Names {
		names[p.Names[i].Hash] = &p.Names[i]
	}
	given := make(map[uint64]bool, len(p.Names))
	// nameFor returns the names of the keys of counts and marks not given
	// yet in this state.
	nameFor := func(cs []Count, ms []Mark, gs []Gauge) []Name {
		var out []Name
		add := func(h uint64) {
			if given[h] {
				return
			}
			if n := names[h]; n != nil {
				given[h] = true
				out = append(out, *n)
			}
		}
		for _, c := range cs {
			add(c.Hash)
		}
		for _, m := range ms {
			add(m.Hash)
		}
		for _, g := range gs {
			add(g.Hash)
		}
		return out
	}
	own := *p
	own.Held, own.Sums = nil, nil
	own.Names = nameFor(p.Counts, p.Marks, p.Gauges)
	ob, err := Encode(&own)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, len(ob)+64)
	if len(p.Sums) > 0 {
		buf = mpwire.AppendArrayLen(buf, 6)
	} else {
		buf = mpwire.AppendArrayLen(buf, 5)
	}
	buf = mpwire.AppendInt(buf, int64(MsgState))
	buf = mpwire.AppendStr(buf, p.From)
	buf = appendUint(buf, p.Incarnation)
	buf = appendBin(buf, ob)
	buf = mpwire.AppendArrayLen(buf, len(p.Held))
	for i := range p.Held {
		h := &p.Held[i]
		if h.From == "" {
			return nil, fmt.Errorf("%w: held[%d] has no origin name", ErrInvalid, i)
		}
		hb, err := Encode(&Packet{From: h.From, Incarnation: h.Incarnation, Counts: h.Counts, Marks: h.Marks,
			Names: nameFor(h.Counts, h.Marks, nil)})
		if err != nil {
			return nil, fmt.Errorf("held[%d]: %w", i, err)
		}
		buf = appendBin(buf, hb)
	}
	if len(p.Sums) > 0 {
		sb, err := Encode(&Packet{From: p.From, Incarnation: p.Incarnation, Sum: true, Counts: p.Sums,
			Names: nameFor(p.Sums, nil, nil)})
		if err != nil {
			return nil, fmt.Errorf("sums: %w", err)
		}
		buf = appendBin(buf, sb)
	}
	return buf, nil
}

// appendUint appends v in msgpack's smallest unsigned encoding.
func appendUint(b []byte, v uint64) []byte {
	var w bytes.Buffer
	e := msgpack.NewEncoder(&w)
	_ = e.EncodeUint(v) // a bytes.Buffer does not fail
	return append(b, w.Bytes()...)
}

// appendBin appends v as a msgpack bin.
func appendBin(b, v []byte) []byte {
	switch n := len(v); {
	case n <= 0xff:
		b = append(b, 0xc4, byte(n))
	case n <= 0xffff:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = append(b, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, v...)
}

// DecodeState parses a push/pull state or a state file: a mesh state
// (EncodeState) or a full MsgSync or MsgSeqSync message (Encode). It is as
// strict as Decode: anything else is an error wrapping ErrMalformed or
// ErrVersion that names the part that was wrong. The Held origins' names
// are in the packet's Names. It never panics. Safe for concurrent use.
func DecodeState(b []byte) (*Packet, error) {
	var r mpwire.Reader
	r.Reset(b)
	c, err := r.Peek()
	if err != nil || !mpwire.IsArray(c) {
		return Decode(b) // its error names what is wrong
	}
	n, err := r.ArrayLen()
	if err != nil || n < 1 {
		return Decode(b)
	}
	v, err := r.Uint()
	if err != nil || v != uint64(MsgState) {
		p, err := Decode(b)
		if err == nil && !p.Full {
			return nil, fmt.Errorf("%w: state: a version-%d message that is not full", ErrMalformed, v)
		}
		return p, err
	}
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("%w: state: %s at byte %d: %s", ErrMalformed, field, r.Pos(), fmt.Sprintf(format, args...))
	}
	if n != 5 && n != 6 {
		return nil, bad("message", "array of %d elements, want 5 or 6 for version %d", n, MsgState)
	}
	if c, err := r.Peek(); err != nil || !mpwire.IsStr(c) {
		return nil, bad("from", "want a string")
	}
	from, err := r.ReadStr()
	if err != nil || len(from) == 0 {
		return nil, bad("from", "want a non-empty origin name")
	}
	if c, err := r.Peek(); err != nil || !mpwire.IsInt(c) {
		return nil, bad("incarnation", "want an unsigned integer")
	}
	inc, err := r.Uint()
	if err != nil {
		return nil, bad("incarnation", "%v", err)
	}
	bin := func(field string) ([]byte, error) {
		if c, err := r.Peek(); err != nil || !mpwire.IsBin(c) {
			return nil, bad(field, "want a bin")
		}
		l, err := r.BytesLen()
		if err != nil || l > r.Len() {
			return nil, bad(field, "bin longer than the %d bytes left", r.Len())
		}
		return r.Take(l)
	}
	ob, err := bin("own")
	if err != nil {
		return nil, err
	}
	p, err := Decode(ob)
	if err != nil {
		return nil, fmt.Errorf("state: own: %w", err)
	}
	if !p.Full || p.Sum || p.Targeted || p.From != string(from) || p.Incarnation != inc {
		return nil, bad("own", "want a full message from %q incarnation %d", from, inc)
	}
	if c, err := r.Peek(); err != nil || !mpwire.IsArray(c) {
		return nil, bad("held", "want an array")
	}
	nh, err := r.ArrayLen()
	// A held message takes at least 8 bytes: its bin header and a
	// MsgSync message with a one-byte name.
	if err != nil || nh > MaxHeld || nh > r.Len()/8 {
		return nil, bad("held", "want at most %d held origins within the bytes left", MaxHeld)
	}
	if nh > 0 {
		p.Held = make([]Held, 0, nh)
	}
	for i := 0; i < nh; i++ {
		hb, err := bin(fmt.Sprintf("held[%d]", i))
		if err != nil {
			return nil, err
		}
		h, err := Decode(hb)
		if err != nil {
			return nil, fmt.Errorf("state: held[%d]: %w", i, err)
		}
		if h.Full || h.Seq != 0 || h.Sum || h.Targeted || len(h.Gauges) > 0 {
			return nil, bad(fmt.Sprintf("held[%d]", i), "want a version-1 (sync) message of counts and marks, not full")
		}
		p.Names = append(p.Names, h.Names...)
		p.Held = append(p.Held, Held{From: h.From, Incarnation: h.Incarnation, Counts: h.Counts, Marks: h.Marks})
	}
	if n == 6 {
		sb, err := bin("sums")
		if err != nil {
			return nil, err
		}
		s, err := Decode(sb)
		if err != nil {
			return nil, fmt.Errorf("state: sums: %w", err)
		}
		if !s.Sum || s.Targeted || s.From != string(from) || s.Incarnation != inc {
			return nil, bad("sums", "want a sum message from %q incarnation %d", from, inc)
		}
		p.Names = append(p.Names, s.Names...)
		p.Sums = s.Counts
	}
	if r.Len() != 0 {
		return nil, bad("message", "%d trailing bytes after the state", r.Len())
	}
	return p, nil
}
