package packet

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func mustRequest(r *Request) []byte {
	b, err := EncodeRequest(r)
	if err != nil {
		panic(err)
	}
	return b
}

// TestSplitNumbersMessages: the messages of a sequenced packet carry
// Seq, Seq+1, … in order, each within the budget, across the boundary
// where the seq takes one more byte; an unsequenced packet's messages are
// version 1.
func TestSplitNumbersMessages(t *testing.T) {
	for _, seq := range []uint64{0, 1, 120, 127, 250, 65530, maxSeq - 1000} {
		p := benchPacket()
		p.Seq = seq
		msgs, err := Split(p, 300)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) < 10 {
			t.Fatalf("seq %d: %d messages, want many", seq, len(msgs))
		}
		var got Packet
		for i, b := range msgs {
			if len(b) > 300 {
				t.Fatalf("seq %d: message %d has %d bytes, budget 300", seq, i, len(b))
			}
			q, err := Decode(b)
			if err != nil {
				t.Fatalf("seq %d: message %d: %v", seq, i, err)
			}
			want := uint64(0)
			if seq != 0 {
				want = seq + uint64(i)
			}
			if q.Seq != want {
				t.Fatalf("seq %d: message %d has Seq %d, want %d", seq, i, q.Seq, want)
			}
			if v := Type(b[1]); (seq == 0) != (v == MsgSync) {
				t.Fatalf("seq %d: message %d is version %d", seq, i, v)
			}
			got.Names = append(got.Names, q.Names...)
			got.Counts = append(got.Counts, q.Counts...)
			got.Marks = append(got.Marks, q.Marks...)
			got.Gauges = append(got.Gauges, q.Gauges...)
		}
		got.From, got.Incarnation, got.Seq = p.From, p.Incarnation, p.Seq
		samePacket(t, &got, p)
	}
	if _, err := Split(&Packet{From: "a", Seq: maxSeq + 1}, 300); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Split of a seq past the range: %v, want ErrInvalid", err)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range []Request{
		{From: "a"},
		{From: "node-1", Incarnation: 1_700_000_000_000_000_000, Target: 42, Seqs: []uint64{1, 2, 300, maxSeq}},
		{From: "b", Hashes: []uint64{0, 1, math.MaxUint64}},
		{From: "c", Target: 7, Seqs: seqRange(MaxRequestItems), Hashes: seqRange(MaxRequestItems)},
	} {
		b := mustRequest(&r)
		got, err := DecodeRequest(b)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if !reflect.DeepEqual(*got, r) {
			t.Fatalf("round trip: got %+v, want %+v", *got, r)
		}
		kind, from, err := Peek(b)
		if err != nil || !kind.IsRequest() || string(from) != r.From {
			t.Fatalf("Peek = %d, %q, %v; want a request from %q", kind, from, err, r.From)
		}
		if len(b) > 2500 {
			t.Fatalf("%d bytes, over the 2,500 a request must fit in", len(b))
		}
	}
}

func seqRange(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = math.MaxUint64/2 - uint64(i)
	}
	return out
}

func TestEncodeRequestRefuses(t *testing.T) {
	for _, tc := range []struct {
		r   *Request
		msg string
	}{
		{nil, "nil request"},
		{&Request{}, "empty From"},
		{&Request{From: "a", Seqs: []uint64{0}}, "seq 0"},
		{&Request{From: "a", Seqs: []uint64{maxSeq + 1}}, "want 1 to"},
		{&Request{From: "a", Hashes: make([]uint64, MaxRequestItems+1)}, "at most 128"},
	} {
		if _, err := EncodeRequest(tc.r); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("EncodeRequest(%+v) = %v; want ErrInvalid mentioning %q", tc.r, err, tc.msg)
		}
	}
}

func TestDecodeRequestMalformed(t *testing.T) {
	hdr := func(e *msgpack.Encoder) {
		_ = e.EncodeArrayLen(6)
		_ = e.EncodeUint(3)
		_ = e.EncodeString("a")
		_ = e.EncodeUint(1)
		_ = e.EncodeUint(2)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		err  error
		msg  string
	}{
		{"a sync message", mustEncode(&Packet{From: "a"}), ErrVersion, "is a sync message"},
		{"truncated", enc(hdr), ErrMalformed, "seqs at byte 6: truncated"},
		{"seqs not an array", enc(func(e *msgpack.Encoder) { hdr(e); _ = e.EncodeString("x") }), ErrMalformed, "seqs at byte 6: want an array, got a string"},
		{"seq 0", enc(func(e *msgpack.Encoder) {
			hdr(e)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeUint(0)
			_ = e.EncodeArrayLen(0)
		}), ErrMalformed, "want 1 to"},
		{"too many hashes", enc(func(e *msgpack.Encoder) {
			hdr(e)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(MaxRequestItems + 1)
			for range MaxRequestItems + 1 {
				_ = e.EncodeUint(1)
			}
		}), ErrMalformed, "129 items, at most 128"},
		{"hash negative", enc(func(e *msgpack.Encoder) {
			hdr(e)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeInt(-1)
		}), ErrMalformed, "want an unsigned integer"},
		{"trailing", append(mustRequest(&Request{From: "a"}), 0), ErrMalformed, "1 trailing bytes"},
		{"array longer than input", enc(func(e *msgpack.Encoder) { hdr(e); _ = e.EncodeArrayLen(100) }), ErrMalformed, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeRequest(tc.in)
			if r != nil || !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("DecodeRequest = %+v, %v; want %v mentioning %q", r, err, tc.err, tc.msg)
			}
		})
	}
}

func FuzzDecodeRequest(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 6 {
		q := &Request{From: "n" + strings.Repeat("x", r.IntN(20)), Incarnation: r.Uint64(), Target: r.Uint64()}
		for range r.IntN(5) {
			q.Seqs = append(q.Seqs, 1+r.Uint64N(1<<40))
		}
		for range r.IntN(5) {
			q.Hashes = append(q.Hashes, r.Uint64())
		}
		f.Add(mustRequest(q))
	}
	f.Add(mustEncode(&Packet{From: "a"}))
	f.Add(mustRequest(&Request{From: "r", Target: 2, Seqs: []uint64{9}, Reship: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := DecodeRequest(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrVersion", err)
			}
			if q != nil {
				t.Fatalf("DecodeRequest returned a request with error %v", err)
			}
			return
		}
		b2, err := EncodeRequest(q)
		if err != nil {
			t.Fatalf("EncodeRequest of a decoded request: %v", err)
		}
		q2, err := DecodeRequest(b2)
		if err != nil || !reflect.DeepEqual(q, q2) {
			t.Fatalf("re-decoded %+v, %v; want %+v", q2, err, q)
		}
	})
}
