package reconcile

import (
	"sync"

	"github.com/obol-dev/obol/gossip/packet"
)

// names.go is how key names travel once per key per peer: a sender
// remembers which names it shipped lately, or heard a peer ship, and
// leaves them out while its peers keep them; a receiver keeps a name a
// while after its last use and asks the origin for one it lacks, and the
// origin answers from what it remembers (Names).

// NameTTL is how long, ms, a receiver keeps a key's name after the last
// count of that key it merged, and how long a sender that ships once
// counts on it: a key shipped within NameTTL of its last shipment, or of
// a peer's shipment of its name (which went to every member), goes
// without its name. A receiver that lacks a name anyway (it started since,
// or let the name go to stay under MaxNames) asks the origin for it.
const NameTTL = 5 * 60 * 1000

// MaxNames bounds the names a node remembers: the names it shipped (to
// leave them out, and answer asks), and the names of keys no peer count
// uses any more (to spare a repeat). Past it, a sender ships a name it
// could have left out and a receiver asks for one it let go: more bytes,
// never a wrong count.
const MaxNames = 1 << 18

// NameAsker is implemented by a Sender that can ask a peer for the names
// of key hashes (gossip.Node): the answer arrives as a packet holding the
// names. Must not block.
type NameAsker interface {
	AskNames(origin string, incarnation uint64, hashes []uint64)
}

// askAgain is how long, ms, a receiver waits for a name it asked for
// before it asks again (on the next tick after that).
const askAgain = 200

// nameMemory is the sender's memory of the names it shipped.
type nameMemory struct {
	mu    sync.Mutex
	names map[uint64]namedAt
}

type namedAt struct {
	resource, domain string
	at               int64 // ms: the key's last shipment
	named            int64 // ms: the last shipment that carried its name
}

// ship records a shipment of key h (resource, domain) at now and reports
// whether it must carry the name: unless one did within NameTTL and the
// key shipped since without a pause of NameTTL. With once unset it always
// must (the resend schedule decides names itself) and only records.
func (s *nameMemory) ship(h uint64, resource, domain string, now int64, once bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = make(map[uint64]namedAt)
	}
	n, ok := s.names[h]
	if ok && (n.resource != resource || n.domain != domain) {
		return true // a hash collision: keep the first, name the other every time
	}
	need := !once || !ok || now-n.at > NameTTL || now-n.named > NameTTL
	if !ok && len(s.names) >= MaxNames {
		return true
	}
	n = namedAt{resource: resource, domain: domain, at: now, named: n.named}
	if need {
		n.named = now
	}
	s.names[h] = n
	return need
}

// heard records names a peer shipped at now: that peer sent them to every
// member, so this node may leave them out of its own shipments as if it
// had shipped them itself.
func (s *nameMemory) heard(names []packet.Name, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = make(map[uint64]namedAt)
	}
	for _, nm := range names {
		n, ok := s.names[nm.Hash]
		switch {
		case ok && (n.resource != nm.Resource || n.domain != nm.Domain):
			continue // a collision: keep the first
		case !ok && len(s.names) >= MaxNames:
			continue
		}
		s.names[nm.Hash] = namedAt{resource: nm.Resource, domain: nm.Domain, at: max(n.at, now), named: now}
	}
}

// sweep forgets names not shipped within NameTTL of now.
func (s *nameMemory) sweep(now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, n := range s.names {
		if now-n.at > NameTTL {
			delete(s.names, h)
		}
	}
}

// lookup returns the names of hashes it remembers.
func (s *nameMemory) lookup(hashes []uint64, out []packet.Name) []packet.Name {
	s.mu.Lock()
	defer s.mu.Unlock()
	return appendNames(out, hashes, s.names, func(n namedAt) (string, string) { return n.resource, n.domain })
}

// appendNames appends to out the names m holds of hashes, name telling
// an entry's resource and domain.
func appendNames[V any](out []packet.Name, hashes []uint64, m map[uint64]V, name func(V) (string, string)) []packet.Name {
	for _, h := range hashes {
		if v, ok := m[h]; ok {
			r, d := name(v)
			out = append(out, packet.Name{Hash: h, Resource: r, Domain: d})
		}
	}
	return out
}

// Names returns the names of the hashes this node shipped within NameTTL,
// or holds copies of (gossip.NameSource): what a peer that lacks them
// asks for.
func (c *Cluster) Names(hashes []uint64) []packet.Name {
	out := c.named.lookup(hashes, nil)
	if len(out) == len(hashes) {
		return out
	}
	c.gmu.Lock()
	defer c.gmu.Unlock()
	return appendNames(out, hashes, c.gauges, func(g *ownGauge) (string, string) { return g.resource, g.domain })
}

// ownNames resolves, from this node's own memory of names (a key it
// shipped too, a name a peer shipped), the hashes of asks it can, appending
// to ops what waited for them, and returns the asks left. c.mu is held.
func (c *Cluster) ownNames(ops []op, asks []nameAsk, now int64) ([]op, []nameAsk) {
	if len(asks) == 0 {
		return ops, asks
	}
	var hashes []uint64
	for _, q := range asks {
		hashes = append(hashes, q.hashes...)
	}
	known := c.named.lookup(hashes, nil)
	if len(known) == 0 {
		return ops, asks
	}
	ops = c.tab.learn(known, now, ops)
	left := asks[:0]
	for _, q := range asks {
		hs := q.hashes[:0]
		for _, h := range q.hashes {
			if _, ok := c.tab.names[h]; !ok {
				hs = append(hs, h)
			}
		}
		if len(hs) > 0 {
			q.hashes = hs
			left = append(left, q)
		}
	}
	return ops, left
}

// askNames asks each origin for the names in asks (origin → incarnation
// and hashes), through the sender when it can ask.
func (c *Cluster) askNames(asks []nameAsk) {
	if len(asks) == 0 {
		return
	}
	b := c.sender.Load()
	if b == nil {
		return
	}
	a, ok := b.s.(NameAsker)
	if !ok {
		return
	}
	for _, q := range asks {
		for len(q.hashes) > 0 {
			k := min(len(q.hashes), packet.MaxRequestItems)
			a.AskNames(q.origin, q.inc, q.hashes[:k])
			c.stats.namesAsked.Add(uint64(k))
			q.hashes = q.hashes[k:]
		}
	}
}

// nameAsk is the names to ask one origin for.
type nameAsk struct {
	origin string
	inc    uint64
	hashes []uint64
}
