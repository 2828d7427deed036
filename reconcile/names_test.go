package reconcile

import (
	"reflect"
	"testing"

	"github.com/obol-dev/obol/gossip/packet"
)

// TestReceiverKeepsAndAsksForNames follows a receiver's names on fixed
// instants: a count of an unknown hash is asked for once, again after
// askAgain (on a tick); a name is kept NameTTL after the last key that used
// it was swept, then dropped.
func TestReceiverKeepsAndAsksForNames(t *testing.T) {
	tab := newTable("me")
	life := func(string, uint32, bool) (int64, bool) { return 1000, true }
	merge := func(p *packet.Packet, now int64) []op {
		ops, _ := tab.merge(p, now, nil)
		return ops
	}
	cnt := func(h, v uint64) packet.Count { return packet.Count{Hash: h, Bucket: 0, Value: v} }

	if ops := merge(&packet.Packet{From: "a", Incarnation: 1, Counts: []packet.Count{cnt(7, 1), cnt(8, 1)}}, 0); len(ops) != 0 {
		t.Fatalf("unnamed counts applied: %v", ops)
	}
	want := []nameAsk{{origin: "a", inc: 1, hashes: []uint64{7, 8}}}
	if got := tab.takeAsks(); !reflect.DeepEqual(got, want) {
		t.Fatalf("asks %+v, want %+v", got, want)
	}
	merge(&packet.Packet{From: "a", Incarnation: 1, Counts: []packet.Count{cnt(7, 2)}}, 10)
	if got := tab.takeAsks(); len(got) != 0 {
		t.Fatalf("asked again at once: %+v", got)
	}
	tab.reask(askAgain - 1)
	if got := tab.takeAsks(); len(got) != 0 {
		t.Fatalf("asked again within askAgain: %+v", got)
	}
	tab.reask(askAgain + 10)
	if got := tab.takeAsks(); !reflect.DeepEqual(got, want) {
		t.Fatalf("asks after askAgain %+v, want %+v again", got, want)
	}
	tab.sweep(1500, 0, life) // past the buckets' life: counts of unnamed keys stay
	ops := merge(&packet.Packet{From: "a", Incarnation: 1, Names: []packet.Name{{Hash: 7, Resource: "r", Domain: "d7"}}}, 1600)
	if len(ops) != 1 || ops[0].n != 2 || ops[0].domain != "d7" {
		t.Fatalf("the name's arrival applied %+v, want the count of 2 that waited", ops)
	}
	// The key's buckets age out at 1000+grace; its name stays NameTTL more.
	tab.sweep(3000, 0, life)
	if _, ok := tab.names[7]; !ok {
		t.Fatal("the name was dropped with its key")
	}
	tab.sweep(1600+NameTTL+1, 0, life)
	if _, ok := tab.names[7]; ok {
		t.Fatal("the name outlived NameTTL")
	}
}

// TestNameMemory: a sender ships a key's name unless it did within NameTTL
// and the key kept shipping (and then at most once per NameTTL); a collision keeps the first name; Names
// answers from it.
func TestNameMemory(t *testing.T) {
	var m nameMemory
	steps := []struct {
		at   int64
		h    uint64
		dom  string
		once bool
		want bool
	}{
		{0, 1, "a", true, true},                    // first
		{100, 1, "a", true, false},                 // remembered
		{NameTTL, 1, "a", true, false},             // within NameTTL of the last shipment and of the name
		{NameTTL + 1, 1, "a", true, true},          // named over NameTTL ago: named again, at most that often
		{100 + 2*NameTTL + 1, 1, "a", true, true},  // a pause longer than NameTTL
		{100 + 2*NameTTL + 2, 1, "a", false, true}, // the resend schedule: always
		{100 + 2*NameTTL + 3, 1, "b", true, true},  // a collision: named every time
	}
	for i, st := range steps {
		if got := m.ship(st.h, "r", st.dom, st.at, st.once); got != st.want {
			t.Fatalf("step %d: ship = %v, want %v", i, got, st.want)
		}
	}
	if got := m.lookup([]uint64{1, 2}, nil); len(got) != 1 || got[0].Domain != "a" {
		t.Fatalf("lookup = %+v, want hash 1's first name", got)
	}
	m.sweep(100 + 3*NameTTL + 10)
	if got := m.lookup([]uint64{1}, nil); len(got) != 0 {
		t.Fatalf("lookup after the sweep = %+v, want nothing", got)
	}
}
