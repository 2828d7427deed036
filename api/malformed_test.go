package api

import (
	"strings"
	"testing"
)

// TestMalformedRequests sends requests that must be refused and checks the
// status, the error code and that the message names what is wrong; after
// each, the server must still serve.
func TestMalformedRequests(t *testing.T) {
	h := newHarness(t)
	session := str(t, h.ok("/v1/sessions", `{}`), "session")
	hold := str(t, h.ok("/v1/reserve", `{"resource":"t/copies","domain":"d","copies":2,"session":"`+session+`"}`), "hold")
	fill := func(s string) string {
		return strings.NewReplacer("{session}", session, "{hold}", hold).Replace(s)
	}
	long := strings.Repeat("x", 300)
	huge := strings.Repeat("x", 100<<10)
	simItems := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"at_ms":0,"domain":"d"}`)
		}
		b.WriteString(`]}`)
		return b.String()
	}

	cases := []struct {
		name    string
		method  string // "" = POST
		path    string
		body    string
		headers []string
		status  int
		code    string
		names   []string // substrings the message must contain
	}{
		{name: "truncated JSON", path: "/v1/request", body: `{"resource":`, status: 400, code: "bad_request", names: []string{"resource", "invalid JSON"}},
		{name: "not an object", path: "/v1/request", body: `[1,2]`, status: 400, code: "bad_request", names: []string{"body", "object"}},
		{name: "trailing data", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d"} x`, status: 400, code: "bad_request", names: []string{"body", "after"}},
		{name: "trailing comma", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d",}`, status: 400, code: "bad_request", names: []string{"body", "field name"}},
		{name: "unknown field", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","colour":1}`, status: 400, code: "bad_request", names: []string{"colour", "unknown field"}},
		{name: "min_copies on refund", path: "/v1/refund", body: `{"resource":"t/gcra","domain":"d","min_copies":1}`, status: 400, code: "bad_request", names: []string{"min_copies", "unknown field"}},
		{name: "copies as string", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":"3"}`, status: 400, code: "bad_request", names: []string{"copies", "integer", `"3"`}},
		{name: "copies negative", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":-3}`, status: 400, code: "bad_request", names: []string{"copies: must be an integer in [0, 1000000000], got -3"}},
		{name: "copies with fraction", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":1.5}`, status: 400, code: "bad_request", names: []string{"copies", "1.5"}},
		{name: "copies 1e30", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":1e30}`, status: 400, code: "bad_request", names: []string{"copies", "1e30"}},
		{name: "copies huge exponent", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":1e999999999999}`, status: 400, code: "bad_request", names: []string{"copies"}},
		{name: "copies over 1e9", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":1000000001}`, status: 400, code: "bad_request", names: []string{"copies", "1000000001"}},
		{name: "copies bool", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":true}`, status: 400, code: "bad_request", names: []string{"copies", "true"}},
		{name: "copies null", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":null}`, status: 400, code: "bad_request", names: []string{"copies", "null"}},
		{name: "copies leading zero", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":01}`, status: 400, code: "bad_request", names: []string{"copies"}},
		{name: "min_copies over copies", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":3,"min_copies":5}`, status: 400, code: "bad_request", names: []string{"min_copies", "5", "copies 3"}},
		{name: "min_copies over default copies", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","min_copies":2}`, status: 400, code: "bad_request", names: []string{"min_copies 2", "copies 1"}},
		{name: "min_copies negative", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","min_copies":-1}`, status: 400, code: "bad_request", names: []string{"min_copies", "-1"}},
		{name: "field twice", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":1,"copies":2}`, status: 400, code: "bad_request", names: []string{"copies", "twice"}},
		{name: "empty body", path: "/v1/request", body: ``, status: 400, code: "bad_request", names: []string{"resource", "missing"}},
		{name: "missing domain", path: "/v1/request", body: `{"resource":"t/gcra"}`, status: 400, code: "bad_request", names: []string{"domain", "missing"}},
		{name: "empty resource", path: "/v1/request", body: `{"resource":"","domain":"d"}`, status: 400, code: "bad_request", names: []string{"resource", "empty"}},
		{name: "300-byte domain", path: "/v1/request", body: `{"resource":"t/gcra","domain":"` + long + `"}`, status: 400, code: "bad_request", names: []string{"domain", "256 bytes", "300 bytes"}},
		{name: "100 KB resource", path: "/v1/request", body: `{"resource":"` + huge + `","domain":"d"}`, status: 413, code: "too_large", names: []string{"body", "65536"}},
		{name: "resource as number", path: "/v1/request", body: `{"resource":12,"domain":"d"}`, status: 400, code: "bad_request", names: []string{"resource", "string", "12"}},
		{name: "invalid UTF-8 domain", path: "/v1/request", body: "{\"resource\":\"t/gcra\",\"domain\":\"a\xffb\"}", status: 400, code: "bad_request", names: []string{"domain", "UTF-8"}},
		{name: "bad escape", path: "/v1/request", body: `{"resource":"t/gcra","domain":"a\qb"}`, status: 400, code: "bad_request", names: []string{"domain", "escape"}},
		{name: "lone surrogate", path: "/v1/request", body: `{"resource":"t/gcra","domain":"\ud800"}`, status: 400, code: "bad_request", names: []string{"domain", "surrogate"}},
		{name: "raw control character", path: "/v1/request", body: "{\"resource\":\"t/gcra\",\"domain\":\"a\nb\"}", status: 400, code: "bad_request", names: []string{"domain", "control character"}},
		{name: "unknown resource", path: "/v1/request", body: `{"resource":"nope/x","domain":"d"}`, status: 404, code: "unknown_resource", names: []string{"nope/x"}},
		{name: "rate call on copies", path: "/v1/request", body: `{"resource":"t/copies","domain":"d"}`, status: 409, code: "wrong_kind", names: []string{"t/copies"}},
		{name: "refund on tiers", path: "/v1/refund", body: `{"resource":"t/tiers","domain":"d"}`, status: 409, code: "wrong_kind", names: []string{"t/tiers"}},
		{name: "reserve on gcra", path: "/v1/reserve", body: `{"resource":"t/gcra","domain":"d","session":"{session}"}`, status: 409, code: "wrong_kind", names: []string{"t/gcra"}},
		{name: "cost over burst", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d","copies":21}`, status: 400, code: "cost_over_burst", names: []string{"copies", "21"}},
		{name: "reserve without session", path: "/v1/reserve", body: `{"resource":"t/copies","domain":"d"}`, status: 400, code: "bad_request", names: []string{"session", "missing"}},
		{name: "reserve unknown session", path: "/v1/reserve", body: `{"resource":"t/copies","domain":"d","session":"nope"}`, status: 404, code: "unknown_session", names: []string{"nope"}},
		{name: "release unknown hold", path: "/v1/release", body: `{"hold":"nope","copies":1}`, status: 404, code: "unknown_hold", names: []string{"nope"}},
		{name: "release over held", path: "/v1/release", body: `{"hold":"{hold}","copies":3}`, status: 409, code: "over_release", names: []string{"3"}},
		{name: "release without hold", path: "/v1/release", body: `{"copies":1}`, status: 400, code: "bad_request", names: []string{"hold", "missing"}},
		{name: "seize unknown transfer", path: "/v1/seize", body: `{"transfer":"nope","session":"{session}"}`, status: 404, code: "unknown_transfer", names: []string{"nope"}},
		{name: "keepalive unknown session", path: "/v1/sessions/nope/keepalive", status: 404, code: "unknown_session", names: []string{"nope"}},
		{name: "keepalive with a body", path: "/v1/sessions/{session}/keepalive", body: `{"ttl_ms":5}`, status: 400, code: "bad_request", names: []string{"ttl_ms", "unknown field"}},
		{name: "end unknown session", method: "DELETE", path: "/v1/sessions/nope", status: 404, code: "unknown_session", names: []string{"nope"}},
		{name: "ttl_ms zero", path: "/v1/sessions", body: `{"ttl_ms":0}`, status: 400, code: "bad_request", names: []string{"ttl_ms", "[1, 86400000]", "got 0"}},
		{name: "ttl_ms over a day", path: "/v1/transfer", body: `{"hold":"{hold}","ttl_ms":86400001}`, status: 400, code: "bad_request", names: []string{"ttl_ms", "86400001"}},
		{name: "body over 64 KiB", path: "/v1/reserve", body: `{"resource":"t/copies","domain":"d","session":"s","pad":"` + huge + `"}`, status: 413, code: "too_large", names: []string{"body"}},
		{name: "truncated msgpack body", path: "/v1/request", body: "\x82", headers: []string{"Content-Type: application/msgpack"}, status: 400, code: "bad_request", names: []string{"body", "MessagePack", "end of body"}},
		{name: "wrong method", method: "GET", path: "/v1/request", status: 405, code: "bad_request", names: []string{"GET", "POST"}},
		{name: "wrong method on a pattern", method: "POST", path: "/v1/sessions/{session}", status: 405, code: "bad_request", names: []string{"DELETE"}},
		{name: "unknown path", method: "GET", path: "/v1/nope", status: 404, code: "not_found", names: []string{"/v1/nope"}},
		{name: "check copies not a number", method: "GET", path: "/v1/check?resource=t/gcra&domain=d&copies=abc", status: 400, code: "bad_request", names: []string{"copies", "abc"}},
		{name: "check copies negative", method: "GET", path: "/v1/check?resource=t/gcra&domain=d&copies=-1", status: 400, code: "bad_request", names: []string{"copies", "-1"}},
		{name: "check without domain", method: "GET", path: "/v1/check?resource=t/gcra", status: 400, code: "bad_request", names: []string{"domain", "Obol-Domain"}},
		{name: "check unknown parameter", method: "GET", path: "/v1/check?resource=t/gcra&domain=d&colour=red", status: 400, code: "bad_request", names: []string{"colour"}},
		{name: "check domain too long", method: "GET", path: "/v1/check?resource=t/gcra&domain=" + long, status: 400, code: "bad_request", names: []string{"domain", "300 bytes"}},
		{name: "check on copies", method: "GET", path: "/v1/check?resource=t/copies&domain=d", status: 409, code: "wrong_kind", names: []string{"t/copies"}},
		{name: "state without resource", method: "GET", path: "/v1/state?domain=d", status: 400, code: "bad_request", names: []string{"resource", "missing"}},
		{name: "simulate at_ms going back", path: "/v1/simulate", body: `{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[{"at_ms":5,"domain":"d"},{"at_ms":4,"domain":"d"}]}`, status: 400, code: "bad_request", names: []string{"requests[1].at_ms", "5", "4"}},
		{name: "simulate refund on tiers", path: "/v1/simulate", body: `{"resource":{"kind":"tiers","tiers":"5,1,1,0"},"requests":[{"at_ms":0,"domain":"d","op":"refund"}]}`, status: 400, code: "bad_request", names: []string{"requests[0].op", "gcra"}},
		{name: "simulate unknown op", path: "/v1/simulate", body: `{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"d","op":"steal"}]}`, status: 400, code: "bad_request", names: []string{"requests[0].op", "steal"}},
		{name: "simulate item field wrong", path: "/v1/simulate", body: `{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"d"},{"at_ms":1,"domain":"d","copies":-1}]}`, status: 400, code: "bad_request", names: []string{"requests[1].copies", "-1"}},
		{name: "simulate negative at_ms", path: "/v1/simulate", body: `{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[{"at_ms":-1,"domain":"d"}]}`, status: 400, code: "bad_request", names: []string{"requests[0].at_ms", "-1"}},
		{name: "simulate without resource", path: "/v1/simulate", body: `{"requests":[]}`, status: 400, code: "bad_request", names: []string{"resource", "missing"}},
		{name: "simulate bad resource", path: "/v1/simulate", body: `{"resource":{"kind":"gcra","burst":0,"count":1,"period":"1s"},"requests":[]}`, status: 400, code: "bad_request", names: []string{"resource", "burst"}},
		{name: "simulate resource not an object", path: "/v1/simulate", body: `{"resource":"gcra","requests":[]}`, status: 400, code: "bad_request", names: []string{"resource", "object"}},
		{name: "simulate copies resource", path: "/v1/simulate", body: `{"resource":{"kind":"copies","domain_limit":1},"requests":[]}`, status: 409, code: "wrong_kind", names: []string{"copies"}},
		{name: "simulate too many requests", path: "/v1/simulate", body: simItems(maxSimRequests + 1), status: 413, code: "too_large", names: []string{"requests", "100000"}},
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "POST"
			}
			r := h.do(method, fill(tc.path), fill(tc.body), tc.headers...)
			if r.status != tc.status {
				t.Errorf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			code, msg := errorReply(t, r.body)
			if code != tc.code {
				t.Errorf("code %q, want %q (message %q)", code, tc.code, msg)
			}
			for _, n := range tc.names {
				if !strings.Contains(msg, n) {
					t.Errorf("message %q does not name %q", msg, n)
				}
			}
			// The server keeps serving.
			if r := h.do("GET", "/healthz", ""); r.status != 200 {
				t.Fatalf("after the bad request, /healthz is %d %s", r.status, r.body)
			}
			if r := h.post("/v1/request", `{"resource":"t/tiers","domain":"after"}`); r.status != 200 {
				t.Fatalf("after the bad request, /v1/request is %d %s", r.status, r.body)
			}
		})
	}
	if strings.Contains(h.logs.String(), "internal") {
		t.Errorf("a client error was logged as internal: %s", h.logs.String())
	}
}
