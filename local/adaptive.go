package local

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
)

// ErrUnknownTicket is the error of Complete for a ticket that was never
// issued, was completed already, or expired (it was outstanding for the
// resource's timeout and counted as a backoff).
var ErrUnknownTicket = errors.New("local: unknown ticket")

// adaptiveRes is the state of a resource of kind adaptive: the tracker of
// package adaptive (OpenZiti's rules, the contract, or the Predictive ones,
// as the resource's rules say) and the epoch its
// tickets carry, so that a ticket of another tracker (an earlier process,
// or the resource before it changed kind) is unknown rather than taken
// for one of this tracker's.
type adaptiveRes struct {
	tr    *adaptive.Tracker
	epoch uint32
	key   *ticketKey   // signs the tickets (ids.go)
	share *clientShare // what one client may hold (share.go)
}

// shareOf returns rc's client share (1 when absent).
func shareOf(rc *config.Resource) float64 {
	if rc.ClientShare == nil {
		return 1
	}
	return *rc.ClientShare
}

// adaptiveConfig returns the window config of rc (validated and normalized,
// so its bounds hold; they are enforced again here all the same).
func adaptiveConfig(rc *config.Resource) adaptive.Config {
	lo := max(rc.MinWindow, 1)
	return adaptive.Config{
		MinWindow: lo,
		MaxWindow: max(rc.MaxWindow, lo),
		GrowEvery: max(rc.GrowEvery, 0),
		Margin:    max(rc.Margin, 0),
		Timeout:   max(rc.Timeout, 0),
		Rules:     adaptiveRules(rc.Rules),
	}
}

// adaptiveRules returns the rules r names: Predictive for "predictive",
// OpenZiti's otherwise ("" and "openziti"; a validated config has no
// other).
func adaptiveRules(r config.Rules) adaptive.Rules {
	if r == config.RulesPredictive {
		return adaptive.Predictive
	}
	return adaptive.OpenZiti
}

// adaptiveFromConfig returns the state of an adaptive resource, nil when its
// namespace ignores its config (it then admits everything, leniently).
func adaptiveFromConfig(rc *config.Resource, ignore bool) *adaptiveRes {
	if ignore {
		return nil
	}
	tr, err := adaptive.NewTracker(adaptiveConfig(rc))
	if err != nil {
		panic(fmt.Sprintf("local: adaptive config %+v: %v", rc, err)) // adaptiveConfig makes it valid
	}
	return &adaptiveRes{tr: tr, epoch: rand.Uint32(), key: newTicketKey(), share: newClientShare(shareOf(rc), adaptiveConfig(rc).Timeout)}
}

// adoptAdaptive makes nr (freshly built by a reload) run on old's tracker:
// the window, what it learned and the open tickets carry over; the new
// limits apply at once (the window is clamped into them). A change of rules
// keeps the window and the tickets too, but what the Predictive rules had
// learned is forgotten (adaptive.Window.Reconfigure).
func adoptAdaptive(nr, old *resource, rc *config.Resource) {
	if nr.adaptive == nil || old.adaptive == nil {
		return
	}
	if err := old.adaptive.tr.Reconfigure(adaptiveConfig(rc)); err != nil {
		return // cannot happen (adaptiveConfig makes it valid): keep the fresh tracker
	}
	old.adaptive.share.configure(shareOf(rc), adaptiveConfig(rc).Timeout)
	nr.adaptive = old.adaptive
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

// Admission is the outcome of Admit.
type Admission struct {
	// Admitted says the call may go ahead; it then holds a ticket that it
	// must complete.
	Admitted bool
	// Position is the call's position: the calls outstanding when it asked,
	// itself included; 0 for a lenient admission.
	Position int
	// Window is the window after the decision; 0 for a lenient admission.
	Window int
	// Shadow is true when the window rejected the call and shadow mode
	// admitted it anyway (its ticket completes without effect).
	Shadow bool
	// Lenient is true when the call was admitted without a window: the
	// resource is unconfigured (its namespace allows that) or its namespace
	// ignores its config.
	Lenient bool
	// ClientShare is true when the call was rejected because its client
	// holds its share of the window already (AdmitAs).
	ClientShare bool

	resource string
	epoch    uint32
	ticket   adaptive.Ticket
	key      *ticketKey
}

// Ticket returns the admission's ticket, an opaque string; "" when the call
// was not admitted. It allocates; AppendTicket does not.
func (a *Admission) Ticket() string {
	if !a.Admitted {
		return ""
	}
	return string(a.AppendTicket(nil))
}

// AppendTicket appends the admission's ticket to b (nothing when it was not
// admitted). A ticket is "RESOURCE#EPOCH.SEQ.MAC" for a tracked call (EPOCH
// and SEQ in base 36, MAC the window's signature of what precedes it, so
// that a ticket cannot be forged from another), "RESOURCE#s" for a shadow
// admission and "RESOURCE#l" for a lenient one (completing those changes
// nothing).
func (a *Admission) AppendTicket(b []byte) []byte {
	if !a.Admitted {
		return b
	}
	b = append(b, a.resource...)
	b = append(b, '#')
	switch {
	case a.Lenient:
		return append(b, 'l')
	case a.Shadow:
		return append(b, 's')
	}
	start := len(b) - len(a.resource) - 1
	b = strconv.AppendUint(b, uint64(a.epoch), 36)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(a.ticket), 36)
	msg := b[start:]
	b = append(b, '.')
	return a.key.appendMAC(b, msg)
}

