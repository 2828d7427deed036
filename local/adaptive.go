package local

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
)

// adaptive.go is the kind adaptive's own rules, pure: the window config a
// resource's config makes for package adaptive (which holds the window's
// rules: OpenZiti's, or the Predictive ones), and the tickets the engine
// hands out, their text and its parsing. adaptive_res.go keeps the window
// of each resource and answers Admit and Complete.

// ErrUnknownTicket is the error of Complete for a ticket that was never
// issued, was completed already, or expired (it was outstanding for the
// resource's timeout and counted as a backoff).
var ErrUnknownTicket = errors.New("local: unknown ticket")

// shareOf returns rc's client share (config.Resource.ClientShareOr).
func shareOf(rc *config.Resource) float64 { return rc.ClientShareOr() }

// adaptiveConfig returns the window config of rc, validated and normalized:
// config's translation (config.Resource.AdaptiveConfig), as it is. Package
// config owns the parameters' defaults and bounds; nothing is clamped or
// defaulted here.
func adaptiveConfig(rc *config.Resource) adaptive.Config { return rc.AdaptiveConfig() }

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

// parseTracked parses the part of a tracked ticket after its resource and
// '#' ("EPOCH.SEQ.MAC"): the epoch and sequence, the text the MAC signs
// (the ticket up to the last '.') and the MAC. ok is false when the
// ticket is not of that form.
func parseTracked(ticket, rest string) (epoch uint32, seq adaptive.Ticket, signed, mac string, ok bool) {
	signed, mac, okMAC := cutLast(ticket, '.')
	ep, sq, okSeq := strings.Cut(rest, ".")
	sq, _, _ = strings.Cut(sq, ".")
	e, err1 := strconv.ParseUint(ep, 36, 32)
	n, err2 := strconv.ParseUint(sq, 36, 64)
	if !okSeq || !okMAC || err1 != nil || err2 != nil {
		return 0, 0, "", "", false
	}
	return uint32(e), adaptive.Ticket(n), signed, mac, true
}

// cutLast slices s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
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
