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

var _ Router = (*gossip.Node)(nil)
