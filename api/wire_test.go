package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

func TestExactInt(t *testing.T) {
	cases := []struct {
		tok  string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"7", 7, true}, {"-3", -3, true},
		{"1e3", 1000, true}, {"2.0", 2, true}, {"2.50e1", 25, true}, {"0.05e2", 5, true},
		{"1000000000", 1e9, true}, {"1e18", 1e18, true}, {"0e999999", 0, true},
		{"1.5", 0, false}, {"1e-1", 0, false}, {"1e19", 0, false}, {"1e30", 0, false},
		{"12345678901234567890", 0, false}, {"1e999999999999", 0, false}, {"5e-999999999", 0, false},
		{"1.0000000000000000000000", 1, true},
	}
	for _, tc := range cases {
		got, ok := exactInt([]byte(tc.tok))
		if got != tc.want || ok != tc.ok {
			t.Errorf("exactInt(%s) = %d, %v, want %d, %v", tc.tok, got, ok, tc.want, tc.ok)
		}
	}
}

func TestScanNumber(t *testing.T) {
	for tok, ok := range map[string]bool{
		"0": true, "-1": true, "1.25": true, "1e5": true, "1E+5": true, "1e-5": true,
		"01": false, "-": false, "1.": false, ".5": false, "1e": false, "+1": false, "1x": false, "--1": false,
	} {
		end, got := scanNumber([]byte(tok), 0)
		if got != ok || (ok && end != len(tok)) {
			t.Errorf("scanNumber(%q) = %d, %v, want ok %v", tok, end, got, ok)
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "ctl\x00\x01\x1f\n\r\t", "café 😀", "bad\xff\xfeutf8", "\u2028"} {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("appendString(%q) = %s: not JSON: %v", s, b, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if strings.Contains(s, "\xff\xfe") {
			want = strings.ReplaceAll(s, "\xff\xfe", "\ufffd\ufffd")
		}
		if got != want {
			t.Errorf("appendString(%q) decodes to %q, want %q", s, got, want)
		}
		if bb := appendString(nil, []byte(s)); string(bb) != string(b) {
			t.Errorf("appendString of []byte %q = %s, of string %s", s, bb, b)
		}
	}
}

func TestDurations(t *testing.T) {
	cases := []struct {
		d             time.Duration
		ms, sec, retr int64
	}{
		{0, 0, 0, 0},
		{time.Nanosecond, 1, 1, 1},
		{time.Millisecond, 1, 1, 1},
		{time.Millisecond + 1, 2, 1, 2},
		{time.Second, 1000, 1, 1000},
		{time.Second + 1, 1001, 2, 1001},
		{-5 * time.Second, 0, 0, 0},
		{local.Never, 0, 0, -1},
	}
	for _, tc := range cases {
		if got := ceilMs(tc.d); got != tc.ms {
			t.Errorf("ceilMs(%v) = %d, want %d", tc.d, got, tc.ms)
		}
		if got := ceilSec(tc.d); got != tc.sec {
			t.Errorf("ceilSec(%v) = %d, want %d", tc.d, got, tc.sec)
		}
		if got := retryMs(tc.d); got != tc.retr {
			t.Errorf("retryMs(%v) = %d, want %d", tc.d, got, tc.retr)
		}
	}
}

func TestAppendDecisionMatchesEncodingJSON(t *testing.T) {
	d := local.Decision{Kind: config.KindTiers, Granted: 2, Remaining: 3, RetryAfter: local.Never,
		ResetAfter: 1500*time.Millisecond + 1, Tier: 2, TierLimit: 50, TierHits: 7, Burst: true,
		HardLimit: 100, GlobalLimit: 1000, DomainHitsLastSecond: 9, GlobalHitsLastSecond: 90,
		LimitedByHard: true, Shadow: true, Lenient: true}
	var m map[string]any
	if err := json.Unmarshal(appendDecision(nil, &d), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"granted": 2.0, "remaining": 3.0, "retry_after_ms": -1.0, "reset_after_ms": 1501.0,
		"tier": 2.0, "tier_limit": 50.0, "tier_hits": 7.0, "burst": true, "hard_limit": 100.0,
		"global_limit": 1000.0, "domain_hits_last_second": 9.0, "global_hits_last_second": 90.0,
		"limited_by_hard": true, "limited_by_global": false, "shadow": true, "lenient": true}
	got, _ := json.Marshal(m)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("appendDecision:\n got %s\nwant %s", got, exp)
	}
}

func TestAppendersAllocateNothing(t *testing.T) {
	tiers := local.Decision{Kind: config.KindTiers, Granted: 1, Remaining: 54, ResetAfter: time.Second, Tier: 1, TierLimit: 5}
	gcra := local.Decision{Kind: config.KindGCRA, Granted: 1, Remaining: 19, ResetAfter: 50 * time.Millisecond}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		buf = appendDecision(buf[:0], &tiers)
		buf = appendDecision(buf[:0], &gcra)
		buf = appendString(buf[:0], "café \xff")
	}); n != 0 {
		t.Errorf("appenders allocate %v times per run", n)
	}
}

