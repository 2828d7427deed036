package packet

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// normal returns a copy of p with every slice sorted, so that packets that
// carry the same multiset of entries compare equal.
func normal(p *Packet) *Packet {
	q := *p
	q.Names = slices.Clone(p.Names)
	q.Counts = slices.Clone(p.Counts)
	q.Marks = slices.Clone(p.Marks)
	q.Gauges = slices.Clone(p.Gauges)
	slices.SortFunc(q.Names, func(a, b Name) int {
		return cmp.Or(cmp.Compare(a.Hash, b.Hash), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Domain, b.Domain))
	})
	slices.SortFunc(q.Counts, func(a, b Count) int {
		return cmp.Or(cmp.Compare(a.Hash, b.Hash), cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(a.Value, b.Value))
	})
	slices.SortFunc(q.Marks, func(a, b Mark) int {
		return cmp.Or(cmp.Compare(a.Hash, b.Hash), cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.At, b.At))
	})
	slices.SortFunc(q.Gauges, func(a, b Gauge) int {
		return cmp.Or(cmp.Compare(a.Hash, b.Hash), cmp.Compare(a.Value, b.Value), cmp.Compare(a.Version, b.Version))
	})
	// nil and empty are the same multiset.
	if len(q.Names) == 0 {
		q.Names = nil
	}
	if len(q.Counts) == 0 {
		q.Counts = nil
	}
	if len(q.Marks) == 0 {
		q.Marks = nil
	}
	if len(q.Gauges) == 0 {
		q.Gauges = nil
	}
	return &q
}

