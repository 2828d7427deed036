package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestMulti(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()

	t.Run("granted", func(t *testing.T) {
		res, err := c.Multi(ctx, MultiRequest{
			Reserve: []Need{{Resource: "t/copies", Domain: "acme", Copies: 2}, {Resource: "t/two", Domain: "m1"}},
			Request: &Need{Resource: "t/gcra", Domain: "m1", Copies: 3},
		})
		if err != nil || !res.Granted || len(res.Holds) != 2 || res.Holds[0].Granted != 2 || res.Holds[1].Granted != 1 ||
			res.Decision.Granted != 3 || res.RejectedBy != "" {
			t.Fatalf("Multi = %+v, %v", res, err)
		}
		if got := a.holds(); got[1] != 2 {
			t.Fatalf("agent holds = %v", got)
		}
		if err := res.Release(); err != nil {
			t.Fatal(err)
		}
		if got := a.holds(); got[1] != 0 {
			t.Fatalf("agent holds after Release = %v", got)
		}
	})

	t.Run("a reservation rejected: the earlier ones are released", func(t *testing.T) {
		full, _ := c.Reserve(ctx, "t/two", "m2", Copies(2))
		defer full.Release()
		res, err := c.Multi(ctx, MultiRequest{
			Reserve: []Need{{Resource: "t/copies", Domain: "acme"}, {Resource: "t/two", Domain: "m2"}},
			Request: &Need{Resource: "t/gcra", Domain: "m2"},
		})
		if err != nil || res.Granted || res.RejectedBy != "t/two" || len(res.Holds) != 0 {
			t.Fatalf("Multi = %+v, %v", res, err)
		}
		if got := a.holds(); got[1] != 1 { // only full's
			t.Fatalf("agent holds = %v, want the t/copies hold released", got)
		}
		if n := a.count("/v1/request"); n != 1 { // from "granted" only: the rate part was not asked
			t.Fatalf("rate requests = %d, want 1", n)
		}
	})

	t.Run("the rate request rejected: every hold is released", func(t *testing.T) {
		c.Request(ctx, "t/one", "m3")
		res, err := c.Multi(ctx, MultiRequest{
			Reserve: []Need{{Resource: "t/copies", Domain: "acme"}, {Resource: "t/two", Domain: "m3", Copies: 2}},
			Request: &Need{Resource: "t/one", Domain: "m3"},
		})
		if err != nil || res.Granted || res.RejectedBy != "t/one" || res.Decision.RetryAfter != time.Second {
			t.Fatalf("Multi = %+v, %v", res, err)
		}
		if got := a.holds(); got[1] != 0 {
			t.Fatalf("agent holds = %v, want none", got)
		}
	})

	t.Run("a client error: rolled back and returned", func(t *testing.T) {
		_, err := c.Multi(ctx, MultiRequest{
			Reserve: []Need{{Resource: "t/copies", Domain: "acme"}},
			Request: &Need{Resource: "t/copies", Domain: "acme"},
		})
		if !errors.Is(err, ErrWrongKind) {
			t.Fatalf("Multi = %v, want ErrWrongKind", err)
		}
		if got := a.holds(); got[1] != 0 {
			t.Fatalf("agent holds = %v, want none", got)
		}
		if _, err := c.Multi(ctx, MultiRequest{}, Copies(2)); !errors.Is(err, ErrBadRequest) {
			t.Fatalf("Multi with Copies = %v, want ErrBadRequest", err)
		}
	})

	t.Run("MaxWait retries the whole call", func(t *testing.T) {
		c.Request(ctx, "t/one", "m4")
		done := make(chan *MultiResult, 1)
		go func() {
			res, err := c.Multi(ctx, MultiRequest{
				Reserve: []Need{{Resource: "t/two", Domain: "m4"}},
				Request: &Need{Resource: "t/one", Domain: "m4"},
			}, MaxWait(2*time.Second))
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		// The keepalive loop and the retry sleep.
		if _, ok := sleepersOrDone(t, fc, 2, done); ok {
			t.Fatal("Multi returned without waiting")
		}
		if got := a.holds(); got[1] != 0 {
			t.Fatalf("agent holds while waiting = %v, want none", got)
		}
		fc.Advance(time.Second) // the rate part's retry_after
		res := <-done
		if !res.Granted || res.Retries != 1 || len(res.Holds) != 1 {
			t.Fatalf("Multi = %+v", res)
		}
		res.Release()
	})
}
