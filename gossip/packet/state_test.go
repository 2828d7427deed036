package packet

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func stateFixture() *Packet {
	return &Packet{From: "b", Incarnation: 9, Full: true, Seq: 4,
		Names:  []Name{{Hash: 1, Resource: "demo/a", Domain: "x"}, {Hash: 2, Resource: "demo/b", Domain: "y"}, {Hash: 3, Resource: "demo/c", Domain: "z"}},
		Counts: []Count{{Hash: 1, Slot: 0, Bucket: 1000, Value: 5}},
		Gauges: []Gauge{{Hash: 3, Value: 2, Version: 7}, {Hash: 0, Version: 8}},
		Held: []Held{
			{From: "a", Incarnation: 3, Counts: []Count{{Hash: 1, Slot: 0, Bucket: 1000, Value: 200}, {Hash: 2, Slot: 1, Bucket: 2000, Value: 1}},
				Marks: []Mark{{Hash: 2, Slot: 1, At: 2100}}},
			{From: "b", Incarnation: 4, Counts: []Count{{Hash: 2, Slot: 0, Bucket: 3000, Value: 1 << 40}}},
		}}
}

func TestStateRoundTrip(t *testing.T) {
	p := stateFixture()
	b, err := EncodeState(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if q.From != "b" || q.Incarnation != 9 || !q.Full || q.Seq != 4 {
		t.Fatalf("header %q %d full=%v seq=%d", q.From, q.Incarnation, q.Full, q.Seq)
	}
	norm := func(hs []Held) []Held {
		out := slices.Clone(hs)
		for i := range out {
			out[i].Counts = slices.Clone(out[i].Counts)
			slices.SortFunc(out[i].Counts, func(a, b Count) int { return int(a.Hash) - int(b.Hash) })
			if len(out[i].Marks) == 0 {
				out[i].Marks = nil
			}
		}
		return out
	}
	if !reflect.DeepEqual(norm(q.Held), norm(p.Held)) {
		t.Fatalf("held\n got %+v\nwant %+v", q.Held, p.Held)
	}
	if !reflect.DeepEqual(q.Counts, p.Counts) || !reflect.DeepEqual(q.Gauges, p.Gauges) {
		t.Fatalf("own counts %+v gauges %+v", q.Counts, q.Gauges)
	}
	// Every name once, whichever message it rode.
	hashes := []uint64{}
	for _, n := range q.Names {
		hashes = append(hashes, n.Hash)
	}
	slices.Sort(hashes)
	if !slices.Equal(hashes, []uint64{1, 2, 3}) {
		t.Fatalf("names of hashes %v, want 1, 2, 3 once each", hashes)
	}
}

func TestStateWithoutHeldIsAFullMessage(t *testing.T) {
	p := stateFixture()
	p.Held = nil
	b, err := EncodeState(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatalf("a state without held origins should be an ordinary message (an earlier release reads it): %v", err)
	}
	q, err := DecodeState(b)
	if err != nil || !q.Full || len(q.Counts) != 1 {
		t.Fatalf("DecodeState: %+v, %v", q, err)
	}
}

func TestStateRefused(t *testing.T) {
	good, err := EncodeState(stateFixture())
	if err != nil {
		t.Fatal(err)
	}
	delta, _ := Encode(&Packet{From: "a", Counts: []Count{{Hash: 1, Value: 1}}})
	cases := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(slices.Clone(good), 0xc0)},
		{"a delta, not a state", delta},
		{"wrong length", append([]byte{0x94}, good[1:]...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodeState(tc.b)
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrVersion", err)
			}
		})
	}
	if _, err := Decode(good); !errors.Is(err, ErrVersion) {
		t.Fatalf("Decode of a state: %v, want ErrVersion (a state is never a datagram)", err)
	}
	for _, p := range []*Packet{nil, {From: "a"}, {From: "a", Full: true, Held: []Held{{}}}} {
		if _, err := EncodeState(p); !errors.Is(err, ErrInvalid) {
			t.Fatalf("EncodeState(%+v): %v, want ErrInvalid", p, err)
		}
	}
}

// TestStateSums: a state's sums (owner mode) round-trip in a sixth
// element, with or without held origins, their keys' names once in the
// state; a sums element that is not a sum, or from another origin, is
// refused naming it.
func TestStateSums(t *testing.T) {
	sums := []Count{{Hash: 2, Slot: 0, Bucket: 1000, Value: 40}, {Hash: 4, Slot: 1, Bucket: 3000, Value: 7}}
	for _, held := range []bool{true, false} {
		p := stateFixture()
		p.Names = append(p.Names, Name{Hash: 4, Resource: "demo/d", Domain: "w"})
		p.Sums = sums
		if !held {
			p.Held = nil
		}
		b, err := EncodeState(p)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != 0x96 {
			t.Fatalf("held=%v: state begins %#x, want a six-element array", held, b[0])
		}
		q, err := DecodeState(b)
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Clone(q.Sums)
		slices.SortFunc(got, func(a, b Count) int { return int(a.Hash) - int(b.Hash) })
		if !reflect.DeepEqual(got, sums) || len(q.Held) != len(p.Held) {
			t.Fatalf("held=%v: sums %+v held %d, want %+v and %d", held, got, len(q.Held), sums, len(p.Held))
		}
		seen := map[uint64]int{}
		for _, n := range q.Names {
			seen[n.Hash]++
		}
		if seen[4] != 1 || seen[2] != 1 {
			t.Fatalf("held=%v: names %+v: want hashes 2 and 4 once each", held, q.Names)
		}
	}
	// A sixth element that is not a sum from the state's origin.
	five, err := EncodeState(stateFixture())
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*Packet{
		"a sync message":      {From: "b", Incarnation: 9, Counts: sums},
		"another origin":      {From: "c", Incarnation: 9, Sum: true, Counts: sums},
		"another incarnation": {From: "b", Incarnation: 8, Sum: true, Counts: sums},
	} {
		mb, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		b := append([]byte{0x96}, five[1:]...)
		b = appendBin(b, mb)
		if _, err := DecodeState(b); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "sums") {
			t.Errorf("%s: %v, want ErrMalformed naming sums", name, err)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	good, _ := EncodeState(stateFixture())
	f.Add(good)
	withSums := stateFixture()
	withSums.Sums = []Count{{Hash: 2, Slot: 0, Bucket: 1000, Value: 40}}
	summed, _ := EncodeState(withSums)
	f.Add(summed)
	plain, _ := Encode(&Packet{From: "a", Full: true})
	f.Add(plain)
	f.Add([]byte{0x95, 0x07, 0xa1, 'a', 0x01, 0xc4, 0x00, 0x90})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeState(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrVersion", err)
			}
			return
		}
		if !p.Full {
			t.Fatalf("accepted a state that is not full: %+v", p)
		}
		// What DecodeState accepts, EncodeState writes and DecodeState
		// reads back with the same held origins.
		b2, err := EncodeState(p)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		q, err := DecodeState(b2)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(q.Held) != len(p.Held) || len(q.Counts) != len(p.Counts) || len(q.Sums) != len(p.Sums) {
			t.Fatalf("round trip changed the state: %d/%d held, %d/%d counts, %d/%d sums", len(q.Held), len(p.Held), len(q.Counts), len(p.Counts), len(q.Sums), len(p.Sums))
		}
	})
}