func samePacket(t *testing.T, got, want *Packet) {
	t.Helper()
	g, w := normal(got), normal(want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("packets differ\n got: %+v\nwant: %+v", g, w)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 300)
	huge := strings.Repeat("y", 70000)
	tests := []struct {
		name string
		p    Packet
	}{
		{name: "empty delta", p: Packet{From: "a"}},
		{name: "empty full snapshot", p: Packet{From: "node-1", Incarnation: 1700000000000000000, Full: true}},
		{name: "names only", p: Packet{From: "a", Names: []Name{{Hash: 1, Resource: "api/search", Domain: "tenant-42"}, {Hash: math.MaxUint64, Resource: "", Domain: ""}}}},
		{name: "counts with names", p: Packet{
			From: "a", Incarnation: 7,
			Names:  []Name{{Hash: 0xdeadbeefcafe, Resource: "api/search", Domain: "10.0.0.2"}},
			Counts: []Count{{Hash: 0xdeadbeefcafe, Slot: 0, Bucket: 1700000000000, Value: 1}, {Hash: 0xdeadbeefcafe, Slot: 3, Bucket: 1700000000250, Value: 300}},
		}},
		{name: "counts without names", p: Packet{From: "a", Counts: []Count{{Hash: 9, Slot: math.MaxUint32, Bucket: 5, Value: math.MaxUint64}}}},
		{name: "negative and extreme buckets", p: Packet{From: "a", Counts: []Count{
			{Hash: 1, Bucket: math.MinInt64, Value: 1},
			{Hash: 1, Bucket: math.MaxInt64, Value: 2},
			{Hash: 2, Bucket: -1, Value: 3},
			{Hash: 2, Bucket: 0, Value: 0},
		}}},
		{name: "marks", p: Packet{From: "a", Marks: []Mark{{Hash: 4, Slot: 1, At: 1700000001000}, {Hash: 4, Slot: 2, At: 1700000000000}, {Hash: 5, Slot: 0, At: math.MinInt64}}}},
		{name: "gauges", p: Packet{From: "a", Gauges: []Gauge{{Hash: 4, Value: -3, Version: 1}, {Hash: 4, Value: math.MinInt64, Version: math.MaxUint64}, {Hash: 6, Value: math.MaxInt64}}}},
		{name: "interleaved hashes", p: Packet{
			From:   "a",
			Names:  []Name{{Hash: 2, Resource: "r2", Domain: "d2"}, {Hash: 1, Resource: "r1", Domain: "d1"}},
			Counts: []Count{{Hash: 1, Bucket: 10, Value: 1}, {Hash: 2, Bucket: 10, Value: 2}, {Hash: 1, Bucket: 20, Value: 3}},
			Marks:  []Mark{{Hash: 2, At: 15}, {Hash: 3, At: 16}},
			Gauges: []Gauge{{Hash: 3, Value: 1, Version: 2}, {Hash: 1, Value: 5, Version: 1}},
		}},
		{name: "duplicate and colliding names kept", p: Packet{From: "a", Names: []Name{
			{Hash: 1, Resource: "r", Domain: "d"}, {Hash: 1, Resource: "r", Domain: "d"}, {Hash: 1, Resource: "other", Domain: "d"},
		}, Counts: []Count{{Hash: 1, Value: 1}}}},
		{name: "long strings", p: Packet{From: long, Names: []Name{{Hash: 1, Resource: long, Domain: huge}}}},
		{name: "unicode", p: Packet{From: "nœud-é", Names: []Name{{Hash: 1, Resource: "api/recherche", Domain: "utilisateur-ü"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(&tc.p)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			samePacket(t, got, &tc.p)
		})
	}
}

// TestEncodeWireForm pins the version-1 layout byte for byte.
func TestEncodeWireForm(t *testing.T) {
	p := &Packet{
		From: "a", Incarnation: 1,
		Names:  []Name{{Hash: 1, Resource: "r", Domain: "d"}},
		Counts: []Count{{Hash: 1, Slot: 0, Bucket: 1000, Value: 5}, {Hash: 1, Slot: 1, Bucket: 1250, Value: 200}},
		Gauges: []Gauge{{Hash: 2, Value: -1, Version: 3}},
	}
	want := []byte{
		0x96,      // message: array of 6
		0x01,      // version 1
		0xa1, 'a', // from
		0x01,             // incarnation
		0xc2,             // full: false
		0xcd, 0x03, 0xe8, // base: 1000
		0x92,                                   // 2 groups
		0x95, 0x01, 0x92, 0xa1, 'r', 0xa1, 'd', // hash 1, name [r, d]
		0x96, 0x00, 0x00, 0x05, 0x01, 0xcc, 0xfa, 0xcc, 0xc8, // counts: (0, +0, 5), (1, +250, 200)
		0x90,                         // marks
		0x90,                         // gauges
		0x95, 0x02, 0xc0, 0x90, 0x90, // hash 2, no name, no counts or marks
		0x92, 0xff, 0x03, // gauges: (−1, 3)
	}
	got, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode\n got % x\nwant % x", got, want)
	}
}

func TestEncodeRejects(t *testing.T) {
	tests := []struct {
		name string
		p    *Packet
	}{
		{name: "nil packet", p: nil},
		{name: "empty from", p: &Packet{Counts: []Count{{Hash: 1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Encode(tc.p); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Encode: err = %v, want ErrInvalid", err)
			}
			if _, err := Split(tc.p, 1000); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Split: err = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestSizeHelpers checks the size arithmetic Split relies on against what
// msgpack really writes.
func TestSizeHelpers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	size := func(f func() error) int {
		buf.Reset()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return buf.Len()
	}
	uints := []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	ints := []int64{0, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64, math.MaxInt64}
	for range 1000 {
		uints = append(uints, r.Uint64()>>r.IntN(64))
		ints = append(ints, int64(r.Uint64())>>r.IntN(64))
	}
	for _, v := range uints {
		if got, want := uintLen(v), size(func() error { return e.EncodeUint(v) }); got != want {
			t.Fatalf("uintLen(%d) = %d, msgpack writes %d", v, got, want)
		}
	}
	for _, v := range ints {
		if got, want := intLen(v), size(func() error { return e.EncodeInt(v) }); got != want {
			t.Fatalf("intLen(%d) = %d, msgpack writes %d", v, got, want)
		}
	}
	for _, n := range []int{0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("z", n)
		if got, want := strLen(s), size(func() error { return e.EncodeString(s) }); got != want {
			t.Fatalf("strLen(%d bytes) = %d, msgpack writes %d", n, got, want)
		}
		if got, want := arrLen(n), size(func() error { return e.EncodeArrayLen(n) }); got != want {
			t.Fatalf("arrLen(%d) = %d, msgpack writes %d", n, got, want)
		}
	}
}

// randomPacket returns a packet of up to n keys with names for some, counts
// in a few buckets, marks and gauges, drawn from r.
func randomPacket(r *rand.Rand, n int) *Packet {
	p := &Packet{From: "node-" + strings.Repeat("x", r.IntN(40)), Incarnation: r.Uint64(), Full: r.IntN(2) == 0}
	switch r.IntN(4) {
	case 0:
		p.Seq = 1 + r.Uint64N(200) // across the one-byte boundary
	case 1:
		p.Seq = 1 + r.Uint64N(1<<40)
	}
	now := int64(1_700_000_000_000) + r.Int64N(1e9)
	keys := r.IntN(n + 1)
	for k := range keys {
		h := r.Uint64()
		if r.IntN(8) == 0 {
			h = uint64(k) // small hashes too
		}
		if r.IntN(3) > 0 {
			p.Names = append(p.Names, Name{Hash: h, Resource: "api/" + strings.Repeat("r", r.IntN(30)), Domain: strings.Repeat("d", r.IntN(60))})
		}
		for range r.IntN(6) {
			p.Counts = append(p.Counts, Count{Hash: h, Slot: uint32(r.IntN(5)), Bucket: now - r.Int64N(60_000), Value: r.Uint64() >> r.IntN(64)})
		}
		for range r.IntN(3) {
			p.Marks = append(p.Marks, Mark{Hash: h, Slot: uint32(r.IntN(5)), At: now - r.Int64N(3_600_000)})
		}
		for range r.IntN(2) {
			p.Gauges = append(p.Gauges, Gauge{Hash: h, Value: r.Int64N(100) - 50, Version: r.Uint64N(1000)})
		}
	}
	// Occasionally one key with many entries, more than a message holds.
	if r.IntN(5) == 0 {
		h := r.Uint64()
		p.Names = append(p.Names, Name{Hash: h, Resource: "api/hot", Domain: "big"})
		for i := range 300 {
			p.Counts = append(p.Counts, Count{Hash: h, Slot: uint32(i % 4), Bucket: now - int64(i)*250, Value: uint64(i * 1000)})
		}
	}
	r.Shuffle(len(p.Counts), func(i, j int) { p.Counts[i], p.Counts[j] = p.Counts[j], p.Counts[i] })
	return p
}

// TestSplitBudget is the Split property: every message fits, the messages
// decode back to the same multiset of entries, every entry travels with its
// key's name, and a key whose entries fit in one message is not spread.
func TestSplitBudget(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 400 {
		p := randomPacket(r, 80)
		max := 300 + r.IntN(1200)
		msgs, err := Split(p, max)
		if err != nil {
			t.Fatalf("iter %d: Split(max %d): %v", iter, max, err)
		}
		firstName := map[uint64]Name{}
		for _, nm := range p.Names {
			if _, ok := firstName[nm.Hash]; !ok {
				firstName[nm.Hash] = nm
			}
		}
		union := &Packet{From: p.From, Incarnation: p.Incarnation, Full: p.Full}
		where := map[uint64]map[int]bool{} // hash → messages carrying its entries
		for i, b := range msgs {
			if len(b) > max {
				t.Fatalf("iter %d: message %d is %d bytes, budget %d", iter, i, len(b), max)
			}
			q, err := Decode(b)
			if err != nil {
				t.Fatalf("iter %d: message %d: %v", iter, i, err)
			}
			if q.From != p.From || q.Incarnation != p.Incarnation || q.Full != p.Full {
				t.Fatalf("iter %d: message %d header = %q/%d/%v", iter, i, q.From, q.Incarnation, q.Full)
			}
			named := map[uint64]bool{}
			for _, nm := range q.Names {
				named[nm.Hash] = true
			}
			need := func(h uint64, what string) {
				if where[h] == nil {
					where[h] = map[int]bool{}
				}
				where[h][i] = true
				if _, ok := firstName[h]; ok && !named[h] {
					t.Fatalf("iter %d: message %d carries a %s of hash %#x without its name", iter, i, what, h)
				}
			}
			for _, c := range q.Counts {
				need(c.Hash, "count")
			}
			for _, m := range q.Marks {
				need(m.Hash, "mark")
			}
			for _, g := range q.Gauges {
				need(g.Hash, "gauge")
			}
			union.Counts = append(union.Counts, q.Counts...)
			union.Marks = append(union.Marks, q.Marks...)
			union.Gauges = append(union.Gauges, q.Gauges...)
			union.Names = append(union.Names, q.Names...)
		}
		// Names repeat with split keys: compare entries exactly and names
		// as sets.
		want := normal(p)
		got := normal(union)
		if !reflect.DeepEqual(got.Counts, want.Counts) || !reflect.DeepEqual(got.Marks, want.Marks) || !reflect.DeepEqual(got.Gauges, want.Gauges) {
			t.Fatalf("iter %d: entries differ after Split", iter)
		}
		if !reflect.DeepEqual(slices.Compact(got.Names), slices.Compact(want.Names)) {
			t.Fatalf("iter %d: names differ after Split", iter)
		}
		gp := groupPacket(p)
		hdr := gp.headerLen()
		for _, g := range gp.groups {
			if hdr+arrLen(1)+g.size() <= max && len(where[g.hash]) > 1 {
				t.Fatalf("iter %d: hash %#x fits one message (%d bytes) but was spread over %d", iter, g.hash, hdr+1+g.size(), len(where[g.hash]))
			}
		}
	}
}

func TestSplitFillsMessages(t *testing.T) {
	p := &Packet{From: "node-1", Incarnation: 1}
	for k := range 2000 {
		h := uint64(k) * 0x9e3779b97f4a7c15
		p.Names = append(p.Names, Name{Hash: h, Resource: "api/search", Domain: "tenant-" + strings.Repeat("9", k%7)})
		p.Counts = append(p.Counts, Count{Hash: h, Bucket: 1_700_000_000_000 + int64(k%4)*250, Value: uint64(k)})
	}
	msgs, err := Split(p, 1309)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, b := range msgs {
		total += len(b)
		if i < len(msgs)-1 && len(b) < 1309-50 {
			t.Errorf("message %d of %d is only %d bytes", i, len(msgs), len(b))
		}
	}
	t.Logf("2000 named keys: %d messages, %d bytes, %.1f bytes per key", len(msgs), total, float64(total)/2000)
}

func TestSplitEdges(t *testing.T) {
	tests := []struct {
		name    string
		p       Packet
		max     int
		msgs    int   // expected message count when err is nil
		wantErr error // nil for success
	}{
		{name: "empty packet gives one message", p: Packet{From: "a"}, max: 100, msgs: 1},
		{name: "header alone too large", p: Packet{From: strings.Repeat("n", 200)}, max: 100, wantErr: ErrTooLarge},
		{name: "name alone too large", p: Packet{From: "a", Names: []Name{{Hash: 1, Resource: strings.Repeat("r", 200)}}}, max: 100, wantErr: ErrTooLarge},
		{name: "entry with its name too large", p: Packet{From: "a", Names: []Name{{Hash: 1, Resource: strings.Repeat("r", 70)}}, Counts: []Count{{Hash: 1, Value: math.MaxUint64}}}, max: 90, wantErr: ErrTooLarge},
		{name: "entry fits exactly", p: Packet{From: "a", Counts: []Count{{Hash: 1, Value: 1}}}, max: 17, msgs: 1},
		{name: "one byte short", p: Packet{From: "a", Counts: []Count{{Hash: 1, Value: 1}}}, max: 16, wantErr: ErrTooLarge},
		{name: "big key split over messages", p: Packet{From: "a", Names: []Name{{Hash: 1, Resource: "r", Domain: "d"}}, Counts: func() []Count {
			var cs []Count
			for i := range 100 {
				cs = append(cs, Count{Hash: 1, Slot: 1, Bucket: int64(i), Value: 1})
			}
			return cs
		}()}, max: 64, msgs: 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := Split(&tc.p, tc.max)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != tc.msgs {
				sizes := []int{}
				for _, m := range msgs {
					sizes = append(sizes, len(m))
				}
				t.Fatalf("%d messages (sizes %v), want %d", len(msgs), sizes, tc.msgs)
			}
			for _, m := range msgs {
				if len(m) > tc.max {
					t.Fatalf("message of %d bytes, budget %d", len(m), tc.max)
				}
			}
		})
	}
}

// enc builds raw msgpack input for the malformed table.
func enc(f func(e *msgpack.Encoder)) []byte {
	var buf bytes.Buffer
	f(msgpack.NewEncoder(&buf))
	return buf.Bytes()
}

// hdr writes a valid version-1 header with from "a" and base 0, leaving the
// groups array to the caller.
func hdr(e *msgpack.Encoder) {
	_ = e.EncodeArrayLen(6)
	_ = e.EncodeUint(1)
	_ = e.EncodeString("a")
	_ = e.EncodeUint(1)
	_ = e.EncodeBool(false)
	_ = e.EncodeInt(0)
}

// grp writes a group header with hash 1 and no name.
func grp(e *msgpack.Encoder) {
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeArrayLen(5)
	_ = e.EncodeUint(1)
	_ = e.EncodeNil()
}

func TestDecodeMalformed(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		wantErr error
		msg     string // substring of the error
	}{
		{name: "empty input", in: nil, wantErr: ErrMalformed, msg: "message"},
		{name: "a map, not an array", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeMapLen(0) }), wantErr: ErrMalformed, msg: "want an array, got a map"},
		{name: "nil", in: []byte{0xc0}, wantErr: ErrMalformed, msg: "want an array, got nil"},
		{name: "empty array", in: []byte{0x90}, wantErr: ErrMalformed, msg: "empty array"},
		{name: "version 9", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeUint(9) }), wantErr: ErrVersion, msg: "version 9"},
		{name: "a request", in: mustRequest(&Request{From: "a", Seqs: []uint64{1}}), wantErr: ErrVersion, msg: "version 3 is a request"},
		{name: "seq 0", in: seqHeader(0), wantErr: ErrMalformed, msg: "seq at byte 5: want 1 to"},
		{name: "seq past the range", in: seqHeader(math.MaxUint64), wantErr: ErrMalformed, msg: "got 18446744073709551615"},
		{name: "version 0", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(1); _ = e.EncodeUint(0) }), wantErr: ErrVersion, msg: "version 0"},
		{name: "version is a string", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeString("1") }), wantErr: ErrMalformed, msg: "version at byte 1: want an unsigned integer, got a string"},
		{name: "version negative", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeInt(-1) }), wantErr: ErrMalformed, msg: "version"},
		{name: "five fields", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(5); _ = e.EncodeUint(1) }), wantErr: ErrMalformed, msg: "array of 5 elements, want 6"},
		{name: "from is binary", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeUint(1); _ = e.EncodeBytes([]byte("a")) }), wantErr: ErrMalformed, msg: "from at byte 2: want a string, got binary"},
		{name: "from empty", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeUint(1); _ = e.EncodeString("") }), wantErr: ErrMalformed, msg: "empty origin"},
		{name: "from longer than input", in: []byte{0x96, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, wantErr: ErrMalformed, msg: "string of 4294967295 bytes is longer than the 1 bytes left"},
		{name: "from truncated header", in: []byte{0x96, 0x01, 0xdb, 0xff}, wantErr: ErrMalformed, msg: "from"},
		{name: "incarnation negative", in: enc(func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(6)
			_ = e.EncodeUint(1)
			_ = e.EncodeString("a")
			_ = e.EncodeInt(-5)
		}), wantErr: ErrMalformed, msg: "incarnation at byte 4: want an unsigned integer, got -5"},
		{name: "full is an integer", in: enc(func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(6)
			_ = e.EncodeUint(1)
			_ = e.EncodeString("a")
			_ = e.EncodeUint(1)
			_ = e.EncodeUint(1)
		}), wantErr: ErrMalformed, msg: "full at byte 5: want a bool, got an integer"},
		{name: "base is a float", in: enc(func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(6)
			_ = e.EncodeUint(1)
			_ = e.EncodeString("a")
			_ = e.EncodeUint(1)
			_ = e.EncodeBool(true)
			_ = e.EncodeFloat64(1)
		}), wantErr: ErrMalformed, msg: "base at byte 6: want an integer, got a float"},
		{name: "base overflows int64", in: enc(func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(6)
			_ = e.EncodeUint(1)
			_ = e.EncodeString("a")
			_ = e.EncodeUint(1)
			_ = e.EncodeBool(true)
			_ = e.EncodeUint64(math.MaxUint64)
		}), wantErr: ErrMalformed, msg: "overflows int64"},
		{name: "groups length beyond input", in: enc(func(e *msgpack.Encoder) { hdr(e); _ = e.EncodeArrayLen(math.MaxUint32) }), wantErr: ErrMalformed, msg: "groups at byte 7: array of 4294967295 elements is longer than the 0 bytes left"},
		{name: "groups missing", in: enc(hdr), wantErr: ErrMalformed, msg: "groups at byte 7: truncated"},
		{name: "group of 4", in: enc(func(e *msgpack.Encoder) {
			hdr(e)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(4)
			for range 5 {
				_ = e.EncodeUint(0)
			}
		}), wantErr: ErrMalformed, msg: "groups[0].group at byte 8: array of 4 elements, want 5"},
		{name: "hash is a string", in: enc(func(e *msgpack.Encoder) {
			hdr(e)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(5)
			_ = e.EncodeString("h")
			for range 4 {
				_ = e.EncodeUint(0)
			}
		}), wantErr: ErrMalformed, msg: "groups[0].hash at byte 9: want an unsigned integer, got a string"},
		{name: "name of one string", in: enc(func(e *msgpack.Encoder) {
			hdr(e)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(5)
			_ = e.EncodeUint(1)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeString("r")
			for range 3 {
				_ = e.EncodeArrayLen(0)
			}
		}), wantErr: ErrMalformed, msg: "groups[0].name at byte 10: array of 1 elements, want nil or [resource, domain]"},
		{name: "name domain is an integer", in: enc(func(e *msgpack.Encoder) {
			hdr(e)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(5)
			_ = e.EncodeUint(1)
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeString("r")
			_ = e.EncodeUint(3)
			for range 3 {
				_ = e.EncodeArrayLen(0)
			}
		}), wantErr: ErrMalformed, msg: "groups[0].name.domain at byte 13: want a string, got an integer"},
		{name: "name is a string", in: enc(func(e *msgpack.Encoder) {
			hdr(e)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(5)
			_ = e.EncodeUint(1)
			_ = e.EncodeString("r/d")
			for range 3 {
				_ = e.EncodeArrayLen(0)
			}
		}), wantErr: ErrMalformed, msg: "groups[0].name at byte 10: want an array, got a string"},
		{name: "counts not a multiple of 3", in: enc(func(e *msgpack.Encoder) {
			grpHdr(e)
			_ = e.EncodeArrayLen(4)
			for range 4 {
				_ = e.EncodeUint(0)
			}
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(0)
		}), wantErr: ErrMalformed, msg: "4 values is not a multiple of 3"},
		{name: "counts longer than input", in: enc(func(e *msgpack.Encoder) { grpHdr(e); _ = e.EncodeArrayLen(3000) }), wantErr: ErrMalformed, msg: "array of 3000 elements is longer than the 0 bytes left"},
		{name: "counts truncated mid-entry", in: enc(func(e *msgpack.Encoder) {
			grpHdr(e)
			_ = e.EncodeArrayLen(3)
			_ = e.EncodeUint(0)
			_ = e.EncodeUint(0)
			_ = e.EncodeUint(0)
		})[:14], wantErr: ErrMalformed, msg: "array of 3 elements is longer than the 2 bytes left"},
		{name: "count slot beyond uint32", in: enc(func(e *msgpack.Encoder) {
			grpHdr(e)
			_ = e.EncodeArrayLen(3)
			_ = e.EncodeUint(math.MaxUint32 + 1)
			_ = e.EncodeUint(0)
			_ = e.EncodeUint(0)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(0)
		}), wantErr: ErrMalformed, msg: "groups[0].counts[0] at byte 12: slot 4294967296 overflows uint32"},
		{name: "count bucket negative offset", in: enc(func(e *msgpack.Encoder) {
			grpHdr(e)
			_ = e.EncodeArrayLen(3)
			_ = e.EncodeUint(0)
			_ = e.EncodeInt(-1)
			_ = e.EncodeUint(0)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(0)
		}), wantErr: ErrMalformed, msg: "groups[0].counts[0] at byte 13: want an unsigned integer, got -1"},
		{name: "count bucket overflows from base", in: enc(func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(6)
			_ = e.EncodeUint(1)
			_ = e.EncodeString("a")
			_ = e.EncodeUint(1)
			_ = e.EncodeBool(false)
			_ = e.EncodeInt(10)
			grp(e)
			_ = e.EncodeArrayLen(3)
			_ = e.EncodeUint(0)
			_ = e.EncodeUint(math.MaxInt64)
			_ = e.EncodeUint(0)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(0)
		}), wantErr: ErrMalformed, msg: "offset 9223372036854775807 from base 10 overflows int64"},
		{name: "count value nil", in: enc(func(e *msgpack.Encoder) {
			grpHdr(e)
			_ = e.EncodeArrayLen(3)
			_ = e.EncodeUint(0)
			_ = e.EncodeUint(0)
			_ = e.EncodeNil()
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(0)
		}), wantErr: ErrMalformed, msg: "want an unsigned integer, got nil"},
		{name: "marks odd", in: enc(func(e *msgpack.Encoder) {
			grpHdr(e)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(3)
			for range 3 {
				_ = e.EncodeUint(0)
			}
			_ = e.EncodeArrayLen(0)
		}), wantErr: ErrMalformed, msg: "groups[0].marks at byte 12: 3 values is not a multiple of 2"},
		{name: "gauges odd", in: enc(func(e *msgpack.Encoder) {
			grpHdr(e)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeInt(0)
		}), wantErr: ErrMalformed, msg: "groups[0].gauges at byte 13: 1 values is not a multiple of 2"},
		{name: "gauge value overflows int64", in: enc(func(e *msgpack.Encoder) {
			grpHdr(e)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeUint64(math.MaxInt64 + 1)
			_ = e.EncodeUint(0)
		}), wantErr: ErrMalformed, msg: "groups[0].gauges[0] at byte 14: integer 9223372036854775808 overflows int64"},
		{name: "gauges is a map", in: enc(func(e *msgpack.Encoder) {
			grpHdr(e)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeMapLen(0)
		}), wantErr: ErrMalformed, msg: "groups[0].gauges at byte 13: want an array, got a map"},
		{name: "trailing bytes", in: append(mustEncode(&Packet{From: "a"}), 0x00, 0x01), wantErr: ErrMalformed, msg: "2 trailing bytes"},
		{name: "two messages back to back", in: append(mustEncode(&Packet{From: "a"}), mustEncode(&Packet{From: "b"})...), wantErr: ErrMalformed, msg: "trailing bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Decode(tc.in)
			if err == nil {
				t.Fatalf("Decode(% x) = %+v, want an error", tc.in, p)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.msg)
			}
		})
	}
}

