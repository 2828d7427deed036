package adaptive

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Outcome is how an admitted call ended, as its caller reports it.
type Outcome uint8

const (
	// Success: the call finished in time.
	Success Outcome = iota + 1
	// Backoff: the caller gave up (it timed out), or the work was done too
	// late to be of use.
	Backoff
)

// String returns "success" or "backoff", the API's spelling.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Backoff:
		return "backoff"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Ticket identifies a call a Tracker admitted. Tickets are never reused by
// a tracker; the zero Ticket is never issued.
type Ticket uint64

// ErrUnknownTicket is returned by Complete for a ticket that was never
// issued, was completed already, or expired (it was outstanding for the
// timeout and counted as a backoff).
var ErrUnknownTicket = errors.New("adaptive: unknown ticket")

// Tracker is the adaptive window for calls that run elsewhere: a caller
// asks Admit before it starts the work and reports the outcome with
// Complete when it is done; a ticket outstanding for Timeout (admitted at a,
// at or after a + Timeout) counts as a backoff, so that callers that never
// report cannot hold the window. Every method takes the instant it acts at
// and reads no clock. Make one with NewTracker; the zero value is not
// usable. Safe for concurrent use.
type Tracker struct {
	mu    sync.Mutex
	win   *Window
	next  Ticket
	open  map[Ticket]Call
	order []pending // admission order, for the sweep; completed ones are skipped
	head  int       // order[:head] is consumed
	// expired counts the tickets swept since the tracker was made.
	expired uint64
}

type pending struct {
	t  Ticket
	at time.Time
}

// NewTracker returns a tracker of cfg, or cfg's problems (ErrConfig).
func NewTracker(cfg Config) (*Tracker, error) {
	w, err := NewWindow(cfg)
	if err != nil {
		return nil, err
	}
	return &Tracker{win: w, open: make(map[Ticket]Call)}, nil
}

// Admit sweeps expired tickets as of now, then admits a call when its
// position (outstanding + 1) is within the window. It returns the ticket,
// the position and the window; ok is false, and the ticket 0, when the
// call is rejected (pos is then the position it asked for).
func (t *Tracker) Admit(now time.Time) (tk Ticket, pos, window int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	c, ok := t.win.Admit(now)
	if !ok {
		return 0, t.win.Outstanding() + 1, t.win.Size(), false
	}
	t.next++
	t.open[t.next] = c
	t.order = append(t.order, pending{t.next, now})
	return t.next, c.Pos, t.win.Size(), true
}

// Complete reports how the call of tk ended, at now, and returns the
// window after it. An unknown, completed or expired ticket is
// ErrUnknownTicket, and changes nothing.
func (t *Tracker) Complete(tk Ticket, o Outcome, now time.Time) (window int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	c, ok := t.open[tk]
	if !ok {
		return t.win.Size(), fmt.Errorf("%w: %d was never issued, was completed already, or expired", ErrUnknownTicket, tk)
	}
	delete(t.open, tk)
	t.compact()
	switch o {
	case Success:
		t.win.Success(c, now)
	case Backoff:
		t.win.Backoff(c, now)
	default:
		t.win.Release(c)
	}
	return t.win.Size(), nil
}

// Sweep counts every ticket outstanding for Timeout or longer at now as a
// backoff at its position, and returns how many there were.
func (t *Tracker) Sweep(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sweep(now)
}

func (t *Tracker) sweep(now time.Time) int {
	n := 0
	timeout := t.win.cfg.Timeout
	for t.head < len(t.order) {
		p := t.order[t.head]
		c, ok := t.open[p.t]
		if ok && now.Sub(p.at) < timeout {
			break
		}
		t.order[t.head] = pending{}
		t.head++
		if ok {
			delete(t.open, p.t)
			t.win.Backoff(c, now)
			n++
		}
	}
	if t.head == len(t.order) {
		t.order, t.head = t.order[:0], 0
	}
	t.expired += uint64(n)
	return n
}

// compact drops the completed tickets from order once they are most of it,
// so that order stays within a few times the open tickets (which the window
// bounds) however long one ticket stays open.
func (t *Tracker) compact() {
	if len(t.order)-t.head <= 4*len(t.open)+64 {
		return
	}
	kept := t.order[:0]
	for _, p := range t.order[t.head:] {
		if _, ok := t.open[p.t]; ok {
			kept = append(kept, p)
		}
	}
	clear(t.order[len(kept):])
	t.order, t.head = kept, 0
}

// Reconfigure puts cfg in force, keeping the outstanding tickets and what
// the window learned; the window is clamped into cfg's bounds
// (Window.Reconfigure says what a change of Rules forgets).
func (t *Tracker) Reconfigure(cfg Config) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.win.Reconfigure(cfg)
}

// Window returns the window now.
func (t *Tracker) Window() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.win.Size()
}

// Expired returns how many tickets have expired (been outstanding for the
// timeout and counted as backoffs) since the tracker was made, by any
// sweep: Sweep's and those of Admit and Complete.
func (t *Tracker) Expired() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.expired
}

// Outstanding returns how many tickets are open (expired ones not yet
// swept included).
func (t *Tracker) Outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}
