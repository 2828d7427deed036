package reconcile

import (
	"slices"
	"testing"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/ring"
)

// ringRouter places keys on a ring of fixed members (Router), and
// resyncs as a Resyncer told to refuse the first refuse asks.
type ringRouter struct {
	r      *ring.Ring
	refuse int
	asked  []string
}

func (p *ringRouter) Aggregates() bool                    { return true }
func (p *ringRouter) Owners(h uint64) (string, string)    { return p.r.Owners(h) }
func (p *ringRouter) Epoch() uint64                       { return 1 }
func (p *ringRouter) Members() []string                   { return p.r.Names() }
func (p *ringRouter) SendTo(string, *packet.Packet) error { return nil }
func (p *ringRouter) Send(*packet.Packet) error           { return nil }
func (p *ringRouter) Live() int                           { return len(p.r.Names()) }
func (p *ringRouter) ResyncNow([]string)                  {}
func (p *ringRouter) Resync(name string) bool {
	if p.refuse > 0 {
		p.refuse--
		return false
	}
	p.asked = append(p.asked, name)
	return true
}

// keyWhere returns a key hash whose owner and successor on before and
// after satisfy ok.
func keyWhere(t *testing.T, before, after *ring.Ring, ok func(b, a [2]string) bool) uint64 {
	t.Helper()
	for h := uint64(1); h < 1_000_000; h++ {
		var b, a [2]string
		b[0], b[1] = before.Owners(h * 0x9e3779b97f4a7c15)
		a[0], a[1] = after.Owners(h * 0x9e3779b97f4a7c15)
		if ok(b, a) {
			return h * 0x9e3779b97f4a7c15
		}
	}
	t.Fatal("no such key")
	return 0
}

// TestNewHomesOnePasser: when a key's owner or successor changes, the
// gone origins' counts of it are passed on by a previous home that is
// still a live member (it holds every origin's counts of the key), not by
// every node that holds them (every joiner does, from its seed's state:
// a 1,000-node roll spent half its time in their push/pulls); when no
// previous home lives, every holder passes them. A key first seen at the
// change was placed by the previous placement.
func TestNewHomesOnePasser(t *testing.T) {
	four := []string{"a", "b", "c", "d"}
	five := []string{"a", "b", "c", "d", "e"}
	r4, r5 := ring.New(four), ring.New(five)
	// A key "e" takes over, whose previous homes stay live.
	moved := keyWhere(t, r4, r5, func(b, a [2]string) bool { return a[0] == "e" && b[0] != "e" && b[1] != "e" })
	var before [2]string
	before[0], before[1] = r4.Owners(moved)
	var other string // a live member that is neither previous home
	for _, m := range four {
		if m != before[0] && m != before[1] {
			other = m
			break
		}
	}
	cases := []struct {
		name    string
		self    string
		members []string // live after the change
		known   bool     // the key was in homes before the change (else first seen)
		want    []string
	}{
		{"previous owner passes", before[0], five, true, []string{"e"}},
		{"previous successor passes", before[1], five, true, []string{"e"}},
		{"another holder leaves it to them", other, five, true, nil},
		{"first seen: placed by the previous ring", before[0], five, false, []string{"e"}},
		{"first seen, another holder", other, five, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab := newTable(tc.self)
			tab.origins["gone"] = &origin{name: "gone", gone: true, keys: map[uint64]*remoteKey{moved: nil}}
			tab.placedOn = r4.Names()
			if tc.known {
				tab.homes = map[uint64][2]string{moved: before}
			}
			got := tab.newHomes(&ringRouter{r: ring.New(tc.members)}, tc.self)
			if !slices.Equal(got, tc.want) {
				t.Errorf("self %s (previous homes %v): passes to %v, want %v", tc.self, before, got, tc.want)
			}
		})
	}

	// Both previous homes gone: every holder passes to the new homes that
	// were not homes before.
	var left []string
	for _, m := range five {
		if m != before[0] && m != before[1] {
			left = append(left, m)
		}
	}
	rl := ring.New(left)
	var now [2]string
	now[0], now[1] = rl.Owners(moved)
	tab := newTable(other)
	tab.origins["gone"] = &origin{name: "gone", gone: true, keys: map[uint64]*remoteKey{moved: nil}}
	tab.homes = map[uint64][2]string{moved: before}
	var want []string
	for _, m := range now {
		if m != other {
			want = append(want, m)
		}
	}
	slices.Sort(want)
	if got := tab.newHomes(&ringRouter{r: rl}, other); !slices.Equal(got, want) {
		t.Errorf("previous homes %v gone, self %s: passes to %v, want %v", before, other, got, want)
	}
}

// TestPassHeldRetriesRefusedResyncs: a member the sender will not resync
// with yet (it did within its ResyncAfter) is asked again on later steps
// until it is, and dropped once it is no longer a live member.
func TestPassHeldRetriesRefusedResyncs(t *testing.T) {
	rt := &ringRouter{r: ring.New([]string{"a", "b", "c"}), refuse: 2}
	c := &Cluster{name: "a"}
	c.sender.Store(&senderBox{s: rt})
	c.passHeld(rt, []string{"b", "c"}) // both refused
	if len(rt.asked) != 0 || !slices.Equal(c.passing, []string{"b", "c"}) {
		t.Fatalf("after refusals: asked %v, pending %v", rt.asked, c.passing)
	}
	rt.r = ring.New([]string{"a", "b"}) // c went
	c.passHeld(rt, nil)
	if !slices.Equal(rt.asked, []string{"b"}) || len(c.passing) != 0 {
		t.Errorf("on the next step: asked %v, pending %v; want b asked, none pending", rt.asked, c.passing)
	}
	if got := c.stats.heldPassed.Load(); got != 1 {
		t.Errorf("heldPassed %d, want 1", got)
	}
}
