package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestFirstSecond(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		now   string
		ticks int
		want  string
	}{
		{"2026-01-01T10:00:00.300Z", 10, "2026-01-01T10:00:01Z"},
		{"2026-01-01T10:00:49.999Z", 10, "2026-01-01T10:00:50Z"}, // the last tick is second 59
		{"2026-01-01T10:00:50.001Z", 10, "2026-01-01T10:01:01Z"},
		{"2026-01-01T10:00:59.500Z", 1, "2026-01-01T10:01:01Z"}, // never second 0
		{"2026-01-01T10:00:58.500Z", 1, "2026-01-01T10:00:59Z"},
	}
	for _, tt := range tests {
		if got := firstSecond(at(tt.now), tt.ticks); !got.Equal(at(tt.want)) {
			t.Errorf("firstSecond(%s, %d) = %s, want %s", tt.now, tt.ticks, got.Format(time.RFC3339Nano), tt.want)
		}
	}
}

func TestMakeTraceDeterministic(t *testing.T) {
	spec := traceSpec{seed: 7, ticks: 3, perTick: 20}
	a, b := makeTrace(spec), makeTrace(spec)
	if len(a) != 60 {
		t.Fatalf("len = %d, want 60", len(a))
	}
	var overrides, addends int
	for i := range a {
		if a[i].tick != i/20 || !proto.Equal(a[i].req, b[i].req) {
			t.Fatalf("step %d differs between two traces of one seed: %s vs %s", i, describe(a[i].req), describe(b[i].req))
		}
		for _, d := range a[i].req.Descriptors {
			if d.Limit != nil {
				overrides++
			}
			if d.HitsAddend != nil {
				addends++
			}
		}
	}
	c := makeTrace(traceSpec{seed: 8, ticks: 3, perTick: 20})
	same := 0
	for i := range a {
		if proto.Equal(a[i].req, c[i].req) {
			same++
		}
	}
	if same == len(a) {
		t.Fatal("seeds 7 and 8 gave the same trace")
	}
	if long := makeTrace(traceSpec{seed: 1, ticks: 10, perTick: 30}); countDescriptors(long, func(d string) bool { return strings.Contains(d, "limit=") }) == 0 {
		t.Fatal("a 300-request trace has no limit override")
	}
}

// countDescriptors counts the trace's requests whose description satisfies f.
func countDescriptors(trace []step, f func(string) bool) int {
	n := 0
	for _, st := range trace {
		if f(describe(st.req)) {
			n++
		}
	}
	return n
}

func TestCompareReplies(t *testing.T) {
	status := func(code rlsv3.RateLimitResponse_Code, rpu uint32, remaining uint32, reset int64) *rlsv3.RateLimitResponse_DescriptorStatus {
		s := &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, LimitRemaining: remaining}
		if rpu > 0 {
			s.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: rpu, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND}
			s.DurationUntilReset = durationpb.New(time.Duration(reset) * time.Second)
		}
		return s
	}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	base := &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(ok, 5, 3, 1), status(ok, 0, 0, 0)}}
	tests := []struct {
		name  string
		got   *rlsv3.RateLimitResponse
		wants []string // the fields that differ
	}{
		{"equal", proto.Clone(base).(*rlsv3.RateLimitResponse), nil},
		{"reset within a second", &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(ok, 5, 3, 2), status(ok, 0, 0, 0)}}, nil},
		{"reset off by two", &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(ok, 5, 3, 3), status(ok, 0, 0, 0)}}, []string{"statuses[0].duration_until_reset"}},
		{"over and remaining", &rlsv3.RateLimitResponse{OverallCode: over, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(over, 5, 0, 1), status(ok, 0, 0, 0)}}, []string{"overall_code", "statuses[0].code", "statuses[0].limit_remaining"}},
		{"limit", &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(ok, 6, 3, 1), status(ok, 2, 0, 1)}}, []string{"statuses[0].current_limit", "statuses[1].current_limit", "statuses[1].duration_until_reset"}},
		{"count", &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(ok, 5, 3, 1)}}, []string{"len(statuses)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := compareReplies(4, base, tt.got)
			var fields []string
			for _, m := range ms {
				if m.step != 4 {
					t.Errorf("mismatch at step %d, want 4", m.step)
				}
				fields = append(fields, m.field)
			}
			if fmt.Sprint(fields) != fmt.Sprint(tt.wants) {
				t.Fatalf("fields = %v, want %v", fields, tt.wants)
			}
		})
	}
}
