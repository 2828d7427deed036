package local

import (
	"fmt"
	"time"

	"github.com/obol-dev/obol/config"
)

// kind.go is the seam between the registry (engine.go) and the kinds: the
// interface each kind's state implements, how a call finds the state of
// its kind, and the error of a call made to a resource of another kind.
// Each kind has its pure rules (no clock, no lock, no I/O) and one _res.go
// file of storage, locks and recording:
//
//	kind      rules                               storage, locks, recording
//	tiers     tiers.go, tierswait.go, window.go   tiers_res.go
//	gcra      gcra.go, gcraidle.go                gcra_res.go
//	copies    copies.go                           copies_res.go, book.go (sessions, holds, transfers)
//	adaptive  adaptive.go                         adaptive_res.go, share.go
//	pacer     pacer.go                            pacer_res.go

// kindRes is a resource's state under its kind, the seam between the
// registry and the kinds: tiersRes, gcraRes, copiesRes, adaptiveRes and
// pacerRes implement it, each in its kind's _res.go file. Methods are safe
// for concurrent use unless they say otherwise, and never block on
// anything but the resource's own locks (and the book's, for copies).
//
// A kind's own calls are not here: Decide calls the rate kinds' decide
// through a type switch, so that the call is static and a decision's
// domain and reply stay on its caller's stack; Refund, Reserve, Admit and
// Pace are the kinds' methods on the Engine, found through kindOf.
type kindRes interface {
	// state returns domain's state at t, without spending: the fields
	// Tracked and those of the kind (the caller fills the rest).
	state(domain string, t time.Time) KeyState
	// sweep forgets, as of t, what has fully reset (Step).
	sweep(t time.Time)
	// load returns the keys tracked, the copies held (or staged) on this
	// node and the copies peers hold.
	load() (keys, holds, peerHolds int)
	// adopt returns the state the reloaded resource runs on, given old,
	// the state the resource had, of the same kind, before the reload:
	// this one having taken old's counts, or old having taken this one's
	// limits. The caller holds the book's lock.
	adopt(old kindRes, rc *config.Resource) kindRes
	// release drops every hold of the resource (it was removed, or it
	// changed kind) and returns the copies it freed. The caller holds the
	// book's lock.
	release() int64

	// attach registers the resource with cluster c under name and config
	// rc, a the applier of its peers' records, and records from now on
	// what it commits there.
	attach(c Cluster, name string, rc *config.Resource, a Applier)
	// applyCount adds a peer's n hits (gcra: spends, refunds) of domain in
	// slot, made in the bucket [at, at+width) (Unix ms), as of now.
	applyCount(domain string, slot int, at, width, n, now int64)
	// applyEntry applies a peer's entry into tier slot (≥ 1) at at.
	applyEntry(domain string, slot int, at, now int64)
	// reset forgets domain's counts, tier entries and gcra state from
	// before at (Unix ms) at now, and records the reset for the cluster
	// when record is set; false when the cluster refuses it, and nothing
	// is forgotten (reset.go).
	reset(domain string, at, now int64, record bool) bool
	// addRemote changes the copies peers hold of domain by n.
	addRemote(domain string, n int64)
	// eachHold calls fn for every domain this node holds copies of.
	eachHold(fn func(domain string, holds int64))
}

// kindOf returns r's state as a K; ok is false when r is nil or of another
// kind.
func kindOf[K kindRes](r *resource) (k K, ok bool) {
	if r == nil {
		return k, false
	}
	k, ok = r.k.(K)
	return k, ok
}

func wrongKind(r *resource, call string) error {
	return fmt.Errorf("%w: %q is %s resource; %s is for %s", ErrWrongKind, r.name, kindArticle(r.kind), call, kindsFor(call))
}

// kindArticle returns the kind with its article, for messages ("an adaptive").
func kindArticle(k config.Kind) string {
	if k == config.KindAdaptive {
		return "an " + string(k)
	}
	return "a " + string(k)
}

// kindsFor names the kinds a call is for, for wrong_kind messages.
func kindsFor(call string) string {
	switch call {
	case "reserve":
		return "copies resources"
	case "admit":
		return "adaptive resources"
	case "pace", "observe":
		return "pacer resources"
	}
	return "tiers and gcra resources"
}
