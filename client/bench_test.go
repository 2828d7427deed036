package client

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The client's own cost per call: against a real in-process agent (client,
// HTTP over the Unix socket and the agent's decision), against a stub that
// answers a canned reply (client and transport only), and with net/http and
// encoding/json as the baseline the transport choice was measured against.

const benchReply = `{"granted":1,"remaining":4,"retry_after_ms":0,"reset_after_ms":1000,"tier":1,"tier_limit":5,` +
	`"tier_hits":1,"burst":true,"hard_limit":0,"global_limit":0,"domain_hits_last_second":1,` +
	`"global_hits_last_second":1,"limited_by_hard":false,"limited_by_global":false,"shadow":false}`

func stubDecision(b *testing.B) string {
	reply := []byte(benchReply)
	return startStub(b, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(reply)
	})
}

func BenchmarkRequestAgent(b *testing.B) {
	a := startAgent(b, nil)
	c, _ := newClient(b, Config{Socket: a.sock})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := c.Request(ctx, "open/bench", "user-42"); err != nil || d.Granted != 1 || d.Degraded {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkRequestAgentParallel(b *testing.B) {
	a := startAgent(b, nil)
	c, _ := newClient(b, Config{Socket: a.sock})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if d, err := c.Request(ctx, "open/bench", "user-42"); err != nil || d.Degraded {
				b.Error(d, err)
				return
			}
		}
	})
}

func BenchmarkCheckAgent(b *testing.B) {
	a := startAgent(b, nil)
	c, _ := newClient(b, Config{Socket: a.sock})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := c.Check(ctx, "t/gcra", "user-42", Copies(0)); err != nil || d.Degraded {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkRequestStub(b *testing.B) {
	c, _ := newClient(b, Config{Socket: stubDecision(b)})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := c.Request(ctx, "api/search", "user-42"); err != nil || d.Granted != 1 {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkRequestDegraded(b *testing.B) {
	c, _ := newClient(b, Config{Socket: filepath.Join(shortTempDir(b), "gone.sock")})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := c.Request(ctx, "api/search", "user-42"); !d.Degraded {
			b.Fatal(d)
		}
	}
}

func BenchmarkDecodeDecision(b *testing.B) {
	body := []byte(benchReply)
	var r Reply
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := decodeDecision(body, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequest(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendRequest(buf[:0], "api/search", "user-42", 1, 1, Limit{})
	}
}

// BenchmarkBaselineNetHTTP is the same call as BenchmarkRequestStub made
// with net/http and encoding/json.
func BenchmarkBaselineNetHTTP(b *testing.B) {
	sock := stubDecision(b)
	hc := &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}},
		Timeout: 20 * time.Millisecond,
	}
	defer hc.CloseIdleConnections()
	body := []byte(`{"resource":"api/search","domain":"user-42","copies":1,"min_copies":1}`)
	var r struct {
		Granted        int  `json:"granted"`
		Remaining      int  `json:"remaining"`
		RetryAfterMs   int  `json:"retry_after_ms"`
		ResetAfterMs   int  `json:"reset_after_ms"`
		Tier           int  `json:"tier"`
		TierLimit      int  `json:"tier_limit"`
		TierHits       int  `json:"tier_hits"`
		Burst          bool `json:"burst"`
		HardLimit      int  `json:"hard_limit"`
		GlobalLimit    int  `json:"global_limit"`
		DomainHits     int  `json:"domain_hits_last_second"`
		GlobalHits     int  `json:"global_hits_last_second"`
		LimitedByHard  bool `json:"limited_by_hard"`
		LimitedByGlobl bool `json:"limited_by_global"`
		Shadow         bool `json:"shadow"`
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := hc.Post("http://obol/v1/request", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(data, &r); err != nil || r.Granted != 1 {
			b.Fatal(err)
		}
	}
}
