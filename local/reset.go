package local

import (
	"fmt"
	"time"

	"github.com/obol-dev/obol/config"
)

// reset.go is the reset of one key (POST /v1/reset): what each kind
// forgets, and the engine's two ways in, a reset asked of this node
// (Reset, which records it for the cluster) and one a peer made
// (ApplyEntry with SlotReset).
//
// A reset at t forgets what the key holds from before t and keeps what it
// holds from t on, so that a reset that reaches a node late erases nothing
// made after it:
//
//   - tiers: hits made before t, and the entry of every tier instance
//     entered before t (one that holds hits made from t on stays, as
//     entered at the first of them; one with none ends); the key's hits
//     before t also leave the resource's last second (the global limit's
//     count). A peer's hit is
//     placed at its bucket's start, so one made in the bucket t falls in
//     is forgotten too: a reset never counts more than happened.
//   - gcra: the bucket is full again. A TAT does not say when its spends
//     were made; the cluster applies again its peers' spends made in
//     buckets that start at t or later (package reconcile). This node's
//     own spends between t and the moment it learns of a peer's reset are
//     forgotten: at most the time the reset takes to arrive.
//
// A key decided on its resource's overflow state (past max_keys) shares it
// with other keys: that state is not reset, since its counts are theirs
// too. The other kinds hold no counts to reset.

// Reset forgets every count, tier entry and gcra state of resource/domain
// made before t, and records the reset for the cluster, which passes it to
// every peer. A resource the config does not define (in a namespace that
// allows it) and an unlimited one hold nothing to reset: nil. A copies,
// adaptive or pacer resource is ErrWrongKind; a resource the config does
// not define and whose namespace does not allow it, ErrUnknownResource.
func (e *Engine) Reset(t time.Time, resource, domain string) error {
	r, ok := e.known(resource)
	if !ok {
		if _, _, limited := SplitLimitedName(resource); !limited {
			return e.unconfigured(resource) // nothing recorded to reset
		}
		var err error
		if r, err = e.lookup(resource, config.KindTiers); err != nil {
			return err // a limit set by a request is made, for the reset to reach the peers that count it
		}
	}
	switch r.kind {
	case config.KindTiers, config.KindGCRA:
	default:
		return wrongKind(r, "reset")
	}
	if r.unlimited {
		return nil
	}
	ms := t.UnixMilli()
	e.book.tickets.noteReset(resource, domain, ms)
	if !r.k.reset(domain, ms, ms, true) {
		return fmt.Errorf("%w: a reset of %q for %q: this agent keeps the resets of %d keys at most and is full; each is kept for its resource's longest window", ErrTooMany, resource, domain, maxResets)
	}
	return nil
}

// resetFrom applies a peer's reset of resource/domain made at at (Unix
// ms) at now: as Reset, but not recorded again (ApplyEntry).
func (e *Engine) resetFrom(r *resource, domain string, at, now int64) {
	if at > now {
		at = now // a peer's clock ahead of ours: what it made until now is all we hold
	}
	e.book.tickets.noteReset(r.name, domain, at)
	r.k.reset(domain, at, now, false)
}

// maxResets is how many keys' resets a cluster keeps, for the error that
// says it is full (package reconcile's MaxResets, which it cannot import).
const maxResets = 100_000

// forget drops what s (fitted to p) holds from before t (Unix ms) at now:
// hits made before t, and the entries of tier instances entered before t.
// An instance entered before t that holds hits made from t on stays, as
// entered at the first of them (the earliest sign of it after the reset);
// one with none ends. It returns the hits of the last second it dropped,
// per millisecond, so that the caller takes them out of the resource's
// last second too.
func (s *tiersState) forget(p *tiersParams, t, now int64) []stamp {
	s.settle(p, now)
	for i := range s.inst {
		in := &s.inst[i]
		in.hits.prune(t - 1)
		if !in.on || in.entered >= t {
			continue
		}
		if first, ok := in.hits.first(); ok {
			in.entered = first
			continue
		}
		in.on = false
	}
	var gone []stamp
	for _, st := range s.recent.live() {
		if st.at >= t {
			break
		}
		gone = append(gone, st)
	}
	s.recent.prune(t - 1)
	s.retryM = 0
	return gone
}

// at returns the hits the ring holds of millisecond t (callers hold mu).
func (r *secondRing) at(t int64) int64 {
	if t > r.head || t <= r.head-ringSize {
		return 0
	}
	return r.slots[t%ringSize]
}

// take removes n hits made at millisecond t from the ring, if it still
// holds that millisecond, never below zero (callers hold mu).
func (r *secondRing) take(t, n int64) {
	if t > r.head || t <= r.head-ringSize {
		return
	}
	s := &r.slots[t%ringSize]
	n = min(n, *s)
	*s -= n
	r.sum -= n
}

// reset forgets domain's hits and tier entries from before at (Unix ms),
// at now; when record is set it first records the reset for the cluster
// (under the key's lock, so that the key's records keep the engine's
// order), and forgets nothing, false, when the cluster refuses it.
func (tr *tiersRes) reset(domain string, at, now int64, record bool) bool {
	tr.ring.mu.Lock() // before the key's shard, as in decide
	defer tr.ring.mu.Unlock()
	sh, h := tr.keys.lock(domain)
	defer sh.mu.Unlock()
	if record && tr.rec.on() && !tr.rec.reset(domain, at) {
		return false
	}
	if st, ok := sh.get(domain, h); ok {
		st.fit(tr.params(domain))
		tr.ring.advance(now)
		for _, g := range st.forget(tr.params(domain), at, now) {
			tr.ring.take(g.at, g.n)
		}
	}
	return true
}

// reset makes domain's bucket full again: its TAT and, clustered, its idle
// gaps are dropped. When record is set it first records the reset for the
// cluster, which applies its peers' spends made from at on again, and
// forgets nothing, false, when the cluster refuses it.
func (gr *gcraRes) reset(domain string, at, now int64, record bool) bool {
	sh, h := gr.keys.lock(domain)
	defer sh.mu.Unlock()
	if record && gr.rec.on() && !gr.rec.reset(domain, at) {
		return false
	}
	if sh.find(domain, h) != nil {
		gr.keys.remove(sh, domain, h)
	}
	if gr.idle != nil {
		ish, ih := gr.idle.lock(domain) // after the key's shard, as in decide
		if ish.find(domain, ih) != nil {
			gr.idle.remove(ish, domain, ih)
		}
		ish.mu.Unlock()
	}
	return true
}

// The other kinds hold no counts: Reset refuses them before this.

func (c *copiesRes) reset(string, int64, int64, bool) bool { return true }
func (perAgent) reset(string, int64, int64, bool) bool     { return true }
