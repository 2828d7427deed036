package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

var testResources = []string{"bench/gcra", "bench/tiers"}

func TestBuildBodiesRequest(t *testing.T) {
	for _, enc := range []encoding{encJSON, encMsgpack} {
		bodies, err := buildBodies(scenario{enc: enc}, testResources, 1000, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(bodies) != 1000 {
			t.Fatalf("%s: %d bodies, want one per domain", enc, len(bodies))
		}
		seen := map[string]bool{}
		for i, b := range bodies {
			var r wireRequest
			if err := enc.unmarshal(b, &r); err != nil {
				t.Fatalf("%s body %d: %v", enc, i, err)
			}
			if r != requestFor(testResources, i) || r.Copies != 1 || r.MinCopies != 1 {
				t.Fatalf("%s body %d: %+v", enc, i, r)
			}
			seen[r.Domain] = true
		}
		if len(seen) != 1000 {
			t.Errorf("%s: %d distinct domains, want 1000", enc, len(seen))
		}
	}
	// The field names are the API's, in both encodings.
	j, _ := buildBodies(requestJSON, testResources, 1, 1)
	if got := string(j[0]); got != `{"resource":"bench/gcra","domain":"user-0","copies":1,"min_copies":1}` {
		t.Errorf("JSON body %s", got)
	}
	m, _ := buildBodies(requestMsgpack, testResources, 1, 1)
	var asMap map[string]any
	if err := msgpack.Unmarshal(m[0], &asMap); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"resource", "domain", "copies", "min_copies"} {
		if _, ok := asMap[k]; !ok || len(asMap) != 4 {
			t.Errorf("MessagePack body %v: want the keys resource, domain, copies, min_copies", asMap)
		}
	}
}

