package config

import (
	"strings"
	"testing"
	"time"
)

// A limit set by a request is read as the config reads a resource, with
// the same messages under "limit", restricted to the fields a request may
// set, and named by a canonical text that reads back to the same limit.
func TestParseLimit(t *testing.T) {
	for _, tt := range []struct {
		in, key, err string
	}{
		{in: `{"kind":"gcra","burst":5,"count":10,"period":"1s"}`, key: "gcra:5/10/1s"},
		{in: `{"period":"1000ms","count":10,"burst":5,"kind":"gcra"}`, key: "gcra:5/10/1s"},
		{in: `{"kind":"tiers","tiers":"5,1,1,0,50,5,5,15"}`, key: "tiers:5/1s/1s/0s,50/5s/5s/15s"},
		{in: `{"kind":"tiers","tiers":"5,2,1,0"}`, key: "tiers:5/1s/1s/0s"}, // normalized: window cut to active
		{in: `{"kind":"tiers","tiers":[{"limit":3,"window":"1s","active":"2s","skippable":true}]}`, key: "tiers:3/1s/2s/0s/s"},
		{in: `{"kind":"tiers","tiers":""}`, key: "tiers:"},
		{in: `{"kind":"gcra","burst":0,"count":10,"period":"1s"}`, err: "limit.burst: must be ≥ 1, got 0"},
		{in: `{"kind":"gcra","burst":5,"count":10}`, err: "limit.period: required for kind gcra"},
		{in: `{"burst":5,"count":10,"period":"1s"}`, err: `limit.kind: is required`},
		{in: `{"kind":"copies","domain_limit":3}`, err: `limit.kind: a request may set a limit of kind "gcra" or "tiers", got "copies"`},
		{in: `{"kind":"gcra","burst":5,"count":10,"period":"1s","drift":0.1}`, err: "limit.drift: a limit set by a request takes only kind, burst, count, period; set drift in the config"},
		{in: `{"kind":"gcra","burst":5,"count":10,"period":"1s","bogus":1}`, err: "limit.bogus: unknown key; a limit takes kind, burst, count, period (gcra) or kind, tiers (tiers)"},
		{in: `{"kind":"tiers","tiers":"5,1,1"}`, err: "limit.tiers"},
		{in: `{"kind":"gcra","burst":5,"count":10,"period":"soon"}`, err: "limit.period"},
		{in: `{}`, err: `limit: must be an object with a kind ("gcra" or "tiers") and its fields`},
		{in: `null`, err: `limit: must be an object`},
		{in: `[1]`, err: "limit: must be a mapping, got a list"},
		{in: `{"kind":"tiers","tiers":"` + strings.Repeat("1000000,1000,1000,1000,", 30) + `1,1,1,0"}`, err: "over the 384 a request may set; put this limit in the config"},
	} {
		r, err := ParseLimit([]byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseLimit(%s) = %v, want an error naming %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLimit(%s): %v", tt.in, err)
			continue
		}
		if k := LimitKey(r); k != tt.key {
			t.Errorf("LimitKey(ParseLimit(%s)) = %q, want %q", tt.in, k, tt.key)
		}
		back, err := ParseLimitKey(tt.key)
		if err != nil || LimitKey(back) != tt.key {
			t.Errorf("ParseLimitKey(%q) = %v, %v; want the same limit", tt.key, back, err)
		}
	}
}

// ParseLimitKey refuses a text that is not the canonical text of a valid
// limit: a peer's count cannot make a definition a request could not.
func TestParseLimitKeyRefuses(t *testing.T) {
	for _, k := range []string{
		"", "gcra", "gcra:", "gcra:5/10", "gcra:5/10/1s/1", "gcra:0/10/1s", "gcra:5/10/1000ms", "gcra:05/10/1s",
		"tiers:5/1s/1s", "tiers:5/2s/1s/0s", "tiers:5/1s/1s/0s/x", "tiers:5/1s/1s/0s,", "copies:3",
		"gcra:5/10/" + strings.Repeat("1", MaxLimitKey) + "s",
	} {
		if r, err := ParseLimitKey(k); err == nil {
			t.Errorf("ParseLimitKey(%q) = %+v, want an error", k, r)
		}
	}
}