// grpHdr writes a header and one group with hash 1 and no name, leaving the
// counts, marks and gauges to the caller.
func grpHdr(e *msgpack.Encoder) {
	hdr(e)
	grp(e)
}

func mustEncode(p *Packet) []byte {
	b, err := Encode(p)
	if err != nil {
		panic(err)
	}
	return b
}

// TestDecodeEveryPrefix cuts a valid message at every length: each prefix is
// an error, never a panic or a partial packet.
func TestDecodeEveryPrefix(t *testing.T) {
	p := randomPacket(rand.New(rand.NewPCG(5, 6)), 10)
	p.Names = append(p.Names, Name{Hash: 1, Resource: "r", Domain: "d"})
	p.Counts = append(p.Counts, Count{Hash: 1, Bucket: 1, Value: 1})
	p.Marks = append(p.Marks, Mark{Hash: 1, At: 2})
	p.Gauges = append(p.Gauges, Gauge{Hash: 1, Value: -1, Version: 1})
	b := mustEncode(p)
	for n := range len(b) {
		if q, err := Decode(b[:n]); err == nil {
			t.Fatalf("Decode of %d of %d bytes = %+v, want an error", n, len(b), q)
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("Decode of %d of %d bytes: %v does not wrap ErrMalformed", n, len(b), err)
		}
	}
}

