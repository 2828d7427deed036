package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestErrorCodesFromStub(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   error
	}{
		{status: 400, code: "bad_request", want: ErrBadRequest},
		{status: 400, code: "cost_over_burst", want: ErrCostOverBurst},
		{status: 404, code: "unknown_resource", want: ErrUnknownResource},
		{status: 404, code: "unknown_hold", want: ErrUnknownHold},
		{status: 404, code: "unknown_session", want: ErrUnknownSession},
		{status: 404, code: "unknown_transfer", want: ErrUnknownTransfer},
		{status: 409, code: "wrong_kind", want: ErrWrongKind},
		{status: 409, code: "over_release", want: ErrOverRelease},
		{status: 413, code: "too_large", want: ErrTooLarge},
		{status: 404, code: "not_found", want: ErrNotFound},
		{status: 418, code: "teapot", want: nil}, // a code the client does not know: an APIError all the same
	} {
		t.Run(tc.code, func(t *testing.T) {
			sock := startStub(t, func(ctx *fasthttp.RequestCtx) {
				ctx.SetStatusCode(tc.status)
				ctx.SetContentType("application/json")
				ctx.SetBodyString(`{"error":{"code":"` + tc.code + `","message":"the \"why\""}}`)
			})
			c, _ := newClient(t, Config{Socket: sock})
			_, err := c.Request(context.Background(), "r/x", "d")
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != tc.status || ae.Code != tc.code || ae.Message != `the "why"` {
				t.Fatalf("Request = %v (%#v), want an APIError %d %s", err, ae, tc.status, tc.code)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("errors.Is(%v, %v) = false", err, tc.want)
			}
			for _, other := range codeErrors {
				if other != tc.want && errors.Is(err, other) {
					t.Fatalf("%v also matches %v", err, other)
				}
			}
			if st := c.Stats(); st.Errors != 1 || st.Degraded != 0 {
				t.Errorf("Stats = %+v, want one error", st)
			}
		})
	}
	t.Run("4xx that is not the agent's format", func(t *testing.T) {
		sock := startStub(t, func(ctx *fasthttp.RequestCtx) {
			ctx.SetStatusCode(403)
			ctx.SetBodyString("forbidden by proxy")
		})
		c, _ := newClient(t, Config{Socket: sock})
		_, err := c.Request(context.Background(), "r/x", "d")
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != 403 || ae.Code != "" || ae.Message != "forbidden by proxy" {
			t.Fatalf("Request = %#v", err)
		}
		if !strings.Contains(err.Error(), "403") {
			t.Errorf("Error() = %q", err.Error())
		}
	})
}

func TestErrorsFromAgent(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name   string
		call   func() error
		want   error
		status int // 0: not an APIError (found by the client)
	}{
		{name: "unknown resource", want: ErrUnknownResource, status: 404,
			call: func() error { _, err := c.Request(ctx, "nope/x", "d"); return err }},
		{name: "request on copies", want: ErrWrongKind, status: 409,
			call: func() error { _, err := c.Request(ctx, "t/copies", "d"); return err }},
		{name: "reserve on gcra", want: ErrWrongKind, status: 409,
			call: func() error { _, err := c.Reserve(ctx, "t/gcra", "d"); return err }},
		{name: "cost over burst", want: ErrCostOverBurst, status: 400,
			call: func() error { _, err := c.Request(ctx, "t/gcra", "d", Copies(21)); return err }},
		{name: "name too long", want: ErrBadRequest, status: 400,
			call: func() error { _, err := c.Request(ctx, "t/gcra", long); return err }},
		{name: "unknown transfer", want: ErrUnknownTransfer, status: 404,
			call: func() error { _, err := c.Seize(ctx, "x-nope"); return err }},
		{name: "batch of a bad item", want: ErrUnknownResource, status: 404,
			call: func() error {
				rs, err := c.Batch(ctx, []Need{{Resource: "nope/x", Domain: "d"}})
				if err != nil {
					return err
				}
				return rs[0].Err
			}},
		{name: "negative copies", want: ErrBadRequest,
			call: func() error { _, err := c.Request(ctx, "t/gcra", "d", Copies(-1)); return err }},
		{name: "min over copies", want: ErrBadRequest,
			call: func() error { _, err := c.Request(ctx, "t/gcra", "d", Copies(1), MinCopies(2)); return err }},
		{name: "empty domain", want: ErrBadRequest,
			call: func() error { _, err := c.Request(ctx, "t/gcra", ""); return err }},
		{name: "negative max wait", want: ErrBadRequest,
			call: func() error { _, err := c.Request(ctx, "t/gcra", "d", MaxWait(-1)); return err }},
		{name: "release more than held", want: ErrOverRelease,
			call: func() error {
				h, err := c.Reserve(ctx, "t/copies", "acme")
				if err != nil {
					return err
				}
				defer h.Release()
				return h.ReleaseN(ctx, 2)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var ae *APIError
			if isAPI := errors.As(err, &ae); isAPI != (tc.status != 0) || (isAPI && ae.Status != tc.status) {
				t.Fatalf("err = %#v; want an APIError of status %d: %v", err, tc.status, tc.status != 0)
			}
			if ae != nil && ae.Message == "" {
				t.Errorf("APIError without a message: %#v", ae)
			}
		})
	}
}
