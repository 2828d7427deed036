package client

import (
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"
)

func TestDecodeDecision(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Reply
		bad  bool
	}{
		{name: "gcra", in: `{"granted":1,"remaining":19,"retry_after_ms":0,"reset_after_ms":50,"shadow":false}`,
			want: Reply{Granted: 1, Remaining: 19, ResetAfterMs: 50, HardLimit: NoLimit, GlobalLimit: NoLimit}},
		{name: "tiers", in: `{"granted":1,"remaining":4,"retry_after_ms":0,"reset_after_ms":1000,"tier":1,"tier_limit":5,` +
			`"tier_hits":1,"burst":true,"hard_limit":100,"global_limit":7,"domain_hits_last_second":1,` +
			`"global_hits_last_second":2,"limited_by_hard":true,"limited_by_global":true,"shadow":true,"lenient":true}`,
			want: Reply{Granted: 1, Remaining: 4, ResetAfterMs: 1000, Tier: 1, TierLimit: 5, TierHits: 1, Burst: true,
				HardLimit: 100, GlobalLimit: 7, DomainHitsLastSecond: 1, GlobalHitsLastSecond: 2, LimitedByHard: true,
				LimitedByGlobal: true, Shadow: true, Lenient: true}},
		{name: "never", in: `{"granted":0,"retry_after_ms":-1}`, want: Reply{RetryAfterMs: -1, HardLimit: NoLimit, GlobalLimit: NoLimit}},
		{name: "unknown fields are skipped", in: ` { "future": {"a": [1, 2.5e3, "x\"y", null, true]}, "granted" : 2 , "z":-0.5 } `,
			want: Reply{Granted: 2, HardLimit: NoLimit, GlobalLimit: NoLimit}},
		{name: "not a decision", in: `{"remaining":1}`, bad: true},
		{name: "a fraction", in: `{"granted":1.5}`, bad: true},
		{name: "trailing data", in: `{"granted":1} x`, bad: true},
		{name: "missing comma", in: `{"granted":1 "remaining":2}`, bad: true},
		{name: "truncated", in: `{"granted":1,`, bad: true},
		{name: "empty", in: ``, bad: true},
		{name: "array", in: `[1]`, bad: true},
		{name: "bool as int", in: `{"granted":true}`, bad: true},
		{name: "deep", in: `{"granted":1,"x":` + nest(100) + `}`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Reply
			err := decodeDecision([]byte(tc.in), &r)
			if (err != nil) != tc.bad {
				t.Fatalf("decodeDecision(%s) = %v, want bad %v", tc.in, err, tc.bad)
			}
			if !tc.bad && r != tc.want {
				t.Fatalf("decodeDecision(%s) =\n %+v\nwant\n %+v", tc.in, r, tc.want)
			}
		})
	}
}

func nest(n int) string {
	s := ""
	for range n {
		s += "["
	}
	for range n {
		s += "]"
	}
	return s
}

