package local

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
)

// adaptive_res.go is an adaptive resource's state and calls: its window
// (package adaptive's tracker), the epoch and key its tickets carry, and
// what one client may hold of it (share.go); Admit and Complete.

// adaptiveRes is the state of a resource of kind adaptive: the tracker of
// package adaptive (OpenZiti's rules, the contract, or the Predictive ones,
// as the resource's rules say) and the epoch its tickets carry, so that a
// ticket of another tracker (an earlier process, or the resource before it
// changed kind) is unknown rather than taken for one of this tracker's. A
// resource whose namespace ignores its config has no tracker (tr nil): it
// admits everything, leniently.
type adaptiveRes struct {
	tr    *adaptive.Tracker
	epoch uint32
	key   *ticketKey   // signs the tickets (ids.go)
	share *clientShare // what one client may hold (share.go)
	cfg   adaptive.Config
	perAgent
}

var _ kindRes = (*adaptiveRes)(nil)

// adaptiveFromConfig returns the state of an adaptive resource, without a
// tracker when its namespace ignores its config.
func adaptiveFromConfig(rc *config.Resource, ignore bool) *adaptiveRes {
	if ignore {
		return &adaptiveRes{}
	}
	cfg := adaptiveConfig(rc)
	tr, err := adaptive.NewTracker(cfg)
	if err != nil {
		panic(fmt.Sprintf("local: adaptive config %+v: %v", rc, err)) // config's validation refuses what adaptive would
	}
	return &adaptiveRes{tr: tr, epoch: rand.Uint32(), key: newTicketKey(), share: newClientShare(shareOf(rc), cfg.Timeout), cfg: cfg}
}

// lenient reports whether the resource admits everything (its namespace
// ignores its config).
func (a *adaptiveRes) lenient() bool { return a.tr == nil }

// adaptiveOf returns the window of resource; ok is false for a resource
// that is not adaptive or has no window.
func (e *Engine) adaptiveOf(resource string) (a *adaptiveRes, ok bool) {
	a, ok = kindOf[*adaptiveRes](e.res[resource])
	return a, ok && !a.lenient()
}

// Admit asks, at t, whether one more call of the adaptive resource may go
// ahead (the kind adaptive). A rejection is an Admission with
// Admitted false and a nil error. Errors: ErrUnknownResource, ErrWrongKind
// (the resource is not adaptive).
func (e *Engine) Admit(t time.Time, resource string) (Admission, error) {
	return e.AdmitAs(t, resource, "")
}

// AdmitAs is Admit on behalf of client, whose outstanding tickets are held
// to the resource's client_share of the window: past it the call is
// rejected (Admitted false, ClientShare true) as when the window is full.
// client "" is not bounded.
func (e *Engine) AdmitAs(t time.Time, resource, client string) (Admission, error) {
	r, ok := e.res[resource]
	if !ok {
		if err := e.unconfigured(resource); err != nil {
			return Admission{}, err
		}
		return Admission{Admitted: true, Lenient: true, resource: resource}, nil
	}
	ar, ok := kindOf[*adaptiveRes](r)
	if !ok {
		return Admission{}, wrongKind(r, "admit")
	}
	if ar.lenient() {
		return Admission{Admitted: true, Lenient: true, resource: r.name}, nil
	}
	sh := ar.share
	if !sh.room(client, ar.tr.Window(), t.UnixNano()) {
		a := Admission{Window: ar.tr.Window(), ClientShare: true, resource: r.name}
		if r.shadow {
			a.Admitted, a.Shadow = true, true
		}
		return a, nil
	}
	tk, pos, win, ok := ar.tr.Admit(t)
	if ok {
		sh.took(client, tk, t.UnixNano())
	}
	a := Admission{Admitted: ok, Position: pos, Window: win, resource: r.name, epoch: ar.epoch, ticket: tk, key: ar.key}
	if !ok && r.shadow {
		a.Admitted, a.Shadow = true, true
	}
	return a, nil
}

