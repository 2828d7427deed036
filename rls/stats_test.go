package rls

import (
	"fmt"
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
)

func gather(t *testing.T, s *Stats) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	cfg, err := Parse([]Source{{Name: "m.yaml", Data: []byte(`
domain: m
descriptors:
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, Options{ShadowMode: true})
	for i := 0; i < 7; i++ {
		decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "m", Descriptors: []*rlv3.RateLimitDescriptor{desc("plain", fmt.Sprint(i%2))}})
	}
	for _, v := range []string{"a", "a", "b"} {
		decide(t, s, t0, &rlpb.RateLimitRequest{Domain: "m", Descriptors: []*rlv3.RateLimitDescriptor{desc("detailed", v)}})
	}
	got := gather(t, s.Stats())
	for name, want := range map[string]float64{
		// plain: 4 hits of value 0 and 3 of value 1, two counters under
		// one series, neither past its near threshold of 4.
		`ratelimit_service_rate_limit_total_hits{domain=m,key=m.plain}`:      7,
		`ratelimit_service_rate_limit_within_limit{domain=m,key=m.plain}`:    7,
		`ratelimit_service_rate_limit_over_limit{domain=m,key=m.plain}`:      0,
		`ratelimit_service_rate_limit_total_hits{domain=m,key=m_detailed_a}`: 2,
		`ratelimit_service_rate_limit_over_limit{domain=m,key=m_detailed_a}`: 1,
		`ratelimit_service_rate_limit_near_limit{domain=m,key=m_detailed_a}`: 1,
		`ratelimit_service_rate_limit_total_hits{domain=m,key=m_detailed_b}`: 1,
		`ratelimit_service_rate_limit_total_hits{domain=m,key=m.detailed}`:   0,
		`ratelimit_service_global_shadow_mode{}`:                             1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}
