package packet

import (
	"errors"
	"testing"
)

// TestTargetedRoundTrip: a targeted message (counts to an owner, or a sum)
// is written as version 5 with its seq and read back as it was; Split
// numbers its messages Seq, Seq+1, …; shapes a targeted message never has
// are refused on both sides.
func TestTargetedRoundTrip(t *testing.T) {
	for _, sum := range []bool{false, true} {
		p := &Packet{From: "n1", Incarnation: 9, Seq: 41, Targeted: true, Sum: sum,
			Names:  []Name{{Hash: 7, Resource: "ns/r", Domain: "d"}},
			Counts: []Count{{Hash: 7, Slot: 1, Bucket: 1_700_000_000_000, Value: 41}, {Hash: 8, Slot: 1, Bucket: 1_700_000_000_100, Value: 2}}}
		b := mustEncode(p)
		if Type(b[1]) != MsgTargeted {
			t.Fatalf("version byte %d, want %d", b[1], MsgTargeted)
		}
		q, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !q.Targeted || q.Sum != sum || q.Seq != 41 || q.Full {
			t.Fatalf("decoded targeted=%v sum=%v seq=%d full=%v, want true %v 41 false", q.Targeted, q.Sum, q.Seq, q.Full, sum)
		}
		samePacket(t, q, p)
		msgs, err := Split(p, 40)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) < 2 {
			t.Fatalf("split into %d messages, want several", len(msgs))
		}
		for i, m := range msgs {
			q, err := Decode(m)
			if err != nil {
				t.Fatal(err)
			}
			if !q.Targeted || q.Sum != sum || q.Seq != 41+uint64(i) {
				t.Fatalf("message %d: targeted=%v sum=%v seq=%d, want true %v %d", i, q.Targeted, q.Sum, q.Seq, sum, 41+i)
			}
		}
		if k, from, err := Peek(b); err != nil || k.IsRequest() || string(from) != "n1" {
			t.Fatalf("Peek = %v %q %v", k, from, err)
		}
	}
	for name, bad := range map[string]*Packet{
		"no seq": {From: "o", Targeted: true},
		"full":   {From: "o", Targeted: true, Seq: 1, Full: true},
		"marks":  {From: "o", Targeted: true, Seq: 1, Marks: []Mark{{Hash: 1, Slot: 1, At: 5}}},
		"gauges": {From: "o", Targeted: true, Seq: 1, Gauges: []Gauge{{Hash: 1, Value: 1, Version: 1}}},
	} {
		if _, err := Encode(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Encode error %v, want ErrInvalid", name, err)
		}
	}
	// The decoder refuses a seq of 0 and marks, written by hand.
	zero := mustEncode(&Packet{From: "o", Seq: 1, Counts: []Count{{Hash: 1, Value: 1}}})
	zero[1] = byte(MsgTargeted)
	zero[5] = 0 // the seq, after [0x97, 5, 0xa1 'o', incarnation 0]
	if _, err := Decode(zero); !errors.Is(err, ErrMalformed) {
		t.Errorf("seq 0: %v, want ErrMalformed", err)
	}
	marks := mustEncode(&Packet{From: "o", Seq: 1, Marks: []Mark{{Hash: 1, Slot: 1, At: 5}}})
	marks[1] = byte(MsgTargeted)
	if _, err := Decode(marks); !errors.Is(err, ErrMalformed) {
		t.Errorf("targeted with marks: %v, want ErrMalformed", err)
	}
}

// TestReshipRequestRoundTrip: a reship request is version 6, read back as
// one by DecodeRequest and refused by Decode.
func TestReshipRequestRoundTrip(t *testing.T) {
	r := &Request{From: "asker", Incarnation: 3, Target: 8, Seqs: []uint64{5, 6}, Reship: true}
	b, err := EncodeRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if Type(b[1]) != MsgReship {
		t.Fatalf("version byte %d, want %d", b[1], MsgReship)
	}
	q, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !q.Reship || q.From != "asker" || q.Incarnation != 3 || q.Target != 8 || len(q.Seqs) != 2 {
		t.Fatalf("decoded %+v", q)
	}
	if k, from, err := Peek(b); err != nil || !k.IsRequest() || string(from) != "asker" {
		t.Fatalf("Peek = %v %q %v", k, from, err)
	}
	if _, err := Decode(b); !errors.Is(err, ErrVersion) {
		t.Fatalf("Decode of a reship request: %v, want ErrVersion", err)
	}
	plain, _ := EncodeRequest(&Request{From: "asker"})
	if q, err := DecodeRequest(plain); err != nil || q.Reship {
		t.Fatalf("a plain request decoded as %+v, %v", q, err)
	}
}
