package rls

import (
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const testConfig = `
domain: web
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /login
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: tenant
    value: free*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: user
    descriptors:
      - key: plan
        value: gold
        rate_limit: {unit: minute, requests_per_unit: 100, name: gold}
      - key: plan
        rate_limit: {unit: minute, requests_per_unit: 1, name: basic, replaces: [{name: gold}]}
  - key: internal
    rate_limit: {unlimited: true}
  - key: canary
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
`

func testService(t testing.TB, opt Options) *Service {
	t.Helper()
	cfg, err := Parse([]Source{{Name: "web.yaml", Data: []byte(testConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	return New(cfg, opt)
}

func desc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func decide(t testing.TB, s *Service, now time.Time, req *rlpb.RateLimitRequest) *rlpb.RateLimitResponse {
	t.Helper()
	r := GetReply()
	if err := s.Decide(now, req, r); err != nil {
		t.Fatal(err)
	}
	return r.Response()
}

// t0 is a minute's start (and an hour's, a day's).
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func TestMatch(t *testing.T) {
	s := testService(t, Options{})
	cfg := s.Config()
	for _, tc := range []struct {
		name    string
		d       *rlv3.RateLimitDescriptor
		limit   string // the matched limit's path, "" for none
		wantKey string
	}{
		{"key alone, any value", desc("remote_address", "10.0.0.1"), "web.remote_address", "web_remote_address_10.0.0.1_"},
		{"exact value", desc("path", "/login"), "web.path_/login", "web_path_/login_"},
		{"no value matches neither exact nor key", desc("path", "/other"), "", ""},
		{"wildcard prefix", desc("path", "/api/v1/users"), "web.path_/api/*", "web_path_/api/v1/users_"},
		{"wildcard with share_threshold shares one key", desc("tenant", "free-42"), "web.tenant_free*", "web_tenant_free*_"},
		{"nested exact", desc("user", "bob", "plan", "gold"), "web.user.plan_gold", "web_user_bob_plan_gold_"},
		{"nested key alone", desc("user", "bob", "plan", "silver"), "web.user.plan", "web_user_bob_plan_silver_"},
		{"stops above the limit", desc("user", "bob"), "", ""},
		{"deeper than the config", desc("remote_address", "x", "extra", "y"), "", ""},
		{"unknown key", desc("nope", "x"), "", ""},
		{"unlimited", desc("internal", "x"), "web.internal", "web_internal_x_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, key := cfg.match("web", tc.d, nil)
			got := ""
			if l != nil {
				got = l.Path
			}
			if got != tc.limit {
				t.Fatalf("limit %q, want %q", got, tc.limit)
			}
			if l != nil && string(key) != tc.wantKey {
				t.Fatalf("key %q, want %q", key, tc.wantKey)
			}
		})
	}
	if l, _ := cfg.match("other", desc("remote_address", "x"), nil); l != nil {
		t.Fatal("unknown domain matched")
	}
}

type step struct {
	at        time.Duration // after t0
	d         *rlv3.RateLimitDescriptor
	code      rlpb.RateLimitResponse_Code
	remaining uint32
	reset     int64
}

func runSteps(t *testing.T, s *Service, steps []step) {
	t.Helper()
	for i, st := range steps {
		resp := decide(t, s, t0.Add(st.at), &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{st.d}})
		got := resp.Statuses[0]
		if got.Code != st.code || got.LimitRemaining != st.remaining || got.GetDurationUntilReset().GetSeconds() != st.reset || resp.OverallCode != st.code {
			t.Fatalf("step %d (%v): got code %v remaining %d reset %d overall %v, want %v %d %d", i, st.at, got.Code, got.LimitRemaining, got.GetDurationUntilReset().GetSeconds(), resp.OverallCode, st.code, st.remaining, st.reset)
		}
	}
}

func TestFixedWindowBoundaries(t *testing.T) {
	ip := desc("remote_address", "1.2.3.4")
	ok, over := rlpb.RateLimitResponse_OK, rlpb.RateLimitResponse_OVER_LIMIT
	runSteps(t, testService(t, Options{}), []step{
		{0, ip, ok, 2, 60},
		{10 * time.Second, ip, ok, 1, 50},
		{59 * time.Second, ip, ok, 0, 1},
		{59*time.Second + 999*time.Millisecond, ip, over, 0, 1},
		{60 * time.Second, ip, ok, 2, 60}, // the next minute starts over
		{61 * time.Second, ip, ok, 1, 59},
		{62 * time.Second, ip, ok, 0, 58},
		{63 * time.Second, ip, over, 0, 57},
		{64 * time.Second, ip, over, 0, 56}, // over-limit hits count too
		{3 * time.Minute, ip, ok, 2, 60},
	})
}

func TestShadowQuotaUnlimited(t *testing.T) {
	ok := rlpb.RateLimitResponse_OK
	s := testService(t, Options{})
	runSteps(t, s, []step{
		{0, desc("canary", "a"), ok, 0, 60},
		{0, desc("canary", "a"), ok, 0, 60}, // over, but in shadow mode
	})
	r := decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("quota", "a"), desc("quota", "a")}})
	if r.OverallCode != ok || r.Statuses[1].Code != ok || r.Statuses[1].DurationUntilReset != nil {
		t.Fatalf("quota mode: %v", r)
	}
	r = decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("internal", "a")}})
	if st := r.Statuses[0]; st.Code != ok || st.LimitRemaining != 1<<32-1 || st.CurrentLimit != nil {
		t.Fatalf("unlimited: %v", st)
	}
	got := s.Stats()
	c := (*got.perID.Load())[s.Config().match2("canary")]
	if c.shadow.Load() != 1 || c.over.Load() != 1 || c.total.Load() != 2 {
		t.Fatalf("canary stats: shadow %d over %d total %d", c.shadow.Load(), c.over.Load(), c.total.Load())
	}
}

