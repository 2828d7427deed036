package packet

// This file has one job, the version-1 wire form of a Packet: the types, the
// encoder (grouping by key hash, exact sizes, Split's planning into budgets)
// and the strict decoder. The sizes and the encoder must agree byte for
// byte, so they stay together.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/obol-dev/obol/internal/wire/mpwire"
)

// WireVersion is the version of the unsequenced sync message: Encode and
// Split write it for a Packet whose Seq is 0. SeqVersion is the sequenced
// one, written for a Packet with a Seq; Decode reads both. RequestVersion
// is the version number of a Request (EncodeRequest, DecodeRequest).
// SumVersion is the sum message a key's owner sends a node (Packet.Sum):
// the layout of version 1, its counts sums over origins. TargetedVersion
// is a message to one node numbered in its origin's stream to that node
// (Packet.Targeted): counts to a key's owner, or a sum. ReshipVersion is
// a Request about that stream (Request.Reship).
//
// Every value a msgpack array or a compact int:
//
//	message = [1, from str, incarnation uint, full bool, base int, groups]
//	        | [2, from str, incarnation uint, seq uint, full bool, base int, groups]
//	request = [3, from str, incarnation uint, target uint, seqs, hashes]
//	        | [4, from str, incarnation uint, false, base int, groups] (a sum)
//	        | [5, from str, incarnation uint, seq uint, sum bool, base int, groups] (targeted)
//	        | [6, from str, incarnation uint, target uint, seqs, hashes] (a reship request)
//	group   = [hash uint, name, counts, marks, gauges]
//	name    = nil | [resource str, domain str]
//	counts  = [slot uint, bucket−base uint, value uint, …]   (3 per Count)
//	marks   = [slot uint, at−base uint, …]                   (2 per Mark)
//	gauges  = [value int, version uint, …]                   (2 per Gauge)
//
// Entries are grouped by key hash, so a hash is sent once per message; bucket
// starts and tier entries are sent as offsets from base (the least of them in
// the packet), which keeps them to one to three bytes instead of nine. The
// origin name is the second element of every message, which Peek reads
// without decoding the rest.
const (
	WireVersion     = 1
	SeqVersion      = 2
	RequestVersion  = 3
	SumVersion      = 4
	TargetedVersion = 5
	ReshipVersion   = 6
)

// maxSeq is the greatest seq: a stream that would pass it (never, at any
// real rate) is refused rather than wrapped.
const maxSeq = math.MaxUint64 / 2

// ErrMalformed is wrapped by every Decode error about bytes that are not a
// well-formed version-1 message (truncated, wrong type, bad length, trailing
// bytes).
var ErrMalformed = errors.New("gossip: malformed message")

// ErrVersion is wrapped by the Decode error for a message of a version this
// build does not read.
var ErrVersion = errors.New("gossip: unsupported message version")

// ErrTooLarge is wrapped by the Split error for an entry that cannot fit in
// one message of the given budget, even alone with its key's name.
var ErrTooLarge = errors.New("gossip: entry too large for the message budget")

// ErrInvalid is wrapped by Encode and Split errors for a packet that cannot be
// sent (no origin name, or a nil packet).
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

// group is one key's entries: a hash, at most one name and ranges of the
// packet's entries (in the backing arrays of a grouped packet).
type group struct {
	hash    uint64
	name    *Name
	c0, c1  int // counts[c0:c1]
	m0, m1  int // marks[m0:m1]
	g0, g1  int // gauges[g0:g1]
	csz     int // encoded size of counts[c0:c1] without the array header
	msz     int
	gsz     int
	nameLen int // encoded size of the name field (1 for nil)
}

// grouped is a packet's entries reordered by key hash, ready to encode. It is
// pooled: get one with groupPacket, return it with release.
type grouped struct {
	p      *Packet
	base   int64
	counts []Count
	marks  []Mark
	gauges []Gauge
	groups []group
	extra  []group
	idx    map[uint64]int
	plan   []group // Split's layout, see planner
	ends   []int
}

var groupedPool = sync.Pool{New: func() any { return &grouped{idx: map[uint64]int{}} }}