// Complete reports, at t, how the call of ticket ended, and returns the
// window after it. A ticket that was never issued, was completed already or
// expired is ErrUnknownTicket; completing a shadow or lenient ticket
// changes nothing. Backoff is the outcome of a caller that gave up (timed
// out); Success of one that finished in time.
func (e *Engine) Complete(t time.Time, ticket string, outcome adaptive.Outcome) (window int, err error) {
	unknown := func(why string) (int, error) {
		return 0, fmt.Errorf("%w: %q %s", ErrUnknownTicket, ticket, why)
	}
	if outcome != adaptive.Success && outcome != adaptive.Backoff {
		return 0, fmt.Errorf("%w: outcome: must be success or backoff, got %v", ErrBadRequest, outcome)
	}
	i := strings.LastIndexByte(ticket, '#')
	if i < 0 {
		return unknown("is not a ticket (expected one returned by admit)")
	}
	name, rest := ticket[:i], ticket[i+1:]
	if rest == "l" {
		return 0, nil // lenient: nothing was tracked
	}
	ar, ok := kindOf[*adaptiveRes](e.res[name])
	if !ok {
		return unknown("names no adaptive resource")
	}
	if ar.lenient() { // the namespace ignores its config now
		return unknown("was issued by a window that is no longer in force")
	}
	if rest == "s" {
		return ar.tr.Window(), nil // shadow: the window never counted it
	}
	epoch, seq, signed, mac, ok := parseTracked(ticket, rest)
	if !ok {
		return unknown("is not a ticket (expected one returned by admit)")
	}
	if epoch != ar.epoch {
		return unknown("was issued by another window (before a restart or a change of kind)")
	}
	if !ar.key.verify([]byte(signed), mac) {
		return unknown("was not issued by this window (its signature does not match)")
	}
	w, err := ar.tr.Complete(seq, outcome, t)
	ar.share.done(seq)
	if err != nil {
		return w, fmt.Errorf("%w: %q was never issued, was completed already, or expired (outstanding for the resource's timeout, it counted as a backoff)", ErrUnknownTicket, ticket)
	}
	return w, nil
}

// AdaptiveWindow returns an adaptive resource's window and outstanding
// calls now (as of its last decision or sweep); ok is false for a resource
// that is not adaptive or not tracked.
func (e *Engine) AdaptiveWindow(resource string) (window, outstanding int, ok bool) {
	a, ok := e.adaptiveOf(resource)
	if !ok {
		return 0, 0, false
	}
	return a.tr.Window(), a.tr.Outstanding(), true
}

// AdaptiveState returns the state of an adaptive resource, as of its last
// decision or sweep; ok is false for a resource that is not adaptive or
// has no window (its namespace ignores its config). Safe for concurrent
// use.
func (e *Engine) AdaptiveState(resource string) (st AdaptiveState, ok bool) {
	a, ok := e.adaptiveOf(resource)
	if !ok {
		return AdaptiveState{}, false
	}
	return a.stateNow(), true
}

// stateNow returns the window's state as of its last decision or sweep.
func (a *adaptiveRes) stateNow() AdaptiveState {
	return AdaptiveState{Window: a.tr.Window(), Outstanding: a.tr.Outstanding(), Expired: a.tr.Expired(),
		MinWindow: a.cfg.MinWindow, MaxWindow: a.cfg.MaxWindow, Timeout: a.cfg.Timeout}
}

// state reports the window, swept as of t; the domain plays no part.
func (a *adaptiveRes) state(_ string, t time.Time) (ks KeyState) {
	a.sweep(t)
	if !a.lenient() {
		st := a.stateNow()
		ks.Adaptive, ks.Tracked = &st, true
	}
	return ks
}

// sweep counts the tickets outstanding for the resource's timeout as
// backoffs, as of t.
func (a *adaptiveRes) sweep(t time.Time) {
	if !a.lenient() {
		a.tr.Sweep(t)
		a.share.sweep(t.UnixNano())
	}
}

func (a *adaptiveRes) load() (keys, holds, peerHolds int) { return 0, 0, 0 }

// adopt runs the reloaded resource on old's tracker: the window, what it
// learned and the open tickets carry over; the new limits apply at once
// (the window is clamped into them). A change of rules keeps the window
// and the tickets too, but what the Predictive rules had learned is
// forgotten (adaptive.Window.Reconfigure).
func (a *adaptiveRes) adopt(old kindRes, rc *config.Resource) kindRes {
	o := old.(*adaptiveRes)
	if a.lenient() || o.lenient() {
		return a
	}
	if err := o.tr.Reconfigure(a.cfg); err != nil {
		return a // cannot happen (config's validation refuses what adaptive would): keep the fresh tracker
	}
	o.share.configure(shareOf(rc), a.cfg.Timeout)
	return &adaptiveRes{tr: o.tr, epoch: o.epoch, key: o.key, share: o.share, cfg: a.cfg}
}

// perAgent is the cluster side of the kinds that are per agent (adaptive,
// pacer): nothing of theirs is shipped or applied, and they hold no
// copies.
type perAgent struct{}

func (perAgent) release() int64                                     { return 0 }
func (perAgent) attach(Cluster, string, *config.Resource, Applier)  {}
func (perAgent) applyCount(string, int, int64, int64, int64, int64) {}
func (perAgent) applyEntry(string, int, int64, int64)               {}
func (perAgent) addRemote(string, int64)                            {}
func (perAgent) eachHold(func(string, int64))                       {}
