package client

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBatch(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	rs, err := c.Batch(ctx, []Need{
		{Resource: "t/one", Domain: "b"},
		{Resource: "t/one", Domain: "b"},
		{Resource: "nope/x", Domain: "b"},
		{Resource: "t/gcra", Domain: "b", Copies: -1},
		{Resource: "t/gcra", Domain: "b", Copies: 30, MinCopies: 5},
		{Resource: "t/copies", Domain: "b"},
	})
	if err != nil || len(rs) != 6 {
		t.Fatalf("Batch = %v, %v", rs, err)
	}
	if rs[0].Err != nil || rs[0].Granted != 1 {
		t.Errorf("item 0 = %+v, want granted", rs[0])
	}
	if rs[1].Err != nil || rs[1].Granted != 0 || rs[1].RetryAfter != time.Second {
		t.Errorf("item 1 = %+v, want rejected for 1s", rs[1])
	}
	var ae *APIError
	if !errors.Is(rs[2].Err, ErrUnknownResource) || !errors.As(rs[2].Err, &ae) || ae.Status != 404 {
		t.Errorf("item 2 = %+v, want unknown_resource", rs[2])
	}
	if !errors.Is(rs[3].Err, ErrBadRequest) || errors.As(rs[3].Err, &ae) {
		t.Errorf("item 3 = %+v, want a local ErrBadRequest", rs[3])
	}
	if !errors.Is(rs[4].Err, ErrCostOverBurst) {
		t.Errorf("item 4 = %+v, want cost_over_burst", rs[4])
	}
	if !errors.Is(rs[5].Err, ErrWrongKind) {
		t.Errorf("item 5 = %+v, want wrong_kind", rs[5])
	}
	if n := a.count("/v1/batch"); n != 1 {
		t.Errorf("batch calls = %d, want 1", n)
	}
}

func TestBatchSplits(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	for _, tc := range []struct {
		name   string
		n      int
		domain string
		calls  int
	}{
		{name: "by count", n: 2500, domain: "d", calls: 3},
		// ~270 bytes an item: about 240 fit in 64 KiB.
		{name: "by size", n: 1000, domain: strings.Repeat("x", 200), calls: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needs := make([]Need, tc.n)
			for i := range needs {
				needs[i] = Need{Resource: "open/batch", Domain: tc.domain + strconv.Itoa(i)}
			}
			before := a.count("/v1/batch")
			rs, err := c.Batch(context.Background(), needs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rs {
				if r.Err != nil || r.Granted != 1 {
					t.Fatalf("item %d = %+v", i, r)
				}
			}
			if got := a.count("/v1/batch") - before; got != tc.calls {
				t.Errorf("batch calls = %d, want %d", got, tc.calls)
			}
		})
	}
}

func TestBatchKillSwitch(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc, KillSwitch: true})
	rs, err := c.Batch(context.Background(), []Need{{Resource: "t/one", Domain: "k"}, {Resource: "t/one", Domain: "k", Copies: 1}})
	if err != nil || rs[0].Killed || !rs[1].Killed || rs[1].Granted != 1 {
		t.Fatalf("Batch = %+v, %v", rs, err)
	}
}
