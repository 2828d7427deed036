package api

import (
	"strings"
	"testing"
)

// A request with "settle": true gets a ticket with its grant; settling
// for less gives the difference back, once; a rejection carries no
// ticket.
func TestSettleFlow(t *testing.T) {
	h := newHarness(t)
	m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":15,"settle":true}`)
	tk := str(t, m, "ticket")
	if num(t, m, "granted") != 15 || !strings.HasPrefix(tk, "c-") {
		t.Fatalf("settle request: %v, want 15 granted and a ticket", m)
	}
	m = h.ok("/v1/settle", `{"ticket":"`+tk+`","copies":5}`)
	if num(t, m, "charged") != -10 || num(t, m, "remaining") != 15 || len(m) != 2 {
		t.Fatalf("settle 5 of 15: %v, want charged -10, remaining 15", m)
	}
	r := h.post("/v1/settle", `{"ticket":"`+tk+`","copies":5}`)
	if code, msg := errorReply(t, r.body); r.status != 409 || code != "already_settled" || !strings.Contains(msg, tk) {
		t.Fatalf("second settle: %d %s %s, want 409 already_settled naming the ticket", r.status, code, msg)
	}
	r = h.post("/v1/settle", `{"ticket":"c-unknown","copies":1}`)
	if code, _ := errorReply(t, r.body); r.status != 404 || code != "unknown_ticket" {
		t.Fatalf("unknown ticket: %d %s, want 404 unknown_ticket", r.status, code)
	}
	m = h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":20,"settle":true}`)
	if num(t, m, "granted") != 0 || m["ticket"] != nil {
		t.Fatalf("a rejection: %v, want no ticket", m)
	}
	if m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","settle":false}`); m["ticket"] != nil {
		t.Fatalf("settle false: %v, want no ticket", m)
	}
	r = h.do("POST", "/v1/request", "\x84\xa8resource\xa6t/gcra\xa6domain\xa1e\xa6copies\x02\xa6settle\xc3",
		"Content-Type: application/msgpack", "Accept: application/msgpack")
	if r.status != 200 || !strings.Contains(string(r.body), "\xa6ticket\xbcc-") {
		t.Fatalf("msgpack settle request: %d %q, want a ticket", r.status, r.body)
	}
}

// Bad settle input names the field and what was expected.
func TestSettleErrors(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
		names      []string
	}{
		{"/v1/request", `{"resource":"t/gcra","domain":"d","settle":"yes"}`, 400, "bad_request", []string{"settle", "true or false", `"yes"`}},
		{"/v1/request", `{"resource":"t/gcra","domain":"d","settle":1}`, 400, "bad_request", []string{"settle", "true or false"}},
		{"/v1/request", `{"resource":"t/copies","domain":"d","settle":true}`, 409, "wrong_kind", []string{"t/copies"}},
		{"/v1/settle", `{"ticket":"c-x"}`, 400, "bad_request", []string{"copies"}},
		{"/v1/settle", `{"copies":1}`, 400, "bad_request", []string{"ticket"}},
		{"/v1/settle", `{"ticket":"c-x","copies":-1}`, 400, "bad_request", []string{"copies"}},
		{"/v1/batch", `{"requests":[{"resource":"t/gcra","domain":"d","settle":true}]}`, 200, "", nil},
	} {
		r := h.post(tc.path, tc.body)
		if r.status != tc.status {
			t.Errorf("%s %s: status %d (%s), want %d", tc.path, tc.body, r.status, r.body, tc.status)
			continue
		}
		if tc.code == "" {
			if !strings.Contains(string(r.body), `settle`) || !strings.Contains(string(r.body), `"error"`) {
				t.Errorf("%s %s: %s, want the item refused naming settle", tc.path, tc.body, r.body)
			}
			continue
		}
		code, msg := errorReply(t, r.body)
		if code != tc.code {
			t.Errorf("%s %s: code %s (%s), want %s", tc.path, tc.body, code, msg, tc.code)
		}
		for _, n := range tc.names {
			if !strings.Contains(msg, n) {
				t.Errorf("%s %s: message %q does not name %q", tc.path, tc.body, msg, n)
			}
		}
	}
}
