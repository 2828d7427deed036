package rls

import (
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// mesh delivers every packet a node sends to every other node at once.
type mesh struct {
	nodes []*reconcile.Cluster
}

type meshSender struct {
	m    *mesh
	self int
}

func (s meshSender) Send(p *packet.Packet) error {
	for i, c := range s.m.nodes {
		if i != s.self {
			c.HandlePacket(p)
		}
	}
	return nil
}

func (s meshSender) Live() int { return len(s.m.nodes) }

const clusterConfig = `
domain: api
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 1000}
`

// Three agents behind one config, 3 × 1000 requests spread over them
// within one minute against a limit of 1000 a minute: the cluster grants
// at most 1000 × (1 + drift), and no fewer than 1000.
func TestThreeAgentsConverge(t *testing.T) {
	cfg, err := Parse([]Source{{Name: "api.yaml", Data: []byte(clusterConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	m := &mesh{}
	var svcs []*Service
	for i := 0; i < 3; i++ {
		c := reconcile.New(reconcile.Options{Name: string(rune('a' + i)), Clock: clk})
		svc := New(nil, Options{})
		c.SetSender(meshSender{m, i})
		svc.Store().Attach(c)
		svc.SetConfig(cfg)
		m.nodes = append(m.nodes, c)
		svcs = append(svcs, svc)
	}
	for _, c := range m.nodes {
		c.Step(clk.Now()) // learn the mesh's size
	}
	req := &rlpb.RateLimitRequest{Domain: "api", Descriptors: []*rlv3.RateLimitDescriptor{desc("client", "c1")}}
	granted := 0
	for i := 0; i < 3000; i++ {
		now := t0.Add(time.Duration(i) * 15 * time.Millisecond) // 45 s: one window
		clk.Set(now)
		n := i % 3
		r := GetReply()
		if err := svcs[n].Decide(now, req, r); err != nil {
			t.Fatal(err)
		}
		if r.Response().OverallCode == rlpb.RateLimitResponse_OK {
			granted++
		}
		r.Release()
		m.nodes[n].Flush(now) // what the drift threshold's wake does
		if i%17 == 0 {        // ticks, every 250 ms
			for _, c := range m.nodes {
				c.Step(now)
			}
		}
	}
	bound := int(1000 * (1 + config.DefaultDrift))
	t.Logf("granted %d of 3000 (limit 1000, drift %.2f: at most %d)", granted, config.DefaultDrift, bound)
	if granted > bound || granted < 1000 {
		t.Fatalf("granted %d, want within [1000, %d]", granted, bound)
	}
}

// The extension's engine registers its resources with the store's cluster
// itself: a peer's spends of an extension limit reach the other agent's
// engine, before a reload and after it (the reloaded engine is registered
// in its place).
func TestExtensionCountsReachPeers(t *testing.T) {
	cfg, err := Parse([]Source{{Name: "ext.yaml", Data: []byte(extConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	m := &mesh{}
	var svcs []*Service
	for i := range 2 {
		c := reconcile.New(reconcile.Options{Name: string(rune('a' + i)), Clock: clk})
		c.SetSender(meshSender{m, i})
		svc := New(nil, Options{})
		svc.Store().Attach(c)
		svc.SetConfig(cfg)
		m.nodes = append(m.nodes, c)
		svcs = append(svcs, svc)
	}
	decide := func(n int, at time.Duration, kv ...string) rlpb.RateLimitResponse_Code {
		t.Helper()
		clk.Set(t0.Add(at))
		r := GetReply()
		defer r.Release()
		if err := svcs[n].Decide(t0.Add(at), &rlpb.RateLimitRequest{Domain: "ext", Descriptors: []*rlv3.RateLimitDescriptor{desc(kv...)}}, r); err != nil {
			t.Fatal(err)
		}
		return r.Response().OverallCode
	}
	step := func(at time.Duration) {
		for _, c := range m.nodes {
			c.Step(t0.Add(at))
		}
	}
	step(0) // learn the mesh's size
	// gcra, 10 a second and a burst of 2: node a spends the burst, and
	// node b, told of it, refuses the third at the same instant.
	for range 2 {
		if got := decide(0, 0, "smooth", "k"); got != rlpb.RateLimitResponse_OK {
			t.Fatalf("node a: %v, want OK", got)
		}
	}
	step(0)
	if got := decide(1, 0, "smooth", "k"); got != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("node b after a's burst: %v, want OVER_LIMIT (a's spends applied to b's extension engine)", got)
	}
	// A reload on node b: the engine it makes takes the peers' spends from now on.
	cfg2, err := Parse([]Source{{Name: "ext.yaml", Data: []byte(extConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	svcs[1].SetConfig(cfg2)
	at := 10 * time.Second // the buckets are full again
	for range 2 {
		if got := decide(0, at, "smooth", "j"); got != rlpb.RateLimitResponse_OK {
			t.Fatalf("node a at 10 s: %v, want OK", got)
		}
	}
	step(at)
	if got := decide(1, at, "smooth", "j"); got != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("node b after its reload: %v, want OVER_LIMIT (a's spends applied to the reloaded engine)", got)
	}
}

// limitSpec is one tier of the limit, whose window is a minute (a second
// for limits per second), and slot 0 kept a second: reconcile's buckets of
// 1.2 s and 20 ms (a fiftieth), with no entries and obol's drift.
func TestLimitSpec(t *testing.T) {
	for _, tc := range []struct {
		limit   uint32
		seconds int64
		window  int64
		tier    int64
	}{
		{1000, 60, 60_000, 1000},
		{1000, 3600, 60_000, 1000},
		{5, 1, 1000, 5},
		{0, 60, 60_000, 1}, // a limit of 0 ships at the least threshold
	} {
		s := limitSpec(tc.limit, tc.seconds)
		if s.Drift != config.DefaultDrift || s.ShipLate || s.Hard != 0 || s.Global != 0 ||
			len(s.Spans) != 2 || s.Spans[0] != (local.Span{Hits: 1000}) || s.Spans[1] != (local.Span{Hits: tc.window}) ||
			len(s.Limits) != 2 || s.Limits[0] != 0 || s.Limits[1] != tc.tier {
			t.Errorf("limitSpec(%d, %d) = %+v", tc.limit, tc.seconds, s)
		}
	}
}
