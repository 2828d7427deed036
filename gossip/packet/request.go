package packet

// This file has one job, the Request: what a receiver asks of an origin
// whose stream it follows (the messages it missed, the names of key hashes
// it does not know), and its wire form.

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Request asks the origin of a stream for what its sender lacks: the
// messages numbered Seqs of the origin's incarnation Target (to be sent
// again), and the names of the key hashes Hashes. From and Incarnation are
// the asking node's.
//
// A Reship request (version ReshipVersion, same layout) is about the
// origin's stream to the asker alone (Packet.Targeted): it asks for the
// messages Seqs again, and for those the origin no longer keeps, or when
// it lists none (the asker gave up on a gap), for a reship: every live
// count the origin routes to the asker and every sum it owes it.
type Request struct {
	From        string
	Incarnation uint64
	Target      uint64 // the incarnation of the origin whose stream is asked
	Seqs        []uint64
	Hashes      []uint64
	Reship      bool
}

// MaxRequestItems bounds the seqs and the hashes of one Request each, so
// that a request fits in a datagram of any budget of 2,500 bytes or more
// (9 bytes an item at worst).
const MaxRequestItems = 128

// EncodeRequest returns r as one message. It fails, wrapping ErrInvalid,
// for an empty From, a zero or out-of-range seq, or more than
// MaxRequestItems seqs or hashes.
func EncodeRequest(r *Request) ([]byte, error) {
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: nil request", ErrInvalid)
	case r.From == "":
		return nil, fmt.Errorf("%w: empty From (the asking node's name is required)", ErrInvalid)
	case len(r.Seqs) > MaxRequestItems || len(r.Hashes) > MaxRequestItems:
		return nil, fmt.Errorf("%w: %d seqs and %d hashes, at most %d of each", ErrInvalid, len(r.Seqs), len(r.Hashes), MaxRequestItems)
	}
	for _, s := range r.Seqs {
		if s == 0 || s > maxSeq {
			return nil, fmt.Errorf("%w: seq %d, want 1 to %d", ErrInvalid, s, uint64(maxSeq))
		}
	}
	var buf bytes.Buffer
	e := msgpack.GetEncoder()
	defer msgpack.PutEncoder(e)
	e.Reset(&buf)
	var err error
	w := func(e2 error) {
		if err == nil {
			err = e2
		}
	}
	w(e.EncodeArrayLen(6))
	if r.Reship {
		w(e.EncodeUint(ReshipVersion))
	} else {
		w(e.EncodeUint(RequestVersion))
	}
	w(e.EncodeString(r.From))
	w(e.EncodeUint(r.Incarnation))
	w(e.EncodeUint(r.Target))
	w(e.EncodeArrayLen(len(r.Seqs)))
	for _, s := range r.Seqs {
		w(e.EncodeUint(s))
	}
	w(e.EncodeArrayLen(len(r.Hashes)))
	for _, h := range r.Hashes {
		w(e.EncodeUint(h))
	}
	if err != nil {
		return nil, fmt.Errorf("gossip: encode request: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeRequest parses one message made by EncodeRequest, as strictly as
// Decode parses a sync message: anything else is an error wrapping
// ErrMalformed or ErrVersion (a sync message among them). It never panics.
// Safe for concurrent use.
func DecodeRequest(b []byte) (*Request, error) { return withDecoder(b, (*decoder).request) }

func (dc *decoder) request() (*Request, error) {
	h, err := dc.header()
	if err != nil {
		return nil, err
	}
	if h.version != RequestVersion && h.version != ReshipVersion {
		return nil, fmt.Errorf("%w: version %d is a sync message, not a request (Decode reads it)", ErrVersion, h.version)
	}
	r := &Request{From: string(h.from), Reship: h.version == ReshipVersion}
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
