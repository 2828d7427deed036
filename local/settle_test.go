package local

import (
	"errors"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

func settleEngine(t *testing.T) *Engine {
	t.Helper()
	return New(normal(&config.Config{
		Namespaces: map[string]*config.Namespace{"open": {AllowUnconfigured: true}},
		Resources: map[string]*config.Resource{
			"g": {Kind: config.KindGCRA, Burst: 10, Count: 1, Period: time.Hour},
			"t": {Kind: config.KindTiers, Tiers: tiers(tier(10, s, s, 0, false)), HardLimit: config.Limit(100)},
			"c": {Kind: config.KindCopies, DomainLimit: config.Limit(3)},
		},
	}))
}

func decideSettle(t *testing.T, e *Engine, ms int, res string, copies int) (Decision, string) {
	t.Helper()
	var d Decision
	tk, err := e.DecideSettle(&d, at(ms), res, "u", copies, copies)
	if err != nil {
		t.Fatal(err)
	}
	return d, tk
}

func settle(t *testing.T, e *Engine, ms int, tk string, copies int) Settlement {
	t.Helper()
	st, err := e.Settle(at(ms), tk, copies)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A gcra grant settled for less gives the difference back, for more spends
// it past the burst; a ticket settles once.
func TestSettleGCRA(t *testing.T) {
	e := settleEngine(t)
	d, tk := decideSettle(t, e, 0, "g", 5)
	if d.Granted != 5 || tk == "" {
		t.Fatalf("granted %d with ticket %q, want 5 and a ticket", d.Granted, tk)
	}
	if st := settle(t, e, 1, tk, 2); st.Charged != -3 || st.Remaining != 8 {
		t.Fatalf("settled 2 of 5: %+v, want charged -3, remaining 8", st)
	}
	if _, err := e.Settle(at(2), tk, 2); !errors.Is(err, ErrAlreadySettled) {
		t.Fatalf("settled twice: %v, want ErrAlreadySettled", err)
	}
	_, tk2 := decideSettle(t, e, 3, "g", 5)
	if st := settle(t, e, 4, tk2, 20); st.Charged != 15 || st.Remaining != 0 {
		t.Fatalf("settled 20 of 5: %+v, want charged 15, remaining 0", st)
	}
	// 2 + 20 tokens spent of a burst of 10 refilled one an hour: the next
	// token is 13 hours away.
	if d, _ := decideSettle(t, e, 5, "g", 1); d.Granted != 0 || d.RetryAfter < 12*time.Hour {
		t.Fatalf("after the overcharge: %+v, want a rejection with a wait of about 13 h", d)
	}
	if _, err := e.Settle(at(6), "c-nope", 1); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("unknown ticket: %v, want ErrUnknownTicket", err)
	}
}

// A tiers grant settled for less takes the grant's own hits back; for more
// it adds hits past the limit, which later requests wait out.
func TestSettleTiers(t *testing.T) {
	e := settleEngine(t)
	_, tk := decideSettle(t, e, 0, "t", 8)
	if st := settle(t, e, 10, tk, 3); st.Charged != -5 || st.Remaining != 7 {
		t.Fatalf("settled 3 of 8: %+v, want charged -5, remaining 7", st)
	}
	_, tk2 := decideSettle(t, e, 20, "t", 4)
	if st := settle(t, e, 30, tk2, 20); st.Charged != 16 || st.Remaining != 0 {
		t.Fatalf("settled 20 of 4: %+v, want charged 16, remaining 0", st)
	}
	if d, _ := decideSettle(t, e, 500, "t", 1); d.Granted != 0 || d.DomainHitsLastSecond != 23 {
		t.Fatalf("after the overcharge: %+v, want a rejection with 23 hits in the last second", d)
	}
	if d, _ := decideSettle(t, e, 1031, "t", 1); d.Granted != 1 {
		t.Fatalf("a second after: %+v, want a grant (the hits left the window)", d)
	}
}

// An expired ticket is unknown and keeps its estimate; a full store
// refuses the request before deciding; a lenient grant gets a ticket that
// settles to nothing; a rejection gets none; a copies resource is the
// wrong kind.
func TestSettleEdges(t *testing.T) {
	e := settleEngine(t)
	_, tk := decideSettle(t, e, 0, "g", 4)
	ttl := int(TicketTTL / time.Millisecond)
	if _, err := e.Settle(at(ttl+1), tk, 0); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("an expired ticket: %v, want ErrUnknownTicket", err)
	}
	if d, _ := decideSettle(t, e, ttl+2, "g", 7); d.Granted != 0 || d.Remaining != 6 {
		t.Fatalf("the expired ticket kept its estimate of 4: %+v, want 6 remaining", d)
	}
	e.book.tickets.max = e.Tickets()
	var d Decision
	if _, err := e.DecideSettle(&d, at(ttl+3), "g", "v", 1, 1); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a full ticket store: %v, want ErrTooMany", err)
	}
	e.book.tickets.max = 100
	d, tk = decideSettle(t, e, ttl+4, "open/x", 3)
	if !d.Lenient || tk == "" {
		t.Fatalf("a lenient grant: %+v, ticket %q", d, tk)
	}
	if st := settle(t, e, ttl+5, tk, 9); st.Charged != 0 || st.Remaining != MaxCopies {
		t.Fatalf("a lenient settle: %+v", st)
	}
	if d, tk := decideSettle(t, e, ttl+6, "g", 10); d.Granted != 0 || tk != "" {
		t.Fatalf("a rejection: %+v, ticket %q, want no ticket", d, tk)
	}
	if _, err := e.DecideSettle(&d, at(ttl+7), "c", "u", 1, 1); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("copies: %v, want ErrWrongKind", err)
	}
}

// Settled tickets leave the store at once: a steady stream of settled
// requests never fills it, and the last maxSettled settled are still told
// apart from unknown ones.
func TestSettledTicketsLeave(t *testing.T) {
	e := settleEngine(t)
	e.book.tickets.max = 10
	var first string
	for i := range 1000 {
		d, tk := decideSettle(t, e, i, "t", 1)
		if d.Granted != 1 && tk == "" {
			continue
		}
		if first == "" {
			first = tk
		}
		settle(t, e, i, tk, 1)
	}
	if n := e.Tickets(); n != 0 {
		t.Fatalf("%d tickets held after every one was settled, want 0", n)
	}
	if _, err := e.Settle(at(1000), first, 1); !errors.Is(err, ErrAlreadySettled) {
		t.Fatalf("the first ticket settled again: %v, want ErrAlreadySettled", err)
	}
	if n := len(e.book.tickets.order) - e.book.tickets.head; n > 1024 {
		t.Fatalf("the queue holds %d settled ids", n)
	}
}