func TestBuildBodiesBatch(t *testing.T) {
	const domains, items = 50, 20
	for _, enc := range []encoding{encJSON, encMsgpack} {
		sc := scenario{enc: enc, batch: items}
		bodies, err := buildBodies(sc, testResources, domains, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(bodies) != batchBodyCount {
			t.Fatalf("%s: %d batch bodies, want %d", enc, len(bodies), batchBodyCount)
		}
		hits := map[string]int{}
		for i, b := range bodies {
			if len(b) > 64<<10 {
				t.Fatalf("%s batch %d: %d bytes, over the agent's body limit", enc, i, len(b))
			}
			var br wireBatch
			if err := enc.unmarshal(b, &br); err != nil {
				t.Fatalf("%s batch %d: %v", enc, i, err)
			}
			if len(br.Requests) != items {
				t.Fatalf("%s batch %d: %d items", enc, i, len(br.Requests))
			}
			for _, r := range br.Requests {
				n, ok := domainIndex(r.Domain)
				if !ok || n < 0 || n >= domains {
					t.Fatalf("%s: domain %q outside the %d domains", enc, r.Domain, domains)
				}
				if r != requestFor(testResources, n) {
					t.Fatalf("%s: item %+v is not the request of its domain", enc, r)
				}
				hits[r.Domain]++
			}
		}
		// Uniform: 20480 draws over 50 domains, 410 each on average
		// (standard deviation 20).
		if len(hits) != domains {
			t.Errorf("%s: %d domains drawn, want all %d", enc, len(hits), domains)
		}
		for d, n := range hits {
			if n < 310 || n > 510 {
				t.Errorf("%s: domain %s drawn %d times, expected about 410", enc, d, n)
			}
		}
		again, _ := buildBodies(sc, testResources, domains, 7)
		if !bytes.Equal(again[5], bodies[5]) {
			t.Errorf("%s: the same seed built different batches", enc)
		}
		other, _ := buildBodies(sc, testResources, domains, 8)
		if bytes.Equal(other[5], bodies[5]) {
			t.Errorf("%s: another seed built the same batches", enc)
		}
	}
}

// domainIndex is the i of domainName(i).
func domainIndex(d string) (int, bool) {
	s, ok := strings.CutPrefix(d, "user-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

func TestBuildBodiesRejects(t *testing.T) {
	if _, err := buildBodies(requestJSON, nil, 10, 1); err == nil {
		t.Error("no resources: no error")
	}
	if _, err := buildBodies(requestJSON, testResources, 0, 1); err == nil {
		t.Error("no domains: no error")
	}
}

func TestKeysBody(t *testing.T) {
	b, err := keysBody(encJSON, "bench/keys", 1000, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"requests":[{"resource":"bench/keys","domain":"key-1000","copies":1,"min_copies":1},` +
		`{"resource":"bench/keys","domain":"key-1001","copies":1,"min_copies":1},` +
		`{"resource":"bench/keys","domain":"key-1002","copies":1,"min_copies":1}]}`
	if string(b) != want {
		t.Errorf("got %s", b)
	}
	one, _ := keysBody(encJSON, "bench/keys", 7, 0)
	if string(one) != `{"resource":"bench/keys","domain":"key-7","copies":1,"min_copies":1}` {
		t.Errorf("single: %s", one)
	}
	full, _ := keysBody(encJSON, "bench/keys", 999_000, rssBatch)
	if len(full) > 64<<10 {
		t.Errorf("a batch of %d keys is %d bytes, over the agent's 64 KiB body limit", rssBatch, len(full))
	}
}

func TestCheckReply(t *testing.T) {
	for _, tc := range []struct {
		sc            scenario
		body          any
		dec, gr       int
		wantErrSubstr string
	}{
		{sc: requestJSON, body: map[string]any{"granted": 1, "remaining": 4}, dec: 1, gr: 1, wantErrSubstr: ""},
		{sc: requestJSON, body: map[string]any{"granted": 0, "retry_after_ms": 200}, dec: 1, gr: 0, wantErrSubstr: ""},
		{sc: requestJSON, body: map[string]any{"remaining": 4}, dec: 0, gr: 0, wantErrSubstr: "without granted"},
		{sc: requestJSON, body: map[string]any{"error": map[string]any{"code": "bad_request", "message": "x"}}, dec: 0, gr: 0, wantErrSubstr: "bad_request"},
		{sc: requestMsgpack, body: map[string]any{"granted": 2}, dec: 1, gr: 1, wantErrSubstr: ""},
		{sc: scenario{enc: encJSON, batch: 2}, body: map[string]any{"responses": []any{map[string]any{"granted": 1}, map[string]any{"granted": 0}}}, dec: 2, gr: 1, wantErrSubstr: ""},
		{sc: scenario{enc: encMsgpack, batch: 2}, body: map[string]any{"responses": []any{map[string]any{"granted": 1}, map[string]any{"granted": 1}}}, dec: 2, gr: 2, wantErrSubstr: ""},
		{sc: scenario{enc: encJSON, batch: 3}, body: map[string]any{"responses": []any{map[string]any{"granted": 1}}}, dec: 0, gr: 0, wantErrSubstr: "1 responses, want 3"},
		{sc: scenario{enc: encJSON, batch: 2}, body: map[string]any{"responses": []any{map[string]any{"granted": 1}, map[string]any{"error": map[string]any{"code": "unknown_resource"}}}}, dec: 0, gr: 0, wantErrSubstr: "batch item 1: error unknown_resource"},
	} {
		body, err := tc.sc.enc.marshal(tc.body)
		if err != nil {
			t.Fatal(err)
		}
		dec, gr, err := checkReply(tc.sc, body)
		if tc.wantErrSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSubstr) {
				t.Errorf("%s %v: error %v, want one with %q", tc.sc, tc.body, err, tc.wantErrSubstr)
			}
			continue
		}
		if err != nil || dec != tc.dec || gr != tc.gr {
			t.Errorf("%s %v: %d decisions, %d granted, %v; want %d, %d", tc.sc, tc.body, dec, gr, err, tc.dec, tc.gr)
		}
	}
	if _, _, err := checkReply(requestMsgpack, []byte(`{"granted":1}`)); err == nil {
		t.Error("a JSON reply passes as MessagePack")
	}
}

func TestClassifyProbe(t *testing.T) {
	jsonErr := func(code, msg string) []byte {
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
		return b
	}
	msgpackErr := func(code, msg string) []byte {
		b, _ := msgpack.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
		return b
	}
	ok, _ := encMsgpack.marshal(map[string]any{"granted": 1})
	for _, tc := range []struct {
		name        string
		sc          scenario
		status      int
		ctype       string
		body        []byte
		unavailable string // a substring, "" for none
		err         bool
	}{
		{name: "served", sc: requestMsgpack, status: 200, ctype: "application/msgpack", body: ok, unavailable: "", err: false},
		{name: "no batch endpoint (JSON error)", sc: batchJSON, status: 404, ctype: "application/json", body: jsonErr("not_found", "no endpoint POST /v1/batch"), unavailable: "not served", err: false},
		{name: "no batch endpoint (MessagePack error)", sc: batchMsgpack, status: 404, ctype: "application/msgpack", body: msgpackErr("not_found", "no endpoint POST /v1/batch"), unavailable: "not served", err: false},
		{name: "MessagePack refused", sc: requestMsgpack, status: 400, ctype: "application/json", body: jsonErr("bad_request", "Content-Type: application/msgpack is not supported yet; send JSON"), unavailable: "does not accept MessagePack", err: false},
		{name: "JSON reply to Accept msgpack", sc: requestMsgpack, status: 200, ctype: "application/json", body: []byte(`{"granted":1}`), unavailable: "not implemented", err: false},
		{name: "unknown resource", sc: requestJSON, status: 404, ctype: "application/json", body: jsonErr("unknown_resource", "no resource bench/x"), unavailable: "", err: true},
		{name: "a bug", sc: requestJSON, status: 500, ctype: "application/json", body: jsonErr("internal", "boom"), unavailable: "", err: true},
		{name: "malformed 200", sc: batchJSON, status: 200, ctype: "application/json", body: []byte(`{"responses":[]}`), unavailable: "", err: true},
	} {
		u, err := classifyProbe(tc.sc, tc.status, []byte(tc.ctype), tc.body)
		if (tc.unavailable == "") != (u == "") || !strings.Contains(u, tc.unavailable) {
			t.Errorf("%s: unavailable %q, want one with %q", tc.name, u, tc.unavailable)
		}
		if (err != nil) != tc.err {
			t.Errorf("%s: error %v, want an error: %v", tc.name, err, tc.err)
		}
	}
}

func TestMedianByLength(t *testing.T) {
	got := medianByLength([][]byte{[]byte("aaaa"), []byte("a"), []byte("aaa"), []byte("aa")})
	if string(got) != "aa" {
		t.Errorf("got %q, want the lower median aa", got)
	}
}

func TestMetricValue(t *testing.T) {
	text := []byte("# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_goroutines_total{x=\"y\"} 7\n")
	if v, ok := metricValue(text, "go_goroutines"); !ok || v != 42 {
		t.Errorf("got %d, %v", v, ok)
	}
	if _, ok := metricValue(text, "go_threads"); ok {
		t.Error("found a metric that is not there")
	}
}

func TestStartedAddr(t *testing.T) {
	line := `{"time":"2025-01-01T00:00:00Z","level":"INFO","msg":"obol agent started","socket":"/x/agent.sock","http":"127.0.0.1:41234","config":"x","resources":3}`
	if a, ok := startedAddr(line); !ok || a != "127.0.0.1:41234" {
		t.Errorf("got %q, %v", a, ok)
	}
	if _, ok := startedAddr(`{"msg":"obol agent stopped"}`); ok {
		t.Error("a stop line read as a start")
	}
}