func TestGlobalShadowAndReplaces(t *testing.T) {
	s := testService(t, Options{ShadowMode: true})
	req := &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("user", "u", "plan", "gold"), desc("user", "u", "plan", "basic")}}
	r := decide(t, s, t0, req)
	// basic replaces gold: gold's status has no limit.
	if r.Statuses[0].CurrentLimit != nil || r.Statuses[1].CurrentLimit.GetName() != "basic" || r.Statuses[1].LimitRemaining != 0 {
		t.Fatalf("replaces: %v", r)
	}
	r = decide(t, s, t0, req)
	if r.Statuses[1].Code != rlpb.RateLimitResponse_OVER_LIMIT || r.OverallCode != rlpb.RateLimitResponse_OK {
		t.Fatalf("global shadow mode: %v", r)
	}
}

func TestHitsAddendAndOverride(t *testing.T) {
	s := testService(t, Options{})
	ip := desc("remote_address", "h")
	r := decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "web", HitsAddend: 2, Descriptors: []*rlv3.RateLimitDescriptor{ip}})
	if r.Statuses[0].LimitRemaining != 1 {
		t.Fatalf("request hits_addend 2: %v", r)
	}
	peek := desc("remote_address", "h")
	peek.HitsAddend = wrapperspb.UInt64(0)
	r = decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "web", HitsAddend: 5, Descriptors: []*rlv3.RateLimitDescriptor{peek}})
	if r.Statuses[0].LimitRemaining != 1 || r.OverallCode != rlpb.RateLimitResponse_OK {
		t.Fatalf("descriptor hits_addend 0 overrides the request's: %v", r)
	}
	big := desc("remote_address", "h")
	big.HitsAddend = wrapperspb.UInt64(2)
	r = decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{big}})
	if r.OverallCode != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("2+2 > 3: %v", r)
	}
	// The request's own limit replaces the config's, counted under the
	// same counter (domain and entries), and needs a known domain.
	o := desc("remote_address", "o")
	o.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	r = decide(t, s, t0.Add(30*time.Minute), &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{o}})
	if st := r.Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 1 || st.CurrentLimit.GetUnit() != rlpb.RateLimitResponse_RateLimit_HOUR || st.LimitRemaining != 0 || st.DurationUntilReset.GetSeconds() != 1800 {
		t.Fatalf("override: %v", st)
	}
	r = decide(t, s, t0.Add(30*time.Minute), &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{o}})
	if r.OverallCode != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("override, second hit: %v", r)
	}
	r = decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "nope", Descriptors: []*rlv3.RateLimitDescriptor{o}})
	if r.Statuses[0].CurrentLimit != nil {
		t.Fatalf("override in an unknown domain: %v", r)
	}
}

