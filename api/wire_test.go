package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/wire/jsonwire"
	"github.com/obol-dev/obol/local"
)

func TestDurations(t *testing.T) {
	cases := []struct {
		d             time.Duration
		ms, sec, retr int64
	}{
		{d: 0, ms: 0, sec: 0, retr: 0},
		{d: time.Nanosecond, ms: 1, sec: 1, retr: 1},
		{d: time.Millisecond, ms: 1, sec: 1, retr: 1},
		{d: time.Millisecond + 1, ms: 2, sec: 1, retr: 2},
		{d: time.Second, ms: 1000, sec: 1, retr: 1000},
		{d: time.Second + 1, ms: 1001, sec: 2, retr: 1001},
		{d: -5 * time.Second, ms: 0, sec: 0, retr: 0},
		{d: local.Never, ms: 0, sec: 0, retr: -1},
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
		buf = jsonwire.AppendString(buf[:0], "café \xff")
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