// release returns gp to the pool, dropping its references to the packet.
// Scratch grown past maxPooled entries is left to the collector.
func (gp *grouped) release() {
	const maxPooled = 1 << 14
	if len(gp.groups) > maxPooled || len(gp.counts) > maxPooled || len(gp.plan) > maxPooled {
		return
	}
	clear(gp.idx)
	clear(gp.groups) // drop *Name pointers into the packet
	clear(gp.extra)
	clear(gp.plan)
	gp.plan, gp.ends = gp.plan[:0], gp.ends[:0]
	gp.p, gp.base = nil, 0
	gp.counts, gp.marks, gp.gauges = gp.counts[:0], gp.marks[:0], gp.gauges[:0]
	gp.groups, gp.extra = gp.groups[:0], gp.extra[:0]
	groupedPool.Put(gp)
}

// size returns the encoded size of g.
func (g *group) size() int {
	return 1 + uintLen(g.hash) + g.nameLen +
		arrLen(3*(g.c1-g.c0)) + g.csz +
		arrLen(2*(g.m1-g.m0)) + g.msz +
		arrLen(2*(g.g1-g.g0)) + g.gsz
}

// groupPacket orders p's entries by key hash (hashes in order of first
// appearance in Names, Counts, Marks, Gauges; entries of one hash in packet
// order). The first Name of a hash travels with its entries; any further Name
// for the same hash gets a group of its own, so nothing is lost.
func groupPacket(p *Packet) *grouped {
	gp := groupedPool.Get().(*grouped)
	gp.p = p
	idx := gp.idx
	gs, extra := gp.groups[:0], gp.extra[:0]
	at := func(h uint64) int {
		i, ok := idx[h]
		if !ok {
			i = len(gs)
			idx[h] = i
			gs = append(gs, group{hash: h, nameLen: 1})
		}
		return i
	}
	for k := range p.Names {
		nm := &p.Names[k]
		i := at(nm.Hash)
		if gs[i].name == nil {
			gs[i].name = nm
			gs[i].nameLen = nameLen(nm)
			continue
		}
		extra = append(extra, group{hash: nm.Hash, name: nm, nameLen: nameLen(nm)})
	}
	first := true
	for _, c := range p.Counts {
		gs[at(c.Hash)].c1++ // a count for now; turned into ranges below
		if first || c.Bucket < gp.base {
			gp.base = c.Bucket
		}
		first = false
	}
	for _, m := range p.Marks {
		gs[at(m.Hash)].m1++
		if first || m.At < gp.base {
			gp.base = m.At
		}
		first = false
	}
	for _, g := range p.Gauges {
		gs[at(g.Hash)].g1++
	}
	var c, m, g int
	for i := range gs {
		gr := &gs[i]
		nc, nm, ng := gr.c1, gr.m1, gr.g1
		gr.c0, gr.c1 = c, c
		gr.m0, gr.m1 = m, m
		gr.g0, gr.g1 = g, g
		c, m, g = c+nc, m+nm, g+ng
	}
	gp.counts = slices.Grow(gp.counts[:0], len(p.Counts))[:len(p.Counts)]
	gp.marks = slices.Grow(gp.marks[:0], len(p.Marks))[:len(p.Marks)]
	gp.gauges = slices.Grow(gp.gauges[:0], len(p.Gauges))[:len(p.Gauges)]
	for _, e := range p.Counts {
		gr := &gs[idx[e.Hash]]
		gp.counts[gr.c1] = e
		gr.c1++
		gr.csz += countLen(e, gp.base)
	}
	for _, e := range p.Marks {
		gr := &gs[idx[e.Hash]]
		gp.marks[gr.m1] = e
		gr.m1++
		gr.msz += markLen(e, gp.base)
	}
	for _, e := range p.Gauges {
		gr := &gs[idx[e.Hash]]
		gp.gauges[gr.g1] = e
		gr.g1++
		gr.gsz += gaugeLen(e)
	}
	gp.extra = extra
	gp.groups = append(gs, extra...)
	return gp
}

