package client

import (
	"context"
	"errors"
	"testing"

	"github.com/valyala/fasthttp"
)

// SettleLater gets a ticket with a grant; Settle charges the real cost
// once; Reset forgets the key. With the agent failing, a decision and its
// settle fail open (no ticket, nothing charged), a reset is an error.
func TestSettleAndReset(t *testing.T) {
	a := startAgent(t, nil)
	c, _ := newClient(t, Config{Socket: a.sock})
	ctx := context.Background()
	d, err := c.Request(ctx, "t/gcra", "u", Copies(15), SettleLater())
	if err != nil || d.Granted != 15 || d.Ticket == "" {
		t.Fatalf("request: %+v, %v; want 15 granted and a ticket", d, err)
	}
	st, err := c.Settle(ctx, d.Ticket, 4)
	if err != nil || st.Charged != -11 || st.Degraded {
		t.Fatalf("settle 4 of 15: %+v, %v; want charged -11", st, err)
	}
	if _, err := c.Settle(ctx, d.Ticket, 4); !errors.Is(err, ErrAlreadySettled) {
		t.Fatalf("a second settle: %v, want ErrAlreadySettled", err)
	}
	if _, err := c.Settle(ctx, "c-none", 4); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("an unknown ticket: %v, want ErrUnknownTicket", err)
	}
	if d, _ := c.Request(ctx, "t/gcra", "u", Copies(0)); d.Ticket != "" {
		t.Fatalf("without SettleLater: ticket %q", d.Ticket)
	}
	if d, _ := c.Request(ctx, "t/one", "u"); d.Granted != 1 {
		t.Fatalf("t/one: %+v", d)
	}
	if err := c.Reset(ctx, "t/one", "u"); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Request(ctx, "t/one", "u"); d.Granted != 1 {
		t.Fatalf("t/one after the reset: %+v, want a grant", d)
	}
	if err := c.Reset(ctx, "t/nope", "u"); !errors.Is(err, ErrUnknownResource) {
		t.Fatalf("reset of an unknown resource: %v", err)
	}
	a.fail.Store(true)
	d, err = c.Request(ctx, "t/gcra", "u", Copies(2), SettleLater())
	if err != nil || !d.Degraded || d.Ticket != "" {
		t.Fatalf("degraded request: %+v, %v; want a degraded grant with no ticket", d, err)
	}
	if st, err := c.Settle(ctx, d.Ticket, 9); err != nil || st != (Settlement{}) {
		t.Fatalf("settle of no ticket: %+v, %v", st, err)
	}
	if st, err := c.Settle(ctx, "c-x", 9); err != nil || !st.Degraded {
		t.Fatalf("settle with the agent failing: %+v, %v; want degraded", st, err)
	}
	if err := c.Reset(ctx, "t/one", "u"); err == nil || errors.Is(err, ErrUnknownResource) {
		t.Fatalf("reset with the agent failing: %v, want an error", err)
	}
}

// A reply to a reset other than {"reset": true} (a proxy's 200, an agent
// of an earlier release) is an error: the reset may not have happened.
func TestResetNeedsTheAgentsReply(t *testing.T) {
	sock := startStub(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"ok":true}`)
	})
	c, _ := newClient(t, Config{Socket: sock})
	if err := c.Reset(context.Background(), "t/one", "u"); err == nil {
		t.Fatal("a reset answered {\"ok\":true} succeeded")
	}
}
