package rls

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestDocRouteRateLimits reads every route rate_limits block of
// docs/envoy.md into Envoy's own RateLimit type and validates it as Envoy
// would: the docs' route configs are real Envoy config.
func TestDocRouteRateLimits(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "envoy.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, blk := range strings.Split(string(b), "```yaml\n")[1:] {
		blk = blk[:strings.Index(blk, "```")]
		if !strings.HasPrefix(blk, "rate_limits:") {
			continue
		}
		var doc struct {
			RateLimits []any `yaml:"rate_limits"`
		}
		if err := yaml.Unmarshal([]byte(blk), &doc); err != nil {
			t.Fatalf("a rate_limits block is not YAML: %v\n%s", err, blk)
		}
		for i, rl := range doc.RateLimits {
			raw, err := json.Marshal(rl)
			if err != nil {
				t.Fatal(err)
			}
			var m routev3.RateLimit
			if err := protojson.Unmarshal(raw, &m); err != nil {
				t.Errorf("rate_limits[%d] is not an Envoy RateLimit: %v\n%s", i, err, raw)
				continue
			}
			if err := m.ValidateAll(); err != nil {
				t.Errorf("rate_limits[%d] fails Envoy's validation: %v\n%s", i, err, raw)
			}
			n++
		}
	}
	if n < 4 {
		t.Fatalf("found %d route rate limits in docs/envoy.md, want the descriptors example and the token budget's two", n)
	}
}

// The token budget of docs/envoy.md through the service: a check of 0
// hits on the request, the response's tokens on stream done. The charge
// lands even past the budget, and the next check is then over the limit
// until the window turns.
func TestTokenBudgetOnStreamDone(t *testing.T) {
	cfg, err := Parse([]Source{{Name: "llm.yaml", Data: []byte(`
domain: llm
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, Options{})
	call := func(at time.Time, hits uint64) *rlpb.RateLimitResponse {
		d := desc("user", "ada")
		d.HitsAddend = wrapperspb.UInt64(hits)
		return decide(t, s, at, &rlpb.RateLimitRequest{Domain: "llm", Descriptors: []*rlv3.RateLimitDescriptor{d}})
	}
	at := t0
	for i, tokens := range []uint64{600, 300, 700} {
		if r := call(at, 0); r.OverallCode != rlpb.RateLimitResponse_OK {
			t.Fatalf("check %d: %v, want OK", i, r)
		}
		call(at.Add(time.Second), tokens) // stream done: its answer is not enforced
		at = at.Add(2 * time.Second)
	}
	if r := call(at, 0); r.OverallCode != rlpb.RateLimitResponse_OVER_LIMIT || r.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("after 1,600 tokens of 1,000: %v, want OVER_LIMIT", r)
	}
	if r := call(t0.Add(time.Minute), 0); r.OverallCode != rlpb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 1000 {
		t.Fatalf("the next minute: %v, want OK with the whole budget", r)
	}
}