// TestDecodeNonMinimalInts accepts integers in wider encodings than needed,
// as other msgpack writers may produce.
func TestDecodeNonMinimalInts(t *testing.T) {
	b := enc(func(e *msgpack.Encoder) {
		_ = e.EncodeArrayLen(6)
		_ = e.EncodeUint64(1)
		_ = e.EncodeString("a")
		_ = e.EncodeInt64(7)
		_ = e.EncodeBool(true)
		_ = e.EncodeInt64(-100)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(5)
		_ = e.EncodeUint64(3)
		_ = e.EncodeNil()
		_ = e.EncodeArrayLen(3)
		_ = e.EncodeInt32(2)
		_ = e.EncodeUint32(150)
		_ = e.EncodeInt16(9)
		_ = e.EncodeArrayLen(0)
		_ = e.EncodeArrayLen(2)
		_ = e.EncodeUint16(5)
		_ = e.EncodeInt8(1)
	})
	p, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &Packet{From: "a", Incarnation: 7, Full: true, Counts: []Count{{Hash: 3, Slot: 2, Bucket: 50, Value: 9}}, Gauges: []Gauge{{Hash: 3, Value: 5, Version: 1}}}
	samePacket(t, p, want)
}

func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 8 {
		f.Add(mustEncode(randomPacket(r, 6)))
	}
	f.Add(mustEncode(&Packet{From: "a"}))
	f.Add(mustEncode(&Packet{From: "a", Sum: true, Counts: []Count{{Hash: 3, Slot: 1, Bucket: 100, Value: 9}}}))
	f.Add(mustEncode(&Packet{From: "a", Seq: 7, Targeted: true, Counts: []Count{{Hash: 3, Slot: 1, Bucket: 100, Value: 9}}}))
	f.Add([]byte{0x96, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'})
	f.Add([]byte{0x96, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrVersion", err)
			}
			if p != nil {
				t.Fatalf("Decode returned a packet with error %v", err)
			}
			return
		}
		// Anything Decode accepts, Encode writes and Decode reads back
		// the same.
		b2, err := Encode(p)
		if err != nil {
			t.Fatalf("Encode of a decoded packet: %v", err)
		}
		q, err := Decode(b2)
		if err != nil {
			t.Fatalf("Decode of re-encoded packet: %v", err)
		}
		samePacket(t, q, p)
		// And Split of it at a datagram budget either fits or says why.
		msgs, err := Split(p, 1309)
		if err != nil {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Split: %v", err)
			}
			return
		}
		for _, m := range msgs {
			if len(m) > 1309 {
				t.Fatalf("Split message of %d bytes", len(m))
			}
		}
	})
}