// with returns g extended by one entry of kind (0 count, 1 mark, 2 gauge) of
// encoded size sz.
func (g group) with(kind, sz int) group {
	switch kind {
	case 0:
		g.c1++
		g.csz += sz
	case 1:
		g.m1++
		g.msz += sz
	default:
		g.g1++
		g.gsz += sz
	}
	return g
}

// after returns an empty piece of g's key that starts where g ends.
func (g group) after() group {
	g.c0, g.m0, g.g0 = g.c1, g.m1, g.g1
	g.csz, g.msz, g.gsz = 0, 0, 0
	return g
}

func (g *group) empty() bool { return g.c0 == g.c1 && g.m0 == g.m1 && g.g0 == g.g1 }

// headerLen returns the encoded size of a message header, up to and excluding
// the groups array header.
// With a Seq it counts the seq of the packet's last possible message (one
// per entry and group at most), so that it bounds every message's header.
func (gp *grouped) headerLen() int {
	n := 1 + 1 + strLen(gp.p.From) + uintLen(gp.p.Incarnation) + 1 + intLen(gp.base)
	if gp.p.Seq != 0 {
		last := gp.p.Seq + uint64(len(gp.counts)+len(gp.marks)+len(gp.gauges)+len(gp.groups))
		n += uintLen(last)
	}
	return n
}

