package reconcile

import (
	"math"
	"testing"

	"github.com/obol-dev/obol/gossip/packet"
)

// TestPeerClaimNearMaxSaturates: an origin's cumulative count of 2^64−1
// for a key (a lie, or a wrapped count) is applied as the greatest growth,
// never as a negative one that would take hits back; later claims of the
// same bucket change nothing.
func TestPeerClaimNearMaxSaturates(t *testing.T) {
	tab := newTable("self")
	name := []packet.Name{{Hash: 1, Resource: "rls:10", Domain: "6v_k_"}}
	var total int64
	for _, v := range []uint64{5, math.MaxUint64 - 10, math.MaxUint64} {
		p := &packet.Packet{From: "x", Incarnation: 1, Names: name, Counts: []packet.Count{{Hash: 1, Slot: 1, Bucket: 0, Value: v}}}
		ops, _ := tab.merge(p, 0, nil)
		for _, o := range ops {
			if o.kind != opCount {
				continue
			}
			if o.n < 0 {
				t.Fatalf("claim %d applied as a growth of %d", v, o.n)
			}
			if total > math.MaxInt64-o.n {
				total = math.MaxInt64
			} else {
				total += o.n
			}
		}
	}
	if total < 5 {
		t.Fatalf("applied %d in all", total)
	}
}
