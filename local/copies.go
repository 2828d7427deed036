package local

import "github.com/obol-dev/obol/internal/sat"

// copies.go is the copy-limited resource (Charon's counting
// semaphore), its rules: a resource's limits (per domain, per group, in
// total) and its counts, this node's holds and its peers'. No clock, no
// I/O, no lock of its own: the book's lock (book.go) guards every count, and
// the book owns the holds, the sessions that own them and the transfers.

// maxPeerHolds bounds the copies peers are taken to hold of one domain:
// far over any limit (MaxCopies × 2^20), far under the sums' overflow, so
// that a peer's claim, however large, reads as "full", and the totals
// (saturating) never wrap.
const maxPeerHolds = MaxCopies << 20

// copiesRes is one copy-limited resource's limits and counts.
type copiesRes struct {
	name        string
	domainLimit int64 // effective; NoLimit = none, 0 grants nothing
	global      int64 // NoLimit = none
	overrides   map[string]int64
	groups      []copiesGroup
	byDomain    map[string][]int // a domain's groups
	unlimited   bool             // unconfigured-but-allowed or ignore_configured
	shadow      bool
	book        *book // guards the counts

	total    int64
	perDom   map[string]int64
	perGroup []int64

	// Peers' holds (the cluster): they count against every limit.
	remote      map[string]int64
	remoteTotal int64
	remoteGroup []int64
}

type copiesGroup struct {
	name  string
	limit int64 // effective; NoLimit = none
}

// limitFor returns the effective domain limit of domain.
func (r *copiesRes) limitFor(domain string) int64 {
	if v, ok := r.overrides[domain]; ok {
		return v
	}
	return r.domainLimit
}

// fit returns the largest n ≤ q that every limit of domain still allows.
func (r *copiesRes) fit(domain string, q int64) int64 {
	if r.unlimited {
		return q
	}
	n := q
	if d := r.limitFor(domain); d >= 0 {
		n = min(n, d-r.perDom[domain]-r.remote[domain])
	}
	if r.global >= 0 {
		n = min(n, r.global-r.total-r.remoteTotal)
	}
	for _, g := range r.byDomain[domain] {
		if l := r.groups[g].limit; l >= 0 {
			n = min(n, l-r.perGroup[g]-r.remoteGroup[g])
		}
	}
	return max(n, 0)
}

// add changes the counts of domain (and its groups) by n.
func (r *copiesRes) add(domain string, n int64) {
	r.total += n
	if v := r.perDom[domain] + n; v != 0 {
		r.perDom[domain] = v
	} else {
		delete(r.perDom, domain)
	}
	for _, g := range r.byDomain[domain] {
		r.perGroup[g] += n
	}
}

// addPeers changes the holds peers have of domain (the caller holds the
// book's lock). A peer's holds count against every limit like local ones.
func (r *copiesRes) addPeers(domain string, n int64) {
	if r.remote == nil {
		r.remote = make(map[string]int64)
	}
	if len(r.remoteGroup) < len(r.groups) {
		r.remoteGroup = append(r.remoteGroup, make([]int64, len(r.groups)-len(r.remoteGroup))...)
	}
	old := r.remote[domain]
	v := min(sat.Add64(old, n), maxPeerHolds)
	if v <= 0 {
		v = 0 // never below zero
		delete(r.remote, domain)
	} else {
		r.remote[domain] = v
	}
	n = v - old
	r.remoteTotal = max(sat.Add64(r.remoteTotal, n), 0)
	for _, g := range r.byDomain[domain] {
		r.remoteGroup[g] = max(sat.Add64(r.remoteGroup[g], n), 0)
	}
}

// groupsOf returns the pools a domain draws from, with their counts.
func (r *copiesRes) groupsOf(domain string) []GroupHolds {
	idx := r.byDomain[domain]
	if len(idx) == 0 {
		return nil
	}
	out := make([]GroupHolds, len(idx))
	for i, g := range idx {
		out[i] = GroupHolds{Name: r.groups[g].name, Limit: int(r.groups[g].limit), Holds: int(r.perGroup[g] + r.remoteGroup[g])}
	}
	return out
}

// takeLimits takes the limits of n (built from a reloaded config) while
// keeping r's counts, and recomputes the group counts from the domain
// counts: a group's holds are the holds of its member domains.
func (r *copiesRes) takeLimits(n *copiesRes) {
	r.domainLimit, r.global, r.overrides = n.domainLimit, n.global, n.overrides
	r.groups, r.byDomain, r.unlimited, r.shadow = n.groups, n.byDomain, n.unlimited, n.shadow
	r.perGroup = make([]int64, len(r.groups))
	r.remoteGroup = make([]int64, len(r.groups))
	for d, held := range r.perDom {
		for _, g := range r.byDomain[d] {
			r.perGroup[g] += held
		}
	}
	for d, held := range r.remote {
		for _, g := range r.byDomain[d] {
			r.remoteGroup[g] += held
		}
	}
}
