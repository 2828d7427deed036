package packet

// This file has one job, the messages' types: the message enum (Type),
// the wire grammar of each message, and the Go values they carry.
// encode.go writes them, decode.go reads them, state.go wraps them into a
// mesh state.

import (
	"errors"
	"fmt"
	"math"
)

// Type is the type of a message: the first element of every message, one
// value per message, each with one layout (below), one encoder and one
// decoder. Earlier releases called it the message's version; the values
// are the same, so agents of either release read each other.
//
// Every value a msgpack array or a compact int:
//
//	MsgSync     = [1, from str, incarnation uint, full bool, base int, groups]
//	MsgSeqSync  = [2, from str, incarnation uint, seq uint, full bool, base int, groups]
//	MsgRequest  = [3, from str, incarnation uint, target uint, seqs, hashes]
//	MsgSum      = [4, from str, incarnation uint, false, base int, groups]
//	MsgTargeted = [5, from str, incarnation uint, seq uint, sum bool, base int, groups]
//	MsgReship   = [6, from str, incarnation uint, target uint, seqs, hashes]
//	MsgState    = [7, from str, incarnation uint, own bin, held(, sums bin)]   (see state.go)
//	group       = [hash uint, name, counts, marks, gauges]
//	name        = nil | [resource str, domain str]
//	counts      = [slot uint, bucket−base uint, value uint, …]   (3 per Count)
//	marks       = [slot uint, at−base uint, …]                   (2 per Mark)
//	gauges      = [value int, version uint, …]                   (2 per Gauge)
//	seqs        = [seq uint, …]    (at most MaxRequestItems, each 1 to 2^63−1)
//	hashes      = [hash uint, …]   (at most MaxRequestItems)
//
// Entries are grouped by key hash, so a hash is sent once per message;
// bucket starts and tier entries are sent as offsets from base (the least
// of them in the message), which keeps them to one to three bytes instead
// of nine. The origin name is the second element of every message, which
// Peek reads without decoding the rest.
type Type uint8

const (
	// MsgSync is an unsequenced sync message: a delta, a full snapshot
	// (Packet.Full), or the names a Request asked for. Packet.Seq 0.
	MsgSync Type = 1
	// MsgSeqSync is a sync message numbered in its origin's stream to
	// every peer (Packet.Seq).
	MsgSeqSync Type = 2
	// MsgRequest asks an origin for messages of its stream again and for
	// the names of key hashes (Request).
	MsgRequest Type = 3
	// MsgSum is a sum from a key's owner to one node (Packet.Sum): the
	// layout of MsgSync, its counts sums over origins, never full.
	MsgSum Type = 4
	// MsgTargeted is a message to one node numbered in its origin's
	// stream to that node (Packet.Targeted): counts to a key's owner, or a
	// sum.
	MsgTargeted Type = 5
	// MsgReship is a Request about the origin's targeted stream to the
	// asker (Request.Reship): MsgRequest's layout.
	MsgReship Type = 6
	// MsgState is a mesh state: a push/pull state or a state file that
	// holds other origins' counts beside the node's own (EncodeState). It
	// is never a datagram: Decode and Peek refuse it.
	MsgState Type = 7
)

// String returns the message type's name, for logs and errors.
func (t Type) String() string {
	switch t {
	case MsgSync:
		return "sync"
	case MsgSeqSync:
		return "sequenced sync"
	case MsgRequest:
		return "request"
	case MsgSum:
		return "sum"
	case MsgTargeted:
		return "targeted"
	case MsgReship:
		return "reship request"
	case MsgState:
		return "mesh state"
	}
	return fmt.Sprintf("type %d", uint8(t))
}

// IsRequest reports whether a message of type t is a Request
// (DecodeRequest reads it) rather than a sync message (Decode reads it).
func (t Type) IsRequest() bool { return t == MsgRequest || t == MsgReship }

// datagramLen returns the number of elements of a datagram of type t, or 0
// for a type that is not a datagram (MsgState, or one this build does not
// know).
func (t Type) datagramLen() int {
	switch t {
	case MsgSync, MsgRequest, MsgSum, MsgReship:
		return 6
	case MsgSeqSync, MsgTargeted:
		return 7
	}
	return 0
}

// Type returns the type p is written as: MsgTargeted when Targeted (a sum
// or not), else MsgSum when Sum, else MsgSeqSync when it has a Seq, else
// MsgSync. EncodeState writes a Full packet with Held origins as a
// MsgState.
func (p *Packet) Type() Type {
	switch {
	case p.Targeted:
		return MsgTargeted
	case p.Sum:
		return MsgSum
	case p.Seq != 0:
		return MsgSeqSync
	}
	return MsgSync
}

// Type returns the type r is written as: MsgReship or MsgRequest.
func (r *Request) Type() Type {
	if r.Reship {
		return MsgReship
	}
	return MsgRequest
}

// maxSeq is the greatest seq: a stream that would pass it (never, at any
// real rate) is refused rather than wrapped.
const maxSeq = math.MaxUint64 / 2

