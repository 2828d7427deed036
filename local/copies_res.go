package local

import (
	"fmt"
	"time"

	"github.com/obol-dev/obol/config"
)

// copies_res.go is a copy-limited resource's storage and calls: its limits
// from the config, Reserve, and what the registry and the cluster ask of
// it, each under the book's lock (book.go), around the rules of copies.go.

var _ kindRes = (*copiesRes)(nil)

// copiesFromConfig returns the state of a copy-limited resource, whose
// counts the book b guards. Its limits are rc's as they are: normalization
// has lowered every one above global_limit, or absent, to it.
func copiesFromConfig(name string, rc *config.Resource, unlimited bool, b *book) *copiesRes {
	eff := func(l *int) int64 { return int64(limitOf(l)) }
	r := &copiesRes{
		name: name, domainLimit: eff(rc.DomainLimit), global: eff(rc.GlobalLimit),
		byDomain: make(map[string][]int), perDom: make(map[string]int64),
		unlimited: unlimited, shadow: rc.Shadow, book: b,
	}
	for d, o := range rc.Domains {
		if r.overrides == nil {
			r.overrides = make(map[string]int64)
		}
		r.overrides[d] = eff(o.DomainLimit)
	}
	for i, gr := range rc.Groups {
		r.groups = append(r.groups, copiesGroup{name: gr.Name, limit: eff(gr.Limit)})
		for _, d := range gr.Domains {
			r.byDomain[d] = append(r.byDomain[d], i)
		}
	}
	r.perGroup = make([]int64, len(r.groups))
	r.remoteGroup = make([]int64, len(r.groups))
	return r
}

// Reserve takes between minCopies and copies copies of resource for domain in
// session. A rejection is a Reservation with Granted 0, no hold and no error.
func (e *Engine) Reserve(t time.Time, resource, domain string, copies, minCopies int, session string) (Reservation, error) {
	if err := checkCopies(copies, minCopies); err != nil {
		return Reservation{}, err
	}
	r, err := e.lookup(resource, config.KindCopies)
	if err != nil {
		return Reservation{}, err
	}
	if r == nil {
		return Reservation{}, fmt.Errorf("%w: %q: too many unconfigured resources (%d) to track another copy-limited one", ErrUnknownResource, resource, MaxUnconfigured)
	}
	cr, ok := kindOf[*copiesRes](r)
	if !ok {
		return Reservation{}, wrongKind(r, "reserve")
	}
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	e.book.expire(t.UnixNano())
	s, err := e.book.session(session)
	if err != nil {
		return Reservation{}, err
	}
	if copies > 0 {
		if err := e.book.roomForHold(s); err != nil {
			return Reservation{}, err
		}
	}
	n, h, shadow := e.book.reserve(cr, domain, int64(copies), int64(minCopies), s)
	res := Reservation{
		Granted: int(n), DomainLimit: int(cr.limitFor(domain)), GlobalLimit: int(cr.global),
		DomainHolds: int(cr.perDom[domain] + cr.remote[domain]), GlobalHolds: int(cr.total + cr.remoteTotal),
		Groups: cr.groupsOf(domain), Shadow: shadow, Lenient: cr.unlimited,
	}
	if h != nil {
		res.Hold = h.id
	}
	return res, nil
}

// state reports domain's holds (this node's and its peers') at t.
func (r *copiesRes) state(domain string, t time.Time) (ks KeyState) {
	r.book.mu.Lock()
	defer r.book.mu.Unlock()
	r.book.expire(t.UnixNano())
	ks.Holds = int(r.perDom[domain] + r.remote[domain])
	ks.Tracked = ks.Holds > 0
	return ks
}

// sweep does nothing: the book ends what expired (Engine.Step).
func (r *copiesRes) sweep(time.Time) {}

func (r *copiesRes) load() (keys, holds, peerHolds int) {
	r.book.mu.Lock()
	defer r.book.mu.Unlock()
	return 0, int(r.total), int(r.remoteTotal)
}

// adopt keeps old, with its counts and holds, under this one's limits.
func (r *copiesRes) adopt(old kindRes, _ *config.Resource) kindRes {
	o := old.(*copiesRes)
	o.takeLimits(r)
	return o
}

// release drops every hold and staged transfer of the resource.
func (r *copiesRes) release() int64 { return r.book.dropRes(r) }

// attach makes the cluster know the resource: copies ship holds (gauges),
// never counts, so nothing is recorded.
func (r *copiesRes) attach(c Cluster, name string, rc *config.Resource, a Applier) {
	c.Register(name, specOf(name, rc), a)
}

// addRemote changes the copies peers hold of domain by n.
func (r *copiesRes) addRemote(domain string, n int64) {
	r.book.mu.Lock()
	r.addPeers(domain, n)
	r.book.mu.Unlock()
}

// eachHold calls fn for every domain this node holds (or stages) copies of.
func (r *copiesRes) eachHold(fn func(domain string, holds int64)) {
	r.book.mu.Lock()
	defer r.book.mu.Unlock()
	for d, v := range r.perDom {
		if v > 0 {
			fn(d, v)
		}
	}
}

// A copy-limited resource counts no hits.

func (r *copiesRes) applyCount(string, int, int64, int64, int64, int64) {}
func (r *copiesRes) applyEntry(string, int, int64, int64)               {}
