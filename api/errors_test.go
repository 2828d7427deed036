package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/local"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{err: local.ErrBadRequest, status: 400, code: "bad_request"},
		{err: local.ErrCostOverBurst, status: 400, code: "cost_over_burst"},
		{err: local.ErrUnknownResource, status: 404, code: "unknown_resource"},
		{err: local.ErrUnknownHold, status: 404, code: "unknown_hold"},
		{err: local.ErrUnknownSession, status: 404, code: "unknown_session"},
		{err: local.ErrUnknownTransfer, status: 404, code: "unknown_transfer"},
		{err: local.ErrWrongKind, status: 409, code: "wrong_kind"},
		{err: local.ErrOverRelease, status: 409, code: "over_release"},
	}
	for _, tc := range cases {
		err := fmt.Errorf("%w: the value %q", tc.err, "v")
		status, code, msg, ok := classify(err)
		if !ok || status != tc.status || code != tc.code || strings.HasPrefix(msg, "local:") || !strings.Contains(msg, `"v"`) {
			t.Errorf("classify(%v) = %d %s %q %v, want %d %s", err, status, code, msg, ok, tc.status, tc.code)
		}
	}
	if status, code, _, ok := classify(errors.New("boom")); ok || status != 500 || code != "internal" {
		t.Errorf("classify(boom) = %d %s %v, want 500 internal, not ok", status, code, ok)
	}
}

// TestInternalErrorsAndPanics checks that a bug is answered 500 internal with
// a request id that is logged, and that the server keeps serving.
func TestInternalErrorsAndPanics(t *testing.T) {
	h := newHarness(t)
	h.srv.router = newRouter(append(routes[:len(routes):len(routes)],
		route{"GET", "/v1/test-panic", func(*Server, *fasthttp.RequestCtx, params) { panic("kaboom") }},
		route{"GET", "/v1/test-error", func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.fail(ctx, errors.New("disk on fire")) }},
	))
	for _, tc := range []struct{ path, logged string }{
		{"/v1/test-panic", "kaboom"},
		{"/v1/test-error", "disk on fire"},
	} {
		r := h.do("GET", tc.path, "")
		code, msg := errorReply(t, r.body)
		if r.status != 500 || code != "internal" {
			t.Fatalf("%s: %d %s", tc.path, r.status, r.body)
		}
		_, id, ok := strings.Cut(msg, "request id ")
		if !ok || id == "" {
			t.Fatalf("%s: message %q has no request id", tc.path, msg)
		}
		logs := h.logs.String()
		if !strings.Contains(logs, `"request_id":"`+id+`"`) || !strings.Contains(logs, tc.logged) {
			t.Errorf("%s: request id %s or %q not logged: %s", tc.path, id, tc.logged, logs)
		}
		if strings.Contains(msg, tc.logged) {
			t.Errorf("%s: the reply leaks the internal error: %q", tc.path, msg)
		}
		if r := h.do("GET", "/healthz", ""); r.status != 200 {
			t.Fatalf("after %s: /healthz %d", tc.path, r.status)
		}
	}
}

func TestErrorReplyIsValidJSONWhateverTheMessage(t *testing.T) {
	h := newHarness(t)
	// A key with quotes, a control character and invalid UTF-8 is echoed.
	r := h.post("/v1/request", "{\"a\\\"\\u0001b\xff\":1}")
	code, msg := errorReply(t, r.body)
	if r.status != 400 || code != "bad_request" || !strings.Contains(msg, "a\"\x01b\ufffd") {
		t.Errorf("%d %s %q", r.status, code, msg)
	}
}