// MaxRequestItems bounds the seqs and the hashes of one Request each, so
// that a request fits in a datagram of any budget of 2,500 bytes or more
// (9 bytes an item at worst).
const MaxRequestItems = 128

// ErrMalformed is wrapped by every decoding error about bytes that are not
// one well-formed message of the type they claim (truncated, wrong type,
// bad length, trailing bytes).
var ErrMalformed = errors.New("gossip: malformed message")

// ErrVersion is wrapped by the decoding error for a message of a type this
// build does not read, or not where it was read (a Request given to
// Decode, a sync message to DecodeRequest, a mesh state as a datagram).
// The error names the type as the message's version, as earlier releases
// did.
var ErrVersion = errors.New("gossip: unsupported message version")

// ErrTooLarge is wrapped by the Split error for an entry that cannot fit in
// one message of the given budget, even alone with its key's name.
var ErrTooLarge = errors.New("gossip: entry too large for the message budget")

// ErrInvalid is wrapped by the encoding errors for a message that cannot be
// sent (no origin name, a nil packet, a shape its type does not allow).
var ErrInvalid = errors.New("gossip: invalid packet")

// Packet is one sync message from a node: cumulative counters, marks and
// gauges for keys. The zero value is an empty delta with no origin, which
// Encode rejects.
type Packet struct {
	From        string // origin node name
	Incarnation uint64 // origin's incarnation (its start time, unix ns); a higher one replaces a lower one's state
	Full        bool   // a full snapshot (push/pull) rather than a delta
	// Seq is the message's place in its origin's stream (1, 2, …), or 0
	// for an unsequenced message. Split numbers the messages of a packet
	// Seq, Seq+1, …; a snapshot's Seq is the one its origin's next
	// message was to get when it was taken (every earlier message's
	// content is in it).
	Seq uint64
	// Sum marks a message from the owner of its keys to one node (the
	// receiver): each Count is the sum of the counts of every origin but
	// the receiver, as the owner knows them (a lower bound of the truth,
	// which only grows), with the keys' Names. A sum has no Seq, is never
	// Full and carries no Marks or Gauges.
	Sum bool
	// Targeted marks a message to one node numbered in its origin's
	// stream to that node: Seq is its place there (1, 2, …), not in the
	// origin's stream to every peer, and its receiver asks for one it
	// finds missing with a Reship request. A targeted message is never
	// Full and carries counts (and their names) only; it may be a Sum.
	Targeted bool
	Names    []Name
	Counts   []Count
	Marks    []Mark
	Gauges   []Gauge
	// Held are the counts and tier entries this node keeps for other
	// origins (a Full packet only: a push/pull state or a state file,
	// EncodeState). Encode and Split ignore it.
	Held []Held
	// Sums are, in owner mode, the counts of keys this node knows as
	// owners' sums rather than per origin: each the whole count of its
	// key and bucket as this node's engine holds it (every origin's,
	// its own included), a lower bound of the truth (a Full packet only,
	// EncodeState; the keys' names in Names). A node that joins takes
	// them as a sum for the buckets it has not counted itself, so that it
	// knows a key near its limit before the key's owner first tells it.
	// Encode and Split ignore it.
	Sums []Count
	// Join is set by the receiver of a push/pull state that came in a
	// join (memberlist's), never on the wire.
	Join bool
}

// Name resolves a key hash to the resource and domain it was made from.
type Name struct {
	Hash     uint64
	Resource string
	Domain   string
}

// Count is the origin's cumulative count of hits for a key in one time bucket.
// Receivers keep the max per (origin, key, slot, bucket).
type Count struct {
	Hash   uint64
	Slot   uint32
	Bucket int64  // unix ms of the bucket's start
	Value  uint64 // the origin's cumulative count
}

// Mark is a tier entry: the key entered tier Slot at At (unix ms).
type Mark struct {
	Hash uint64
	Slot uint32
	At   int64 // unix ms
}

// Gauge is the origin's current value for a key (a copy contribution); a
// higher Version wins.
type Gauge struct {
	Hash    uint64
	Value   int64
	Version uint64
}

// Request asks the origin of a stream for what its sender lacks: the
// messages numbered Seqs of the origin's incarnation Target (to be sent
// again), and the names of the key hashes Hashes. From and Incarnation are
// the asking node's.
//
// A Reship request (MsgReship, same layout) is about the origin's stream
// to the asker alone (Packet.Targeted): it asks for the messages Seqs
// again, and for those the origin no longer keeps, or when it lists none
// (the asker gave up on a gap), for a reship: every live count the origin
// routes to the asker and every sum it owes it.
type Request struct {
	From        string
	Incarnation uint64
	Target      uint64 // the incarnation of the origin whose stream is asked
	Seqs        []uint64
	Hashes      []uint64
	Reship      bool
}

// hasSeq reports whether a message of type t carries a seq.
func (t Type) hasSeq() bool { return t == MsgSeqSync || t == MsgTargeted }
