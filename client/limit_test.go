package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A limit set by the request travels with Request, Batch items, Refund and
// Reset: each definition of a name counts apart, a bad limit is
// ErrBadLimit, and Check and Reserve, which cannot take one, refuse it.
func TestLimitSetByTheRequest(t *testing.T) {
	a := startAgent(t, nil)
	c, _ := newClient(t, Config{Socket: a.sock})
	ctx := context.Background()
	two := GCRALimit(2, 2, time.Second)
	for i, want := range []int{2, 0} {
		d, err := c.Request(ctx, "rq/llm", "u", Copies(2), WithLimit(two))
		if err != nil || d.Granted != want {
			t.Fatalf("request %d: %+v, %v; want %d granted", i, d, err, want)
		}
	}
	if d, err := c.Request(ctx, "rq/llm", "u", WithLimit(TiersLimit("3,1,1,0"))); err != nil || d.Granted != 1 || d.Reply.Tier != 1 {
		t.Fatalf("another limit of the name: %+v, %v; want 1 granted in tier 1 (counted apart)", d, err)
	}
	if n, err := c.Refund(ctx, "rq/llm", "u", 1, WithLimit(two)); err != nil || n != 1 {
		t.Fatalf("refund: %d, %v; want 1 remaining", n, err)
	}
	if err := c.Reset(ctx, "rq/llm", "u", WithLimit(two)); err != nil {
		t.Fatal(err)
	}
	res, err := c.Batch(ctx, []Need{{Resource: "rq/llm", Domain: "u", Copies: 2, Limit: two}, {Resource: "rq/llm", Domain: "u", Limit: TiersLimit("5,1")}})
	if err != nil || res[0].Err != nil || res[0].Decision.Granted != 2 || !errors.Is(res[1].Err, ErrBadLimit) {
		t.Fatalf("batch: %+v, %+v; want 2 granted after the reset, then ErrBadLimit", res[0], res[1])
	}
	var ae *APIError
	if _, err := c.Request(ctx, "open/x", "u", WithLimit(two)); !errors.Is(err, ErrBadLimit) || !errors.As(err, &ae) || !strings.Contains(ae.Message, "request_limits") {
		t.Fatalf("a namespace without request_limits: %v, want ErrBadLimit naming request_limits", err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"burst 0", func() error {
			_, err := c.Request(ctx, "rq/x", "u", WithLimit(GCRALimit(0, 1, time.Second)))
			return err
		}()},
		{"period 0", func() error { _, err := c.Request(ctx, "rq/x", "u", WithLimit(GCRALimit(1, 1, 0))); return err }()},
		{"check", func() error { _, err := c.Check(ctx, "rq/x", "u", WithLimit(two)); return err }()},
		{"reserve", func() error { _, err := c.Reserve(ctx, "rq/x", "u", WithLimit(two)); return err }()},
		{"refund with copies", func() error { _, err := c.Refund(ctx, "rq/x", "u", 1, Copies(2)); return err }()},
	} {
		if !errors.Is(tc.err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest before any call", tc.name, tc.err)
		}
	}
	if got := string(appendRequest(nil, "r/x", "d", 1, 1, GCRALimit(5, 10, 90*time.Second))); got != `{"resource":"r/x","domain":"d","copies":1,"min_copies":1,"limit":{"kind":"gcra","burst":5,"count":10,"period":"1m30s"}}` {
		t.Errorf("wire form %s", got)
	}
}
