package packet

// This file has one job, writing messages: a Packet grouped by key hash
// with its exact encoded size, Encode (one message), Split (messages
// planned into a byte budget each), EncodeRequest, and the encoded sizes
// of msgpack's compact forms. The sizes and the encoder must agree byte
// for byte, so they stay together.

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

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
	if gp.p.Type().hasSeq() {
		last := gp.p.Seq + uint64(len(gp.counts)+len(gp.marks)+len(gp.gauges)+len(gp.groups))
		n += uintLen(last)
	}
	return n
}

// Encode returns p as one message of any size (for push/pull state), of
// p's Type. Entries are grouped by key hash: decoding gives back the same
// entries, with those of one hash together. It fails, wrapping ErrInvalid,
// for a nil packet, an empty From, a Seq past the stream's range, or a sum
// or targeted packet of a shape its type does not allow (a Seq where it has
// none or none where it needs one, Full, marks or gauges). Safe for
// concurrent use.
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
// state); a sequenced packet's messages are numbered Seq, Seq+1, …. A
// packet with no entries gives one message. It fails as Encode does, and
// with ErrTooLarge when the header, or one entry with its name, cannot fit
// in max.
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
	switch p.Type() {
	case MsgTargeted:
		if p.Seq == 0 || p.Full || len(p.Marks) > 0 || len(p.Gauges) > 0 {
			return fmt.Errorf("%w: a targeted message has a Seq (got 0), is not Full (got %t) and holds counts only (got %d marks, %d gauges)",
				ErrInvalid, p.Full, len(p.Marks), len(p.Gauges))
		}
	case MsgSum:
		if p.Seq != 0 || p.Full || len(p.Marks) > 0 || len(p.Gauges) > 0 {
			return fmt.Errorf("%w: a sum has no Seq (got %d), is not Full (got %t) and holds counts only (got %d marks, %d gauges)",
				ErrInvalid, p.Seq, p.Full, len(p.Marks), len(p.Gauges))
		}
	}
	return nil
}

// encode writes one message holding groups, the k-th of its packet (its seq
// is the packet's Seq+k when it has one): the header of the packet's type,
// in the one switch over the sync messages' types, then the groups.
func (gp *grouped) encode(e *msgpack.Encoder, groups []group, k uint64) error {
	p := gp.p
	var err error
	w := func(e2 error) {
		if err == nil {
			err = e2
		}
	}
	t := p.Type()
	w(e.EncodeArrayLen(t.datagramLen()))
	w(e.EncodeUint(uint64(t)))
	w(e.EncodeString(p.From))
	w(e.EncodeUint(p.Incarnation))
	switch t {
	case MsgSync: // [1, from, incarnation, full, base, groups]
		w(e.EncodeBool(p.Full))
	case MsgSeqSync: // [2, from, incarnation, seq, full, base, groups]
		w(e.EncodeUint(p.Seq + k))
		w(e.EncodeBool(p.Full))
	case MsgSum: // [4, from, incarnation, false, base, groups]
		w(e.EncodeBool(false)) // checkPacket: a sum is never Full
	case MsgTargeted: // [5, from, incarnation, seq, sum, base, groups]
		w(e.EncodeUint(p.Seq + k))
		w(e.EncodeBool(p.Sum))
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

// EncodeRequest returns r as one message, a MsgRequest or a MsgReship. It
// fails, wrapping ErrInvalid, for an empty From, a zero or out-of-range
// seq, or more than MaxRequestItems seqs or hashes.
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
	// [3 or 6, from, incarnation, target, seqs, hashes]
	t := r.Type()
	w(e.EncodeArrayLen(t.datagramLen()))
	w(e.EncodeUint(uint64(t)))
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
