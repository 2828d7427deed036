package reconcile

import (
	"github.com/obol-dev/obol/gossip"
	"github.com/obol-dev/obol/gossip/packet"
)

// Router is implemented by a Sender that can place keys on owners and send
// to one member (gossip.Node). While Aggregates reports true and the mesh
// has at least Options.OwnerFrom live members, the cluster runs in owner
// mode: a node sends a key's counts to its owner and successor only, and
// the owner sends each node that has the key active the sum of everyone
// else's counts (Packet.Sum); see owner.go.
type Router interface {
	// Aggregates reports whether every live member takes part in owner
	// mode (reads sums and places keys on the same ring).
	Aggregates() bool
	// Owners returns the owner of key hash h and its successor among the
	// live members, self included ("" when there is none).
	Owners(h uint64) (owner, successor string)
	// Epoch changes whenever the placement does (a member joined or went).
	Epoch() uint64
	// Members returns the live members Owners places keys on, self
	// included, sorted. The caller must not modify the slice.
	Members() []string
	// SendTo sends p to the member named to alone, best effort. It must
	// not block for long.
	SendTo(to string, p *packet.Packet) error
}

// TargetedRepairer is implemented by a Router whose messages to one
// member are numbered in a stream per member, so that a member that finds
// one missing asks for a reship (ReshipTo): gossip.Node. While Reships
// reports true (and the Sender repairs its stream to every peer,
// Repairer), owner mode sends a change to its owner once and relays it
// once, instead of on the resend schedule.
type TargetedRepairer interface {
	Reships() bool
}

var (
	_ Router             = (*gossip.Node)(nil)
	_ TargetedRepairer   = (*gossip.Node)(nil)
	_ HeartbeatStretcher = (*gossip.Node)(nil)
	_ gossip.Reshipper   = (*Cluster)(nil)
)