// Encode returns p as one message of any size (for push/pull state).
// Entries are grouped by key hash: decoding gives back the same entries, with
// those of one hash together. It fails only for a nil packet or an empty
// From. Safe for concurrent use.
func Encode(p *Packet) ([]byte, error) {
	if err := checkPacket(p); err != nil {
		return nil, err
	}
	gp := groupPacket(p)
	defer gp.release()
	size := gp.headerLen() + arrLen(len(gp.groups))
	for i := range gp.groups {
		size += gp.groups[i].size()
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	e := msgpack.GetEncoder()
	defer msgpack.PutEncoder(e)
	e.Reset(buf)
	if err := gp.encode(e, gp.groups, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Split encodes p into messages of at most max bytes each, for best-effort
// datagrams. Every Count, Mark and Gauge lands in a message that also carries
// its key's Name when p carried one for that hash; the entries of one hash
// stay in one message when they fit in one, and are spread over as few as
// needed otherwise. Every message repeats From, Incarnation and Full (so a
// receiver must not read one message of a split Full packet as the whole
// state). A packet with no entries gives one message. It fails with
// ErrTooLarge when the header, or one entry with its name, cannot fit in max.
// Safe for concurrent use.
func Split(p *Packet, max int) ([][]byte, error) {
	if err := checkPacket(p); err != nil {
		return nil, err
	}
	gp := groupPacket(p)
	defer gp.release()
	hdr := gp.headerLen()
	if hdr+arrLen(1) > max {
		return nil, fmt.Errorf("%w: the header for origin %q needs %d bytes, budget %d", ErrTooLarge, p.From, hdr+1, max)
	}
	pl := planner{gp: gp, hdr: hdr, max: max, plan: gp.plan[:0], ends: gp.ends[:0]}
	for gi := range gp.groups {
		if err := pl.add(gp.groups[gi]); err != nil {
			return nil, err
		}
	}
	if len(pl.plan) > pl.start || len(pl.ends) == 0 {
		pl.flush()
	}
	gp.plan, gp.ends = pl.plan, pl.ends
	buf := bytes.NewBuffer(make([]byte, 0, pl.total))
	e := msgpack.GetEncoder()
	defer msgpack.PutEncoder(e)
	e.Reset(buf)
	out := make([][]byte, len(pl.ends))
	start := 0
	for i, end := range pl.ends {
		at := buf.Len()
		if err := gp.encode(e, pl.plan[start:end], uint64(i)); err != nil {
			return nil, err
		}
		n := buf.Len()
		out[i] = buf.Bytes()[at:n:n]
		start = end
	}
	return out, nil
}

// planner lays groups, whole or in pieces, into messages of at most max
// bytes: plan[ends[k-1]:ends[k]] is message k.
type planner struct {
	gp    *grouped
	hdr   int // message header size, without the groups array header
	max   int
	plan  []group
	ends  []int
	start int // first group of the current message in plan
	body  int // encoded size of plan[start:]
	total int // encoded size of the flushed messages
}

// room reports whether a group of size add fits in the current message.
func (pl *planner) room(add int) bool {
	return pl.hdr+arrLen(len(pl.plan)-pl.start+1)+pl.body+add <= pl.max
}

func (pl *planner) put(g group, size int) {
	pl.plan = append(pl.plan, g)
	pl.body += size
}

func (pl *planner) flush() {
	pl.total += pl.hdr + arrLen(len(pl.plan)-pl.start) + pl.body
	pl.ends = append(pl.ends, len(pl.plan))
	pl.start, pl.body = len(pl.plan), 0
}

// add places g: in the current message if it fits, else in a fresh one if
// it fits there, else in pieces that each repeat the hash and name.
func (pl *planner) add(g group) error {
	s := g.size()
	if pl.room(s) {
		pl.put(g, s)
		return nil
	}
	if pl.hdr+arrLen(1)+s <= pl.max {
		pl.flush() // the current message holds something, or g would fit
		pl.put(g, s)
		return nil
	}
	if g.empty() {
		return fmt.Errorf("%w: the name of hash %#x needs %d bytes, budget %d",
			ErrTooLarge, g.hash, pl.hdr+arrLen(1)+s, pl.max)
	}
	piece := g
	piece.c1, piece.m1, piece.g1 = g.c0, g.m0, g.g0
	piece = piece.after()
	gp := pl.gp
	for i := g.c0; i < g.c1; i++ {
		if err := pl.entry(&piece, 0, countLen(gp.counts[i], gp.base), "count"); err != nil {
			return err
		}
	}
	for i := g.m0; i < g.m1; i++ {
		if err := pl.entry(&piece, 1, markLen(gp.marks[i], gp.base), "mark"); err != nil {
			return err
		}
	}
	for i := g.g0; i < g.g1; i++ {
		if err := pl.entry(&piece, 2, gaugeLen(gp.gauges[i]), "gauge"); err != nil {
			return err
		}
	}
	if !piece.empty() {
		pl.put(piece, piece.size())
	}
	return nil
}

// entry grows piece by the next entry of its key, first closing the piece
// into the current message and starting a fresh message when it would not
// fit.
func (pl *planner) entry(piece *group, kind, sz int, what string) error {
	if trial := piece.with(kind, sz); pl.room(trial.size()) {
		*piece = trial
		return nil
	}
	if !piece.empty() {
		pl.put(*piece, piece.size())
		*piece = piece.after()
	}
	if len(pl.plan) > pl.start {
		pl.flush()
	}
	trial := piece.with(kind, sz)
	if !pl.room(trial.size()) {
		return fmt.Errorf("%w: a %s of hash %#x needs %d bytes with its name, budget %d",
			ErrTooLarge, what, piece.hash, pl.hdr+arrLen(1)+trial.size(), pl.max)
	}
	*piece = trial
	return nil
}

func checkPacket(p *Packet) error {
	if p == nil {
		return fmt.Errorf("%w: nil packet", ErrInvalid)
	}
	if p.From == "" {
		return fmt.Errorf("%w: empty From (the origin node name is required)", ErrInvalid)
	}
	if p.Seq > maxSeq {
		return fmt.Errorf("%w: Seq %d is past the stream's range (at most %d)", ErrInvalid, p.Seq, uint64(maxSeq))
	}
	if p.Targeted && (p.Seq == 0 || p.Full || len(p.Marks) > 0 || len(p.Gauges) > 0) {
		return fmt.Errorf("%w: a targeted message has a Seq (got 0), is not Full (got %t) and holds counts only (got %d marks, %d gauges)",
			ErrInvalid, p.Full, len(p.Marks), len(p.Gauges))
	}
	if p.Sum && !p.Targeted && (p.Seq != 0 || p.Full || len(p.Marks) > 0 || len(p.Gauges) > 0) {
		return fmt.Errorf("%w: a sum has no Seq (got %d), is not Full (got %t) and holds counts only (got %d marks, %d gauges)",
			ErrInvalid, p.Seq, p.Full, len(p.Marks), len(p.Gauges))
	}
	return nil
}

// encode writes one message holding groups, the k-th of its packet (its seq
// is the packet's Seq+k when it has one).
func (gp *grouped) encode(e *msgpack.Encoder, groups []group, k uint64) error {
	p := gp.p
	var err error
	w := func(e2 error) {
		if err == nil {
			err = e2
		}
	}
	if p.Seq == 0 {
		w(e.EncodeArrayLen(6))
		if p.Sum {
			w(e.EncodeUint(SumVersion))
		} else {
			w(e.EncodeUint(WireVersion))
		}
		w(e.EncodeString(p.From))
		w(e.EncodeUint(p.Incarnation))
	} else {
		w(e.EncodeArrayLen(7))
		if p.Targeted {
			w(e.EncodeUint(TargetedVersion))
		} else {
			w(e.EncodeUint(SeqVersion))
		}
		w(e.EncodeString(p.From))
		w(e.EncodeUint(p.Incarnation))
		w(e.EncodeUint(p.Seq + k))
	}
	if p.Targeted {
		w(e.EncodeBool(p.Sum))
	} else {
		w(e.EncodeBool(p.Full))
	}
	w(e.EncodeInt(gp.base))
	w(e.EncodeArrayLen(len(groups)))
	for i := range groups {
		g := &groups[i]
		w(e.EncodeArrayLen(5))
		w(e.EncodeUint(g.hash))
		if g.name == nil {
			w(e.EncodeNil())
		} else {
			w(e.EncodeArrayLen(2))
			w(e.EncodeString(g.name.Resource))
			w(e.EncodeString(g.name.Domain))
		}
		w(e.EncodeArrayLen(3 * (g.c1 - g.c0)))
		for _, c := range gp.counts[g.c0:g.c1] {
			w(e.EncodeUint(uint64(c.Slot)))
			w(e.EncodeUint(uint64(c.Bucket) - uint64(gp.base)))
			w(e.EncodeUint(c.Value))
		}
		w(e.EncodeArrayLen(2 * (g.m1 - g.m0)))
		for _, m := range gp.marks[g.m0:g.m1] {
			w(e.EncodeUint(uint64(m.Slot)))
			w(e.EncodeUint(uint64(m.At) - uint64(gp.base)))
		}
		w(e.EncodeArrayLen(2 * (g.g1 - g.g0)))
		for _, x := range gp.gauges[g.g0:g.g1] {
			w(e.EncodeInt(x.Value))
			w(e.EncodeUint(x.Version))
		}
	}
	if err != nil {
		return fmt.Errorf("gossip: encode: %w", err)
	}
	return nil
}

// Encoded sizes, matching msgpack's smallest encodings as written by
// Encoder.EncodeUint, EncodeInt, EncodeString and EncodeArrayLen.

func uintLen(v uint64) int {
	switch {
	case v <= math.MaxInt8:
		return 1
	case v <= math.MaxUint8:
		return 2
	case v <= math.MaxUint16:
		return 3
	case v <= math.MaxUint32:
		return 5
	}
	return 9
}

func intLen(v int64) int {
	switch {
	case v >= 0:
		return uintLen(uint64(v))
	case v >= -32:
		return 1
	case v >= math.MinInt8:
		return 2
	case v >= math.MinInt16:
		return 3
	case v >= math.MinInt32:
		return 5
	}
	return 9
}

func strLen(s string) int {
	n := len(s)
	switch {
	case n < 32:
		return 1 + n
	case n < 256:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	}
	return 5 + n
}

func arrLen(n int) int {
	switch {
	case n < 16:
		return 1
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}

func nameLen(n *Name) int {
	if n == nil {
		return 1
	}
	return 1 + strLen(n.Resource) + strLen(n.Domain)
}

func countLen(c Count, base int64) int {
	return uintLen(uint64(c.Slot)) + uintLen(uint64(c.Bucket)-uint64(base)) + uintLen(c.Value)
}

func markLen(m Mark, base int64) int {
	return uintLen(uint64(m.Slot)) + uintLen(uint64(m.At)-uint64(base))
}

func gaugeLen(g Gauge) int {
	return intLen(g.Value) + uintLen(g.Version)
}

// Decoding.

// decoder reads one message with the project's MessagePack reader
// (internal/wire/mpwire) and keeps where it is, so that errors name the
// field.
type decoder struct {
	r   mpwire.Reader
	grp int // current group, -1 outside
	ent int // current entry in the group's array, -1 outside
}

var decPool = sync.Pool{New: func() any { return new(decoder) }}

// Decode parses one message made by Encode or Split. It is strict: any input
// that is not exactly one well-formed version-1 or version-2 message is an
// error wrapping ErrMalformed (or ErrVersion, a Request among them) that
// names the field and what was wrong. It
// never panics, and it never allocates more than the input's length can
// justify. Integers may use any msgpack integer encoding whose value fits the
// field. Safe for concurrent use.
func Decode(b []byte) (*Packet, error) { return withDecoder(b, (*decoder).packet) }

// Kind is what a message is, by its version: a sync message (KindSync,
// versions 1, 2 and 4, read by Decode) or a request (KindRequest, read by
// DecodeRequest).
type Kind uint8

const (
	KindSync    Kind = 1
	KindRequest Kind = RequestVersion
)

// Peek returns the kind and the origin name of the message b, read from its
// header alone (the version and the name), without decoding the rest: the
// name is a sub-slice of b, not a copy, valid while b is. Whenever Decode(b)
// or DecodeRequest(b) succeeds, Peek returns its kind and From; when the
// header itself is wrong it returns the error both would (wrapping
// ErrMalformed or ErrVersion). An error in the rest of the message goes
// unnoticed, so a name is no promise that b decodes. It allocates nothing
// unless it fails. Safe for concurrent use.
func Peek(b []byte) (Kind, []byte, error) {
	h, err := withDecoder(b, (*decoder).header)
	if err != nil {
		return 0, nil, err
	}
	if h.version == RequestVersion || h.version == ReshipVersion {
		return KindRequest, h.from, nil
	}
	return KindSync, h.from, nil
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
	version uint64
	from    []byte // a sub-slice of the input
}

// header reads a message's header up to its origin name: the one reading of
// it that Decode, DecodeRequest and Peek share.
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
	switch v {
	case WireVersion, RequestVersion, SumVersion, ReshipVersion:
		want = 6
	case SeqVersion, TargetedVersion:
		want = 7
	default:
		return head{}, fmt.Errorf("%w: version %d (this build reads %d to %d)", ErrVersion, v, WireVersion, ReshipVersion)
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
	return head{version: v, from: from}, nil
}

func (dc *decoder) packet() (*Packet, error) {
	h, err := dc.header()
	if err != nil {
		return nil, err
	}
	if h.version == RequestVersion || h.version == ReshipVersion {
		return nil, fmt.Errorf("%w: version %d is a request, not a sync message (DecodeRequest reads it)", ErrVersion, h.version)
	}
	p := &Packet{From: string(h.from), Sum: h.version == SumVersion, Targeted: h.version == TargetedVersion}
	if p.Incarnation, err = dc.uint("incarnation"); err != nil {
		return nil, err
	}
	if h.version == SeqVersion || p.Targeted {
		at := dc.pos()
		if p.Seq, err = dc.uint("seq"); err != nil {
			return nil, err
		}
		if p.Seq == 0 || p.Seq > maxSeq {
			return nil, dc.fail("seq", at, "want 1 to %d, got %d", uint64(maxSeq), p.Seq)
		}
	}
	at := dc.pos()
	if p.Targeted {
		if p.Sum, err = dc.bool("sum"); err != nil {
			return nil, err
		}
	} else if p.Full, err = dc.bool("full"); err != nil {
		return nil, err
	}
	if p.Sum && p.Full {
		return nil, dc.fail("full", at, "a sum (version %d) is never full", SumVersion)
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
	if (p.Sum || p.Targeted) && (len(p.Marks) > 0 || len(p.Gauges) > 0) {
		return nil, dc.fail("groups", dc.pos(), "a sum or targeted message (version %d) holds counts only, got %d marks and %d gauges", h.version, len(p.Marks), len(p.Gauges))
	}
	return p, nil
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