// FuzzParseLimit: any input is a limit whose canonical text reads back to
// itself, or an error; never a panic.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{
		`{"kind":"gcra","burst":5,"count":10,"period":"1s"}`, `{"kind":"tiers","tiers":"5,1,1,0,50,5,5,15"}`,
		`{"kind":"tiers","tiers":[{"limit":3,"window":"1s","active":"2s"}]}`, `{}`, `[]`, `{"kind":"gcra","burst":1e30}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseLimit(b)
		if err != nil {
			return
		}
		k := LimitKey(r)
		if back, err := ParseLimitKey(k); err != nil || LimitKey(back) != k {
			t.Fatalf("ParseLimit(%q): key %q reads back as %v, %v", b, k, back, err)
		}
	})
}

// FuzzParseLimitKey: any text is a canonical limit text or an error.
func FuzzParseLimitKey(f *testing.F) {
	for _, s := range []string{"gcra:5/10/1s", "tiers:5/1s/1s/0s,50/5s/5s/15s", "tiers:3/1s/2s/0s/s", "tiers:", "gcra:1/1/1ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseLimitKey(s)
		if err == nil && LimitKey(r) != s {
			t.Fatalf("ParseLimitKey(%q) accepted a text that is not its limit's %q", s, LimitKey(r))
		}
	})
}

// StateLife is a gcra bucket's burst offset and a tier list's longest
// window or active plus cooldown, saturating rather than overflowing.
func TestStateLife(t *testing.T) {
	for _, tt := range []struct {
		key  string
		want time.Duration
	}{
		{"gcra:10/5/1s", 2 * time.Second},
		{"gcra:1/1/876000h0m0s", 876000 * time.Hour},
		{"tiers:1/876000h0m0s/876000h0m0s/876000h0m0s", 1 << 62},
		{"tiers:5/1s/1s/0s,50/5s/5s/15s", 20 * time.Second},
		{"tiers:", 0},
	} {
		r, err := ParseLimitKey(tt.key)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.StateLife(); got != tt.want {
			t.Errorf("StateLife(%s) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

// FuzzQuickLimit: the common form's reader accepts only what the document
// decoder accepts, with the same limit.
func FuzzQuickLimit(f *testing.F) {
	for _, s := range []string{
		`{"kind":"gcra","burst":5,"count":10,"period":"1s"}`, ` { "period" : "1000ms", "kind":"gcra", "count":10, "burst":5 } `,
		`{"kind":"tiers","tiers":"5,1,1,0,50,5,5,15"}`, `{"kind":"tiers","tiers":"5,2,1,0"}`, `{"kind":"tiers","tiers":""}`,
		`{"kind":"gcra","burst":0,"count":1,"period":"1s"}`, `{"kind":"gcra","burst":1,"burst":2,"count":1,"period":"1s"}`,
		`{"kind":"gcra","burst":01,"count":1,"period":"1s"}`, `{"kind":"gcra","burst":1,"count":1,"period":"1s"}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := quickLimit(b)
		if !ok {
			return
		}
		root, p := parseDocument(b) // the decoder's path of ParseLimit, without the quick one

		if p != nil {
			t.Fatalf("quickLimit accepted %q, which the decoder refuses: %v", b, p)
		}
		d := newDecoder(root, "limit", len(b))
		r := d.resource("limit", root)
		var l problemList
		checkResource(&l, "limit", r)
		if perr := asError(d.merge(l.list)); perr != nil {
			t.Fatalf("quickLimit accepted %q, which the decoder refuses: %v", b, perr)
		}
		r.Normalize()
		if LimitKey(r) != LimitKey(q) {
			t.Fatalf("%q: quick %q, decoder %q", b, LimitKey(q), LimitKey(r))
		}
	})
}
