package packet

import "testing"

// TestTypeOfPacket: a packet's fields pick its type, and the type is the
// first element Encode writes; a request's Reship picks its type the same
// way.
func TestTypeOfPacket(t *testing.T) {
	for _, tc := range []struct {
		p    Packet
		want Type
	}{
		{Packet{From: "a"}, MsgSync},
		{Packet{From: "a", Full: true}, MsgSync},
		{Packet{From: "a", Seq: 3}, MsgSeqSync},
		{Packet{From: "a", Seq: 3, Full: true}, MsgSeqSync},
		{Packet{From: "a", Sum: true}, MsgSum},
		{Packet{From: "a", Seq: 3, Targeted: true}, MsgTargeted},
		{Packet{From: "a", Seq: 3, Targeted: true, Sum: true}, MsgTargeted},
	} {
		if got := tc.p.Type(); got != tc.want {
			t.Fatalf("%+v: Type %v, want %v", tc.p, got, tc.want)
		}
		b := mustEncode(&tc.p)
		if Type(b[1]) != tc.want {
			t.Fatalf("%+v: Encode wrote type %d, want %d", tc.p, b[1], tc.want)
		}
		if got, _, err := Peek(b); err != nil || got != tc.want {
			t.Fatalf("%+v: Peek = %v, %v; want %v", tc.p, got, err, tc.want)
		}
	}
	for _, r := range []Request{{From: "a"}, {From: "a", Reship: true}} {
		want := MsgRequest
		if r.Reship {
			want = MsgReship
		}
		b := mustRequest(&r)
		if r.Type() != want || Type(b[1]) != want {
			t.Fatalf("%+v: Type %v, wrote %d; want %v", r, r.Type(), b[1], want)
		}
	}
}

// TestTypeString names every type, and an unknown one by its number.
func TestTypeString(t *testing.T) {
	seen := map[string]bool{}
	for ty := MsgSync; ty <= MsgState; ty++ {
		s := ty.String()
		if seen[s] {
			t.Fatalf("%d: name %q given twice", ty, s)
		}
		seen[s] = true
	}
	if got := Type(9).String(); got != "type 9" {
		t.Fatalf("Type(9) = %q, want %q", got, "type 9")
	}
}
