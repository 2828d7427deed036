package packet

import (
	"errors"
	"testing"
)

// TestSumRoundTrip: a sum is written as version 4 and read back as a sum,
// split like any message; a sum that is sequenced, full or holds marks or
// gauges is refused on both sides.
func TestSumRoundTrip(t *testing.T) {
	p := &Packet{From: "owner", Incarnation: 9, Sum: true,
		Names:  []Name{{Hash: 7, Resource: "ns/r", Domain: "d"}},
		Counts: []Count{{Hash: 7, Slot: 1, Bucket: 1_700_000_000_000, Value: 41}, {Hash: 8, Slot: 1, Bucket: 1_700_000_000_100, Value: 2}}}
	b := mustEncode(p)
	if Type(b[1]) != MsgSum {
		t.Fatalf("version byte %d, want %d", b[1], MsgSum)
	}
	q, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !q.Sum {
		t.Fatal("decoded sum lost Sum")
	}
	samePacket(t, q, p)
	msgs, err := Split(p, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if Type(m[1]) != MsgSum {
			t.Fatalf("split message version %d, want %d", m[1], MsgSum)
		}
	}
	if k, from, err := Peek(b); err != nil || k.IsRequest() || string(from) != "owner" {
		t.Fatalf("Peek = %v %q %v", k, from, err)
	}

	for name, bad := range map[string]*Packet{
		"seq":    {From: "o", Sum: true, Seq: 3},
		"full":   {From: "o", Sum: true, Full: true},
		"marks":  {From: "o", Sum: true, Marks: []Mark{{Hash: 1, Slot: 1, At: 5}}},
		"gauges": {From: "o", Sum: true, Gauges: []Gauge{{Hash: 1, Value: 1, Version: 1}}},
	} {
		if _, err := Encode(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Encode error %v, want ErrInvalid", name, err)
		}
	}
	// The decoder refuses the same shapes written by hand.
	full := mustEncode(&Packet{From: "o", Full: true})
	full[1] = byte(MsgSum)
	if _, err := Decode(full); !errors.Is(err, ErrMalformed) {
		t.Errorf("full sum: %v, want ErrMalformed", err)
	}
	marks := mustEncode(&Packet{From: "o", Marks: []Mark{{Hash: 1, Slot: 1, At: 5}}})
	marks[1] = byte(MsgSum)
	if _, err := Decode(marks); !errors.Is(err, ErrMalformed) {
		t.Errorf("sum with marks: %v, want ErrMalformed", err)
	}
	if _, err := Decode([]byte{0x96, 0x07}); !errors.Is(err, ErrVersion) {
		t.Errorf("version 7: %v, want ErrVersion", err)
	}
}
