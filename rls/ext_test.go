package rls

import (
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

const extConfig = `
domain: ext
descriptors:
  - key: smooth
    rate_limit:
      unit: second
      requests_per_unit: 10
      obol: {kind: gcra, burst: 2}
  - key: tiered
    rate_limit:
      unit: second
      requests_per_unit: 5
      obol: {kind: tiers, tiers: "5,1,1,0"}
`

func TestExtensionKinds(t *testing.T) {
	cfg, err := Parse([]Source{{Name: "ext.yaml", Data: []byte(extConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, Options{})
	one := func(at time.Duration, kv ...string) *rlpb.RateLimitResponse_DescriptorStatus {
		r := GetReply()
		if err := s.Decide(t0.Add(at), &rlpb.RateLimitRequest{Domain: "ext", Descriptors: []*rlv3.RateLimitDescriptor{desc(kv...)}}, r); err != nil {
			t.Fatal(err)
		}
		return r.Response().Statuses[0]
	}
	// gcra, 10 a second and a burst of 2: two at once, then one per 100 ms.
	var codes []string
	for _, at := range []time.Duration{0, 0, 0, 50 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond} {
		codes = append(codes, one(at, "smooth", "a").Code.String()[:2])
	}
	if got, want := strings.Join(codes, " "), "OK OK OV OV OK OV"; got != want {
		t.Fatalf("gcra: %s, want %s", got, want)
	}
	if st := one(100*time.Millisecond, "smooth", "a"); st.CurrentLimit.GetRequestsPerUnit() != 10 || st.DurationUntilReset.GetSeconds() != 1 {
		t.Fatalf("gcra status: %v", st)
	}
	// tiers "5,1,1,0": five a second.
	codes = codes[:0]
	for i := 0; i < 6; i++ {
		codes = append(codes, one(time.Duration(i)*time.Millisecond, "tiered", "b").Code.String()[:2])
	}
	if got, want := strings.Join(codes, " "), "OK OK OK OK OK OV"; got != want {
		t.Fatalf("tiers: %s, want %s", got, want)
	}
	if st := one(1100*time.Millisecond, "tiered", "b"); st.Code != rlpb.RateLimitResponse_OK {
		t.Fatalf("tiers, a second later: %v", st)
	}
	// A reload keeps the extension's state.
	cfg2, err := Parse([]Source{{Name: "ext.yaml", Data: []byte(extConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetConfig(cfg2)
	if st := one(100*time.Millisecond, "smooth", "a"); st.Code != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("gcra after a reload: %v", st)
	}
}

func TestExtensionProblems(t *testing.T) {
	_, err := Parse([]Source{{Name: "x.yaml", Data: []byte(`
domain: x
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, obol: {kind: copies}}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 1, obol: {kind: gcra, burst: -1}}
  - key: c
    rate_limit: {unlimited: true, obol: {kind: gcra}}
`)}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`x.yaml:5: obol.kind: want gcra or tiers, got "copies"`, "x.yaml:7: obol.burst", "x.yaml:9: obol: an unlimited rate_limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
}