func TestStopIncrementOverLimit(t *testing.T) {
	s := testService(t, Options{StopIncrementOverLimit: true})
	a, b := desc("remote_address", "a"), desc("path", "/login")
	for i := 0; i < 2; i++ {
		decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{b}})
	}
	// /login is at its limit of 2: this request goes over on it, so a's
	// counter does not grow.
	r := decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{a, b}})
	if r.Statuses[0].LimitRemaining != 3 || r.Statuses[1].Code != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("stop increment: %v", r)
	}
}

func TestHeaders(t *testing.T) {
	for _, tc := range []struct {
		mode HeaderMode
		want string
	}{
		{HeadersRateLimit, "RateLimit-Limit=3 RateLimit-Remaining=2 RateLimit-Reset=50"},
		{HeadersDraft03, "X-RateLimit-Limit=3, 3;w=60 X-RateLimit-Remaining=2 X-RateLimit-Reset=50"},
		{HeadersDraft11, `RateLimit-Policy="default";q=3;w=60 RateLimit="default";r=2;t=50`},
	} {
		s := testService(t, Options{Headers: tc.mode})
		r := decide(t, s, t0.Add(10*time.Second), &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{desc("remote_address", "x"), desc("internal", "y")}})
		var got []string
		for _, h := range r.ResponseHeadersToAdd {
			got = append(got, h.Key+"="+h.Value)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("mode %d: %q, want %q", tc.mode, strings.Join(got, " "), tc.want)
		}
	}
}

func TestBadRequests(t *testing.T) {
	s := testService(t, Options{})
	for _, req := range []*rlpb.RateLimitRequest{
		{Descriptors: []*rlv3.RateLimitDescriptor{desc("a", "b")}},
		{Domain: "web"},
	} {
		if err := s.Decide(t0, req, GetReply()); err == nil {
			t.Fatalf("%v: no error", req)
		}
	}
	o := desc("remote_address", "o")
	o.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	if err := s.Decide(t0, &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{o}}, GetReply()); err != ErrBadUnit {
		t.Fatalf("override of unit unknown: %v", err)
	}
	if err := New(nil, Options{}).Decide(t0, &rlpb.RateLimitRequest{Domain: "web", Descriptors: []*rlv3.RateLimitDescriptor{o}}, GetReply()); err != ErrNoConfig {
		t.Fatalf("no config: %v", err)
	}
}

// match2 returns the id of the limit of the top-level key key.
func (c *Config) match2(key string) int {
	for _, l := range c.limits {
		if l.Path == "web."+key {
			return l.id
		}
	}
	return -1
}

func TestReplacesBothWays(t *testing.T) {
	cfg, err := Parse([]Source{{Name: "r.yaml", Data: []byte(`
domain: r
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1, name: a, replaces: [{name: b}]}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 1, name: b, replaces: [{name: a}]}
  - key: u
    rate_limit: {unlimited: true, name: u}
  - key: v
    rate_limit: {unit: minute, requests_per_unit: 1, replaces: [{name: u}]}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, Options{})
	r := decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "r", Descriptors: []*rlv3.RateLimitDescriptor{desc("a", "1"), desc("b", "1"), desc("u", "1"), desc("v", "1")}})
	// a and b replace each other: both are dropped; u, replaced, still
	// answers as unlimited.
	st := r.Statuses
	if st[0].CurrentLimit != nil || st[1].CurrentLimit != nil || st[2].LimitRemaining != 1<<32-1 || st[3].CurrentLimit == nil {
		t.Fatalf("replaces: %v", r)
	}
}
