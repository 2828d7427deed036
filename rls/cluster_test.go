package rls

import (
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
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
		c.SetApplier(svc.Store())
		c.SetSideApplier(ResourcePrefix, svc.Store())
		c.SetSender(meshSender{m, i})
		svc.Store().Attach(c, nil)
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
