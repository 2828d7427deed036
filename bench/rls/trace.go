package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// trace.go is the differential's input: one config directory in
// envoyproxy/ratelimit's format and one seeded request trace, both read by
// obol and by envoyproxy/ratelimit alike.

// configFiles is the differential's config directory: two domains, nested
// descriptors, a key without a value (one counter per value), a trailing
// wildcard (the only place envoyproxy/ratelimit allows one), unlimited,
// shadow_mode, a named limit and one that replaces it, a limit of zero, and
// the units second and minute. The bench's domain is the load's: a limit no
// rate here reaches, so that every service takes the same path (OK) at
// whatever rate it reaches.
var configFiles = map[string]string{
	"api.yaml": `domain: api
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 5
    descriptors:
      - key: path
        value: /login
        rate_limit:
          unit: second
          requests_per_unit: 2
      - key: path
        value: /admin/*
        rate_limit:
          unit: minute
          requests_per_unit: 3
      - key: path
        rate_limit:
          unit: second
          requests_per_unit: 4
  - key: user
    value: vip
    rate_limit:
      unlimited: true
  - key: user
    value: tester
    shadow_mode: true
    rate_limit:
      unit: second
      requests_per_unit: 1
  - key: plan
    value: free
    rate_limit:
      name: free
      unit: minute
      requests_per_unit: 10
  - key: plan
    value: trial
    rate_limit:
      unit: minute
      requests_per_unit: 4
      replaces:
        - name: free
`,
	"search.yaml": `domain: search
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 3
  - key: remote_address
    value: 10.0.0.*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: generic_key
    value: banned
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: generic_key
    value: team
    descriptors:
      - key: member
        rate_limit:
          unit: minute
          requests_per_unit: 6
`,
	"bench.yaml": `domain: bench
descriptors:
  - key: client
    rate_limit:
      unit: second
      requests_per_unit: 100000
`,
}

// writeConfig writes configFiles as envoyproxy/ratelimit's runtime layout
// expects them, root/ratelimit/config/*.yaml (RUNTIME_ROOT=root,
// RUNTIME_SUBDIRECTORY=ratelimit, RUNTIME_APPDIRECTORY=config), and returns
// that directory, which obol's --rls-config reads too.
func writeConfig(root string) (string, error) {
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, text := range configFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// step is one request of the trace, sent in tick (the trace's second).
type step struct {
	tick int
	req  *rlsv3.RateLimitRequest
}

// entries is a descriptor's key/value pairs, "k=v,k=v".
type entries string

// descriptorPool is what the trace draws descriptors from, per domain: every
// branch of configFiles (exact, default, wildcard, nested, the fallbacks),
// and descriptors no limit matches (too deep, unknown key).
var descriptorPool = map[string][]entries{
	"api": {
		"user=alice", "user=bob", "user=vip", "user=tester",
		"user=alice,path=/login", "user=bob,path=/login", "user=alice,path=/admin/users",
		"user=bob,path=/admin/keys", "user=alice,path=/home", "user=bob,path=/docs",
		"user=vip,path=/login", "plan=free", "plan=trial", "plan=gold",
		"user=alice,path=/login,extra=1",
	},
	"search": {
		"remote_address=192.168.1.1", "remote_address=192.168.1.2",
		"remote_address=10.0.0.5", "remote_address=10.0.0.77", "generic_key=banned",
		"generic_key=team,member=ann", "generic_key=team,member=joe", "generic_key=team",
		"generic_key=other",
	},
	"unknown": {"user=alice"},
}

// descriptor builds entries into a descriptor.
func (e entries) descriptor() *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for kv := range strings.SplitSeq(string(e), ",") {
		k, v, _ := strings.Cut(kv, "=")
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d
}

// traceSpec sizes a trace.
type traceSpec struct {
	seed    uint64
	ticks   int // seconds the trace spans
	perTick int // requests per second
}

// makeTrace returns the trace for spec: perTick requests in each of ticks
// seconds, each to a domain (rarely one no config names) with one to three
// descriptors; a request hits_addend of 0 (meaning 1), 1, 2 or 3; now and
// then a descriptor's own hits_addend (0 included: a check that counts
// nothing) or a limit override of the request (per second or per minute).
// The same seed gives the same trace.
func makeTrace(spec traceSpec) []step {
	r := rand.New(rand.NewPCG(spec.seed, spec.seed^0x9e3779b97f4a7c15))
	domains := []string{"api", "api", "api", "search", "search", "unknown"}
	addends := []uint32{0, 1, 1, 1, 1, 2, 3}
	var out []step
	for tick := range spec.ticks {
		for range spec.perTick {
			domain := domains[r.IntN(len(domains))]
			pool := descriptorPool[domain]
			req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: addends[r.IntN(len(addends))]}
			for range 1 + r.IntN(3) {
				d := pool[r.IntN(len(pool))].descriptor()
				switch x := r.IntN(20); {
				case x == 0:
					d.HitsAddend = wrapperspb.UInt64(uint64(r.IntN(3)))
				case x == 1:
					d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_SECOND}
				case x == 2:
					d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 8, Unit: typev3.RateLimitUnit_MINUTE}
				}
				req.Descriptors = append(req.Descriptors, d)
			}
			out = append(out, step{tick: tick, req: req})
		}
	}
	return out
}

// describe renders a request for a mismatch report.
func describe(req *rlsv3.RateLimitRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain=%s hits_addend=%d", req.Domain, req.HitsAddend)
	for _, d := range req.Descriptors {
		b.WriteString(" [")
		for i, e := range d.Entries {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%s", e.Key, e.Value)
		}
		if d.HitsAddend != nil {
			fmt.Fprintf(&b, " hits_addend=%d", d.HitsAddend.Value)
		}
		if d.Limit != nil {
			fmt.Fprintf(&b, " limit=%d/%s", d.Limit.RequestsPerUnit, d.Limit.Unit)
		}
		b.WriteByte(']')
	}
	return b.String()
}