// TestPeek reads the origin from the header alone: what Decode reads
// when the message is whole, Decode's error when the header is wrong, and
// the name still when only the rest is wrong.
func TestPeek(t *testing.T) {
	long := strings.Repeat("n", 300) // a str16 header
	tests := []struct {
		name       string
		in         []byte
		want       string // the name; "" when an error is expected
		wantErr    error
		msg        string // substring of the error
		decodeFail bool   // Decode fails on in though the header is right
	}{
		{name: "a message", in: mustEncode(&Packet{From: "obol-7d9f8c6b5-x2x4k", Incarnation: 9, Counts: []Count{{Hash: 1, Bucket: 5, Value: 2}}}), want: "obol-7d9f8c6b5-x2x4k"},
		{name: "a long name", in: mustEncode(&Packet{From: long}), want: long},
		{name: "a split message", in: first(Split(benchPacket(), 1309)), want: "obol-7d9f8c6b5-x2x4k"},
		{name: "header only", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeUint(1); _ = e.EncodeString("a") }), want: "a", decodeFail: true},
		{name: "bad groups", in: enc(func(e *msgpack.Encoder) { hdr(e); _ = e.EncodeString("x") }), want: "a", decodeFail: true},
		{name: "trailing bytes", in: append(mustEncode(&Packet{From: "a"}), 0), want: "a", decodeFail: true},
		{name: "empty input", in: nil, wantErr: ErrMalformed, msg: "message"},
		{name: "a map", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeMapLen(0) }), wantErr: ErrMalformed, msg: "want an array, got a map"},
		{name: "empty array", in: []byte{0x90}, wantErr: ErrMalformed, msg: "empty array"},
		{name: "a sequenced message", in: first(Split(&Packet{From: "b", Seq: 9, Counts: []Count{{Hash: 1, Value: 1}}}, 1309)), want: "b"},
		{name: "version 2 of 6 fields", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeUint(2); _ = e.EncodeString("a") }), wantErr: ErrMalformed, msg: "array of 6 elements, want 7 for version 2"},
		{name: "version 7", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeUint(7); _ = e.EncodeString("a") }), wantErr: ErrVersion, msg: "version 7"},
		{name: "a targeted message", in: first(Split(&Packet{From: "c", Seq: 4, Targeted: true, Sum: true, Counts: []Count{{Hash: 1, Value: 1}}}, 1309)), want: "c"},
		{name: "five fields", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(5); _ = e.EncodeUint(1); _ = e.EncodeString("a") }), wantErr: ErrMalformed, msg: "array of 5 elements, want 6"},
		{name: "from is binary", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeUint(1); _ = e.EncodeBytes([]byte("a")) }), wantErr: ErrMalformed, msg: "from at byte 2: want a string, got binary"},
		{name: "from empty", in: enc(func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(6); _ = e.EncodeUint(1); _ = e.EncodeString("") }), wantErr: ErrMalformed, msg: "empty origin"},
		{name: "from longer than input", in: []byte{0x96, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, wantErr: ErrMalformed, msg: "string of 4294967295 bytes is longer than the 1 bytes left"},
		{name: "from missing", in: []byte{0x96, 0x01}, wantErr: ErrMalformed, msg: "from at byte 2: truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kind, from, err := Peek(tc.in)
			p, derr := Decode(tc.in)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("Peek = %q, %v; want an error wrapping %v mentioning %q", from, err, tc.wantErr, tc.msg)
				}
				if derr == nil || derr.Error() != err.Error() {
					t.Fatalf("Peek's error %q, Decode's %v: want the same", err, derr)
				}
				return
			}
			if err != nil || string(from) != tc.want {
				t.Fatalf("Peek = %q, %v; want %q", from, err, tc.want)
			}
			if kind.IsRequest() {
				t.Fatalf("Peek's type %v, want a sync message", kind)
			}
			if tc.decodeFail != (derr != nil) {
				t.Fatalf("Decode error %v, want one: %v", derr, tc.decodeFail)
			}
			if derr == nil && p.From != tc.want {
				t.Fatalf("Decode's From %q, Peek's %q", p.From, from)
			}
			if n := testing.AllocsPerRun(10, func() { _, _, _ = Peek(tc.in) }); n != 0 {
				t.Errorf("Peek allocates %v times, want 0", n)
			}
		})
	}
}