func TestDecodeOthers(t *testing.T) {
	var rr ReserveReply
	err := decodeReservation([]byte(`{"granted":2,"hold":"h-a\u00e91","domain_limit":5,"global_limit":100,"domain_holds":2,`+
		`"global_holds":3,"groups":[{"name":"partners","limit":20,"holds":2}],"shadow":true}`), &rr)
	want := ReserveReply{Granted: 2, Hold: "h-aé1", DomainLimit: 5, GlobalLimit: 100, DomainHolds: 2, GlobalHolds: 3,
		Groups: []GroupHolds{{Name: "partners", Limit: 20, Holds: 2}}, Shadow: true}
	if err != nil || rr.Hold != want.Hold || !slices.Equal(rr.Groups, want.Groups) || rr.GlobalHolds != 3 || !rr.Shadow {
		t.Fatalf("decodeReservation = %+v, %v", rr, err)
	}
	if err := decodeReservation([]byte(`{"granted":2,"groups":[]}`), &rr); err == nil {
		t.Fatal("a grant without a hold was accepted")
	}
	s, err := decodeSeized([]byte(`{"hold":"h-1","resource":"t/c","domain":"a\\\"b","groups":["g1","g2"],"copies":2}`))
	if err != nil || s.hold != "h-1" || s.domain != `a\"b` || !slices.Equal(s.groups, []string{"g1", "g2"}) || s.copies != 2 {
		t.Fatalf("decodeSeized = %+v, %v", s, err)
	}
	if released, held, err := decodeReleased([]byte(`{"released":1,"held":4}`)); err != nil || released != 1 || held != 4 {
		t.Fatalf("decodeReleased = %d %d %v", released, held, err)
	}
	if id, err := decodeTransfer([]byte(`{"transfer":"x-9"}`)); err != nil || id != "x-9" {
		t.Fatalf("decodeTransfer = %q, %v", id, err)
	}
	if code, msg, ok := decodeError([]byte(`{"error":{"code":"wrong_kind","message":"\"t/c\" is a copies resource\ud83d\ude00"}}`)); !ok ||
		code != "wrong_kind" || msg != `"t/c" is a copies resource😀` {
		t.Fatalf("decodeError = %q %q %v", code, msg, ok)
	}
	out := make([]BatchResult, 2)
	if err := decodeBatch([]byte(`{"responses":[{"error":{"code":"unknown_resource","message":"m"}},{"granted":1}]}`), out); err != nil ||
		out[0].Err == nil || out[1].Reply.Granted != 1 {
		t.Fatalf("decodeBatch = %+v, %v", out, err)
	}
	if err := decodeBatch([]byte(`{"responses":[{"granted":1}]}`), out); err == nil {
		t.Fatal("decodeBatch accepted one response for two requests")
	}
}

func TestAppendStringIsJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "ctl\x00\x1f\n\r\t", "üñí😀", "a/b"} {
		var got string
		if err := json.Unmarshal(appendString(nil, s), &got); err != nil || got != s {
			t.Errorf("appendString(%q) = %s: %q, %v", s, appendString(nil, s), got, err)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "x", `"\`, "\x00\n", "é😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		var got string
		if err := json.Unmarshal(appendString(nil, s), &got); err != nil || got != s {
			t.Fatalf("appendString(%q) = %s: %q, %v", s, appendString(nil, s), got, err)
		}
	})
}

// FuzzDecode feeds every reply decoder the same bytes: none may panic, and
// what decodeDecision accepts as JSON must agree with encoding/json.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"granted":1,"remaining":19,"retry_after_ms":0,"reset_after_ms":50,"shadow":false}`,
		`{"granted":0,"retry_after_ms":-1,"x":[{"a":"\u00e9"}]}`,
		`{"error":{"code":"bad_request","message":"m"}}`,
		`{"granted":2,"hold":"h","groups":[{"name":"g","limit":1,"holds":1}]}`,
		`{"hold":"h","resource":"r","domain":"d","groups":["g"],"copies":1}`,
		`{"responses":[{"granted":1},{"error":{"code":"x","message":"y"}}]}`,
		`{"released":1,"held":0}`, `{"session":"s","ttl_ms":1}`, `[`, `{"a":`, `"\ud800"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Reply
		if decodeDecision(b, &r) == nil {
			var m map[string]any
			if json.Valid(b) {
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatalf("accepted %q, which encoding/json refuses: %v", b, err)
				}
				if g, ok := m["granted"].(float64); !ok || int(g) != r.Granted {
					t.Fatalf("granted = %d, encoding/json reads %v", r.Granted, m["granted"])
				}
			}
		}
		var rr ReserveReply
		_ = decodeReservation(b, &rr)
		_, _ = decodeSeized(b)
		_, _, _ = decodeError(b)
		_, _, _ = decodeReleased(b)
		_, _ = decodeSession(b)
		_ = decodeBatch(b, make([]BatchResult, 2))
		_, _ = sfParam(string(b), 'r')
	})
}