func TestDecodeRequestAllocatesNothing(t *testing.T) {
	body := []byte(`{"resource":"api/search","domain":"user-\u0034\u0032","copies":3,"min_copies":1}`)
	var b wireBody
	if n := testing.AllocsPerRun(100, func() {
		b.reset()
		if err := b.decode(body, requestFields, fResource|fDomain); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("decode allocates %v times per run", n)
	}
	if string(b.domain) != "user-42" || b.copies != 3 || b.minCopies != 1 {
		t.Errorf("decoded %+v", b)
	}
}

func TestHeaderReceivedLimits(t *testing.T) {
	for uri, want := range map[string]int{
		"/v1/simulate":                          maxSimulateBody,
		"/v1/simulate?x=1":                      maxSimulateBody,
		"http://obol/v1/simulate":               maxSimulateBody,
		"http://obol:7070/v1/simulate?a":        maxSimulateBody,
		"/v1/request":                           maxBody,
		"/v1/simulate/x":                        maxBody,
		"/v1/request?next=http://x/v1/simulate": maxBody,
	} {
		var h fasthttp.RequestHeader
		h.SetRequestURI(uri)
		if got := headerReceived(&h).MaxRequestBodySize; got != want {
			t.Errorf("limit for %s = %d, want %d", uri, got, want)
		}
	}
}

// TestReadStringWordAtATime checks the eight-bytes-at-a-time scan of
// readString against a byte-at-a-time reading, for every position of every
// kind of byte that matters in strings of up to 24 bytes.
func TestReadStringWordAtATime(t *testing.T) {
	// reference reads a string without escapes byte by byte: its end, and
	// whether it is ASCII; ok false on a backslash or a control character.
	reference := func(b []byte) (end int, ascii, ok bool) {
		ascii = true
		for i, c := range b {
			switch {
			case c == '"':
				return i, ascii, true
			case c == '\\' || c < 0x20:
				return i, ascii, false
			case c >= 0x80:
				ascii = false
			}
		}
		return len(b), ascii, false
	}
	for n := range 25 {
		for pos := range n {
			for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xff, '!', '#', '[', ']'} {
				s := bytes.Repeat([]byte{'a'}, n)
				s[pos] = c
				body := append(append([]byte{'"'}, s...), '"', ',', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ')
				r := reader{b: body}
				var scratch []byte
				got, err := r.readString("f", &scratch)
				end, ascii, ok := reference(body[1:])
				if c == '\\' {
					// An escape: the slow path, which refuses "\a".
					if err == nil {
						t.Errorf("%q: no error for an invalid escape", body)
					}
					continue
				}
				if ok != (err == nil) {
					t.Errorf("%q: error %v, reference ok %v", body, err, ok)
					continue
				}
				if err != nil {
					continue
				}
				if string(got) != string(body[1:1+end]) || r.i != end+2 || r.ascii != ascii {
					t.Errorf("%q: got %q, i %d, ascii %v; want %q, i %d, ascii %v", body, got, r.i, r.ascii, body[1:1+end], end+2, ascii)
				}
			}
		}
	}
}

func TestSmallInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		v    int64
		ok   bool
		rest string
	}{
		{"0,", 0, true, ","}, {"7}", 7, true, "}"}, {"123 ", 123, true, " "}, {"999999999999999999]", 999999999999999999, true, "]"},
		{"01,", 0, false, ""}, {"1e3,", 0, false, ""}, {"1.0,", 0, false, ""}, {"-1,", 0, false, ""},
		{"12", 0, false, ""}, {"1000000000000000000,", 0, false, ""}, {"12x", 0, false, ""}, {",", 0, false, ""},
	} {
		v, end, ok := smallInt([]byte(tc.in), 0)
		if ok != tc.ok || (ok && (v != tc.v || tc.in[end:] != tc.rest)) {
			t.Errorf("smallInt(%q) = %d, %d, %v; want %d, %v, rest %q", tc.in, v, end, ok, tc.v, tc.ok, tc.rest)
		}
	}
}