// seqHeader is a version-2 message from "a", incarnation 1, cut after its
// seq.
func seqHeader(seq uint64) []byte {
	return enc(func(e *msgpack.Encoder) {
		_ = e.EncodeArrayLen(7)
		_ = e.EncodeUint(2)
		_ = e.EncodeString("a")
		_ = e.EncodeUint(1)
		_ = e.EncodeUint(seq)
	})
}

// first returns the first of msgs, panicking on err.
func first(msgs [][]byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return msgs[0]
}

// FuzzPeek: Peek agrees with Decode. When Decode succeeds, Peek
// returns its From; when Peek fails, Decode fails with the same error;
// and a name Peek returns is the bytes of b that hold it.
func FuzzPeek(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 8 {
		f.Add(mustEncode(randomPacket(r, 6)))
	}
	f.Add(mustEncode(&Packet{From: "a"}))
	f.Add(mustEncode(&Packet{From: strings.Repeat("n", 300)}))
	f.Add([]byte{0x96, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'})
	f.Add([]byte{0x96, 0x01, 0xa1, 'a'})
	f.Add([]byte{0x96, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, from, err := Peek(b)
		p, derr := Decode(b)
		if kind.IsRequest() {
			r, rerr := DecodeRequest(b)
			if derr == nil || !errors.Is(derr, ErrVersion) {
				t.Fatalf("Decode of a request: %v, want ErrVersion", derr)
			}
			if rerr == nil && r.From != string(from) {
				t.Fatalf("DecodeRequest's From %q, Peek's %q", r.From, from)
			}
			return
		}
		if err != nil {
			if from != nil {
				t.Fatalf("Peek returned %q with error %v", from, err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrVersion", err)
			}
			if derr == nil || derr.Error() != err.Error() {
				t.Fatalf("Peek's error %q, Decode's %v: want the same", err, derr)
			}
			return
		}
		if len(from) == 0 || !bytes.Contains(b, from) {
			t.Fatalf("Peek = %q, not a name in the input", from)
		}
		if derr == nil && p.From != string(from) {
			t.Fatalf("Decode's From %q, Peek's %q", p.From, from)
		}
		if derr == nil && p.Type() != kind {
			t.Fatalf("Decode's packet is a %v, Peek says %v", p.Type(), kind)
		}
	})
}

// benchPacket is a delta of 200 keys as one sync tick might carry: names
// for a quarter, counts in two buckets each, some marks and gauges.
func benchPacket() *Packet {
	p := &Packet{From: "obol-7d9f8c6b5-x2x4k", Incarnation: 1_700_000_000_123_456_789}
	now := int64(1_700_000_000_000)
	for k := range 200 {
		h := uint64(k+1) * 0x9e3779b97f4a7c15
		if k%4 == 0 {
			p.Names = append(p.Names, Name{Hash: h, Resource: "api/search", Domain: "tenant-" + strings.Repeat("4", 1+k%5)})
		}
		p.Counts = append(p.Counts, Count{Hash: h, Slot: 0, Bucket: now, Value: uint64(k)}, Count{Hash: h, Slot: 0, Bucket: now + 250, Value: uint64(k + 3)})
		if k%10 == 0 {
			p.Marks = append(p.Marks, Mark{Hash: h, Slot: 1, At: now + 17})
		}
		if k%20 == 0 {
			p.Gauges = append(p.Gauges, Gauge{Hash: h, Value: 3, Version: uint64(k)})
		}
	}
	return p
}

func BenchmarkEncode(b *testing.B) {
	p := benchPacket()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		buf, err := Encode(p)
		if err != nil {
			b.Fatal(err)
		}
		n = len(buf)
	}
	b.ReportMetric(float64(n), "bytes/msg")
}

func BenchmarkDecode(b *testing.B) {
	buf := mustEncode(benchPacket())
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPeek(b *testing.B) {
	buf := first(Split(benchPacket(), 1309))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Peek(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSplit(b *testing.B) {
	p := benchPacket()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		msgs, err := Split(p, 1309)
		if err != nil {
			b.Fatal(err)
		}
		n = len(msgs)
	}
	b.ReportMetric(float64(n), "msgs")
}