// Admit asks, at t, whether one more call of the adaptive resource may go
// ahead (SEMANTICS.md, kind adaptive). A rejection is an Admission with
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
		ns := e.cfg.Namespaces[namespaceOf(resource)]
		if ns == nil || !(ns.AllowUnconfigured || ns.IgnoreConfigured) {
			return Admission{}, fmt.Errorf("%w: %q has no config and its namespace %q does not allow unconfigured resources", ErrUnknownResource, resource, namespaceOf(resource))
		}
		return Admission{Admitted: true, Lenient: true, resource: resource}, nil
	}
	if r.kind != config.KindAdaptive {
		return Admission{}, wrongKind(r, "admit")
	}
	if r.adaptive == nil { // its namespace ignores its config
		return Admission{Admitted: true, Lenient: true, resource: r.name}, nil
	}
	sh := r.adaptive.share
	if !sh.room(client, r.adaptive.tr.Window(), t.UnixNano()) {
		a := Admission{Window: r.adaptive.tr.Window(), ClientShare: true, resource: r.name}
		if r.shadow {
			a.Admitted, a.Shadow = true, true
		}
		return a, nil
	}
	tk, pos, win, ok := r.adaptive.tr.Admit(t)
	if ok {
		sh.took(client, tk, t.UnixNano())
	}
	a := Admission{Admitted: ok, Position: pos, Window: win, resource: r.name, epoch: r.adaptive.epoch, ticket: tk, key: r.adaptive.key}
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
	r, ok := e.res[name]
	if !ok || r.kind != config.KindAdaptive {
		return unknown("names no adaptive resource")
	}
	if r.adaptive == nil { // the namespace ignores its config now
		return unknown("was issued by a window that is no longer in force")
	}
	if rest == "s" {
		return r.adaptive.tr.Window(), nil // shadow: the window never counted it
	}
	signed, mac, okMAC := cutLast(ticket, '.')
	ep, seq, ok := strings.Cut(rest, ".")
	seq, _, _ = strings.Cut(seq, ".")
	epoch, err1 := strconv.ParseUint(ep, 36, 32)
	n, err2 := strconv.ParseUint(seq, 36, 64)
	if !ok || !okMAC || err1 != nil || err2 != nil {
		return unknown("is not a ticket (expected one returned by admit)")
	}
	if uint32(epoch) != r.adaptive.epoch {
		return unknown("was issued by another window (before a restart or a change of kind)")
	}
	if !r.adaptive.key.verify([]byte(signed), mac) {
		return unknown("was not issued by this window (its signature does not match)")
	}
	w, err := r.adaptive.tr.Complete(adaptive.Ticket(n), outcome, t)
	r.adaptive.share.done(adaptive.Ticket(n))
	if err != nil {
		return w, fmt.Errorf("%w: %q was never issued, was completed already, or expired (outstanding for the resource's timeout, it counted as a backoff)", ErrUnknownTicket, ticket)
	}
	return w, nil
}

// AdaptiveWindow returns an adaptive resource's window and outstanding
// calls now (as of its last decision or sweep); ok is false for a resource
// that is not adaptive or not tracked.
func (e *Engine) AdaptiveWindow(resource string) (window, outstanding int, ok bool) {
	r, found := e.res[resource]
	if !found || r.adaptive == nil {
		return 0, 0, false
	}
	return r.adaptive.tr.Window(), r.adaptive.tr.Outstanding(), true
}

// AdaptiveState is an adaptive resource's window as AdaptiveState reports
// it.
type AdaptiveState struct {
	// Window is the calls the resource admits at once now.
	Window int
	// Outstanding is the calls admitted and not yet completed or expired.
	Outstanding int
	// MinWindow and MaxWindow bound the window (the config in force).
	MinWindow, MaxWindow int
	// Timeout is how long a ticket may stay outstanding before it expires.
	Timeout time.Duration
	// Expired counts the tickets that expired (outstanding for Timeout,
	// counted as backoffs) since the window was made: a reload keeps it, a
	// change of kind starts it again from 0.
	Expired uint64
}

// AdaptiveState returns the state of an adaptive resource, as of its last
// decision or sweep; ok is false for a resource that is not adaptive or
// has no window (its namespace ignores its config). Safe for concurrent
// use.
func (e *Engine) AdaptiveState(resource string) (st AdaptiveState, ok bool) {
	r, found := e.res[resource]
	if !found || r.adaptive == nil {
		return AdaptiveState{}, false
	}
	tr := r.adaptive.tr
	st = AdaptiveState{Window: tr.Window(), Outstanding: tr.Outstanding(), Expired: tr.Expired()}
	if rc := e.cfg.Resources[resource]; rc != nil {
		c := adaptiveConfig(rc)
		st.MinWindow, st.MaxWindow, st.Timeout = c.MinWindow, c.MaxWindow, c.Timeout
		if st.Timeout == 0 {
			st.Timeout = adaptive.DefaultTimeout
		}
	}
	return st, true
}

// sweepAdaptive counts the tickets of r outstanding for its timeout as
// backoffs, as of t.
func sweepAdaptive(r *resource, t time.Time) {
	if r.adaptive != nil {
		r.adaptive.tr.Sweep(t)
		r.adaptive.share.sweep(t.UnixNano())
	}
}

// cutLast slices s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}
