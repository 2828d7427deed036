package rls

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// abuse_test.go holds the regression tests of what a request or a peer
// could make the counters do: fill the store past its cap, wrap a count,
// make replaces quadratic, send huge entries and label values.

const capConfig = `
domain: v
descriptors:
  - key: ip
    rate_limit: {unit: year, requests_per_unit: 1000}
  - key: burst
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: victim
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: yearly
    rate_limit: {unit: year, requests_per_unit: 10}
  - key: det
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
`

func capService(t testing.TB, opt Options) *Service {
	t.Helper()
	cfg, err := Parse([]Source{{Name: "v.yaml", Data: []byte(capConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	return New(cfg, opt)
}

func one(d *rlv3.RateLimitDescriptor) *rlpb.RateLimitRequest {
	return &rlpb.RateLimitRequest{Domain: "v", Descriptors: []*rlv3.RateLimitDescriptor{d}}
}

// TestRLSStoreFullStillLimits: once the store holds its cap of counters
// whose windows have not ended (a year's), a new key is still limited: a
// key limited to 10 a minute is refused on its 11th hit.
func TestRLSStoreFullStillLimits(t *testing.T) {
	s := capService(t, Options{MaxKeys: 64})
	for i := range 500 {
		decide(t, s, t0, one(desc("ip", strconv.Itoa(i))))
	}
	if k := s.Store().Keys(); k != 64 {
		t.Fatalf("store keeps %d keys, want its cap of 64", k)
	}
	for i := 1; i <= 11; i++ {
		r := decide(t, s, t0.Add(time.Duration(i)*time.Second), one(desc("victim", "x")))
		want := rlpb.RateLimitResponse_OK
		if i == 11 {
			want = rlpb.RateLimitResponse_OVER_LIMIT
		}
		if r.OverallCode != want {
			t.Fatalf("hit %d of a key limited to 10/minute, store full: %v, want %v", i, r.OverallCode, want)
		}
	}
	if s.Store().Overflowed.Load() == 0 {
		t.Fatal("no decision counted in the overflow table")
	}
	// A peer's counts of a key past the cap are counted too.
	s.Store().ApplyCount("rls:10", "6v_yearly_peer_", 1, t0.UnixMilli(), 1200, 11, t0.UnixMilli())
	if r := decide(t, s, t0, one(desc("yearly", "peer"))); r.OverallCode != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("a peer's 11 hits of a key past the cap, then one: %v, want OVER_LIMIT", r.OverallCode)
	}
}

// TestRLSStoreEvictsIdleKeys: at the cap, keys whose window has ended
// make room for new ones, which are then stored (not overflowed).
func TestRLSStoreEvictsIdleKeys(t *testing.T) {
	const n = 1280 // 20 a shard
	s := capService(t, Options{MaxKeys: n})
	for i := range n {
		decide(t, s, t0, one(desc("burst", strconv.Itoa(i))))
	}
	later := t0.Add(time.Minute) // every one of those windows has ended
	for i := range n {
		decide(t, s, later, one(desc("victim", strconv.Itoa(i))))
	}
	st := s.Store()
	// A key whose shard and the next ones have no idle counter left
	// overflows (counted, still limited) until Sweep.
	if st.Keys() != n || st.Overflowed.Load() > n/20 || st.Evicted.Load()+st.Overflowed.Load() != n {
		t.Fatalf("keys %d, evicted %d, overflowed %d: want %d stored, almost all in idle keys' places", st.Keys(), st.Evicted.Load(), st.Overflowed.Load(), n)
	}
	t.Logf("%d new keys at the cap: %d took an idle key's place, %d overflowed", n, st.Evicted.Load(), st.Overflowed.Load())
	st.Sweep(later)
	if st.Keys() != int(st.Evicted.Load()) {
		t.Fatalf("after Sweep: %d keys, want the %d new ones stored", st.Keys(), st.Evicted.Load())
	}
}

// TestRLSStoreOverflowFalseDenials measures the overflow table's false
// denials: 20,000 keys past a full store each make up to their limit of 10
// hits in one minute; a refusal of a key whose own count is within its
// limit is a false one. Never an under-count: the 11th hit of every key is
// refused.
func TestRLSStoreOverflowFalseDenials(t *testing.T) {
	s := capService(t, Options{MaxKeys: 16})
	for i := range 16 {
		decide(t, s, t0, one(desc("ip", strconv.Itoa(i))))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const keys = 20_000
	hits, falseDenied := 0, 0
	for i := range keys {
		n := 1 + rng.IntN(10)
		for j := 1; j <= n; j++ {
			hits++
			if decide(t, s, t0, one(desc("victim", "k"+strconv.Itoa(i)))).OverallCode != rlpb.RateLimitResponse_OK {
				falseDenied++
			}
		}
		if decide(t, s, t0, one(desc("victim", "k"+strconv.Itoa(i)))).OverallCode == rlpb.RateLimitResponse_OK && n == 10 {
			t.Fatalf("key %d: 11th hit granted past the cap (under-count)", i)
		}
	}
	share := float64(falseDenied) / float64(hits)
	t.Logf("overflow table: %d keys, %d hits within their limits, %d refused (%.2f%%)", keys, hits, falseDenied, 100*share)
	if share > 0.05 {
		t.Fatalf("false denials %.2f%% of hits, want under 5%% at %d keys", 100*share, keys)
	}
	// Once the minute has ended, the sweep gives the tables' memory back.
	st := s.Store()
	st.Sweep(t0.Add(time.Minute))
	for i := range st.shards {
		if st.shards[i].over[2] != nil {
			t.Fatalf("shard %d keeps its minute overflow table after the minute", i)
		}
	}
}

// TestRLSHitsAddendWrapRefused: a hits_addend of 2^64−11 used to wrap an
// over-limit counter back to OK; it is refused (InvalidArgument) and the
// key stays over its limit.
func TestRLSHitsAddendWrapRefused(t *testing.T) {
	s := capService(t, Options{})
	for range 11 {
		decide(t, s, t0, one(desc("victim", "x")))
	}
	d := desc("victim", "x")
	d.HitsAddend = wrapperspb.UInt64(math.MaxUint64 - 10)
	err := s.Decide(t0, one(d), GetReply())
	if !errors.Is(err, ErrInvalidArgument) || Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "hits_addend") {
		t.Fatalf("hits_addend 2^64−11: %v, want an invalid argument naming hits_addend", err)
	}
	// The largest accepted, many times: the count saturates, never wraps.
	d.HitsAddend = wrapperspb.UInt64(MaxHitsAddend)
	for i := range 5 {
		if r := decide(t, s, t0, one(d)); r.OverallCode != rlpb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("call %d of hits_addend 2^32−1: %v, want OVER_LIMIT", i, r.OverallCode)
		}
	}
	if r := decide(t, s, t0, one(desc("victim", "x"))); r.OverallCode != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("after the large hits: %v, want OVER_LIMIT", r.OverallCode)
	}
	// StopIncrementOverLimit's check adds too.
	s2 := capService(t, Options{StopIncrementOverLimit: true})
	s2.Store().add([]byte("2v_victim_y_"), windowStart(t0.Unix(), 60), math.MaxUint64-5, nil, t0.UnixMilli())
	d2 := desc("victim", "y")
	d2.HitsAddend = wrapperspb.UInt64(MaxHitsAddend)
	if r := decide(t, s2, t0, one(d2)); r.OverallCode != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("stop increment, count near 2^64: %v, want OVER_LIMIT", r.OverallCode)
	}
}

// TestRLSPeerClaimClamped: a peer's count of 2^62, then three more, used
// to wrap the key back under its limit; each is clamped to the limit + 1
// and the sum saturates: the key stays over, with its count small.
func TestRLSPeerClaimClamped(t *testing.T) {
	s := capService(t, Options{})
	at := t0.UnixMilli()
	for range 4 {
		s.Store().ApplyCount("rls:10", "6v_yearly_x_", 1, at, 1200, 1<<62, at)
	}
	if c := s.Store().add([]byte("6v_yearly_x_"), windowStart(t0.Unix(), 365*86400), 0, nil, at); c != 44 {
		t.Fatalf("count after 4 claims of 2^62 under a limit of 10: %d, want 4 × 11", c)
	}
	if r := decide(t, s, t0, one(desc("yearly", "x"))); r.OverallCode != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("after the claims: %v, want OVER_LIMIT", r.OverallCode)
	}
}

// FuzzStoreCountNeverDecreases: any sequence of hits and peers' counts of
// one key in one window never makes its count smaller.
func FuzzStoreCountNeverDecreases(f *testing.F) {
	f.Add(uint64(math.MaxUint64-11), uint64(12), int64(1<<62), uint64(5))
	f.Add(uint64(1), uint64(2), int64(3), uint64(4))
	f.Fuzz(func(t *testing.T, a, b uint64, peer int64, c uint64) {
		st := NewStore(0)
		key := []byte("2v_victim_x_")
		start := windowStart(t0.Unix(), 60)
		ms := t0.UnixMilli()
		prev := uint64(0)
		step := func(after uint64, what string) {
			if after < prev {
				t.Fatalf("%s: count went from %d down to %d", what, prev, after)
			}
			prev = after
		}
		step(st.add(key, start, a, nil, ms), "add a")
		step(st.add(key, start, b, nil, ms), "add b")
		st.ApplyCount("rls:10", string(key), 1, ms, 1200, peer, ms)
		step(st.add(key, start, 0, nil, ms), "peer")
		step(st.add(key, start, c, nil, ms), "add c")
	})
}

func TestRLSRequestBounds(t *testing.T) {
	s := capService(t, Options{})
	big := strings.Repeat("x", 4<<20)
	many := make([]*rlv3.RateLimitDescriptor, DefaultMaxDescriptors+1)
	for i := range many {
		many[i] = desc("victim", strconv.Itoa(i))
	}
	wide := &rlv3.RateLimitDescriptor{}
	for range DefaultMaxEntries + 1 {
		wide.Entries = append(wide.Entries, &rlv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	for _, tc := range []struct {
		name string
		req  *rlpb.RateLimitRequest
		want string
	}{
		{"TestRLSDescriptorsPerRequestCapped", &rlpb.RateLimitRequest{Domain: "v", Descriptors: many}, "257 descriptors, at most 256 per request"},
		{"TestRLSEntriesPerDescriptorCapped", one(wide), "descriptor 0 has 17 entries, at most 16"},
		{"TestRLS4MBValueRefused", one(desc("victim", big)), "descriptor 0 entry 0: value is 4194304 bytes, at most 4096"},
		{"TestRLS4MBKeyRefused", one(desc(big, "x")), "descriptor 0 entry 0: key is 4194304 bytes, at most 4096"},
		{"TestRLS4MBOverrideRefused", &rlpb.RateLimitRequest{Domain: "v", Descriptors: []*rlv3.RateLimitDescriptor{{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "victim", Value: big}},
			Limit:   &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: 2}}}}, "value is 4194304 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Decide(t0, tc.req, GetReply())
			if !errors.Is(err, ErrInvalidArgument) || Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid argument containing %q", err, tc.want)
			}
		})
	}
	if k := s.Store().Keys(); k != 0 {
		t.Fatalf("refused requests left %d keys", k)
	}
	// At the bounds: accepted.
	edge := make([]*rlv3.RateLimitDescriptor, DefaultMaxDescriptors)
	for i := range edge {
		edge[i] = desc("victim", strings.Repeat("y", DefaultMaxEntryBytes-len(strconv.Itoa(i)))+strconv.Itoa(i))
	}
	if err := s.Decide(t0, &rlpb.RateLimitRequest{Domain: "v", Descriptors: edge}, GetReply()); err != nil {
		t.Fatalf("a request at every bound: %v", err)
	}
}

// TestRLSDetailedMetricBounded: 20 values of 1 MiB (under a raised
// MaxEntryBytes) give labels of at most maxLabel bytes, distinct; 2,000
// values give at most maxDetailed series, the rest in the limit's own.
func TestRLSDetailedMetricBounded(t *testing.T) {
	s := capService(t, Options{MaxEntryBytes: 2 << 20})
	for i := range 20 {
		decide(t, s, t0, one(desc("det", strings.Repeat("m", 1<<20)+strconv.Itoa(i))))
	}
	for i := range 2000 {
		decide(t, s, t0, one(desc("det", strconv.Itoa(i))))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Stats())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]bool{}
	size := 0
	for _, mf := range mfs {
		if mf.GetName() != "ratelimit_service_rate_limit_total_hits" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				size += len(lp.GetValue())
				if lp.GetName() == "key" {
					if len(lp.GetValue()) > maxLabel {
						t.Fatalf("a label of %d bytes, want at most %d", len(lp.GetValue()), maxLabel)
					}
					labels[lp.GetValue()] = true
				}
			}
		}
	}
	// the limits' own series, plus maxDetailed detailed ones
	if n := len(labels); n > len(s.Config().Limits())+maxDetailed {
		t.Fatalf("%d series, want at most %d", n, len(s.Config().Limits())+maxDetailed)
	}
	long := 0
	for l := range labels {
		if strings.Contains(l, "#") {
			long++
		}
	}
	if long != 20 {
		t.Fatalf("%d distinct shortened labels, want the 20 long values kept apart", long)
	}
	if size > 1<<20 {
		t.Fatalf("labels of one metric total %d bytes", size)
	}
}

// dropReplacedQuadratic is the rule as it was first written: each named
// limit against every matched one, at any size (dropPairwise).
func dropReplacedQuadratic(items []item) { dropPairwise(items, make([]bool, len(items))) }

// TestRLSReplacesLinearSameResults: the linear replaces drops exactly
// what the quadratic one did, on a table of hand-made cases and on random
// mixes of limits, small (no allocation path) and large.
func TestRLSReplacesLinearSameResults(t *testing.T) {
	lim := func(id int, name string, repl ...string) *Limit {
		return &Limit{Name: name, Replaces: repl, id: id}
	}
	a, b, c := lim(0, "a", "b"), lim(1, "b", "a"), lim(2, "c")
	u := lim(3, "", "c")
	self := lim(4, "s", "s")
	anon := lim(5, "")
	cfg := &Config{limits: []*Limit{a, b, c, u, self, anon}}
	cases := [][]*Limit{
		{a}, {b}, {a, b}, {c}, {c, u}, {u, c, c}, {self}, {anon, nil, c},
		{nil, nil}, {a, c, b, u}, {c, c, c, c, c, c, c, c, u},
		{a, a, a, a, a, a, a, a, a, b}, {nil, c, nil, c, nil, c, nil, c, nil, c},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	all := []*Limit{a, b, c, u, self, anon, nil}
	for range 200 {
		n := 1 + rng.IntN(30)
		ls := make([]*Limit, n)
		for i := range ls {
			ls[i] = all[rng.IntN(len(all))]
		}
		cases = append(cases, ls)
	}
	for k, ls := range cases {
		got, want := make([]item, len(ls)), make([]item, len(ls))
		for i, l := range ls {
			got[i].limit, want[i].limit = l, l
		}
		dropReplaced(got, cfg)
		dropReplacedQuadratic(want)
		for i := range got {
			if got[i].limit != want[i].limit {
				t.Fatalf("case %d (%d limits), item %d: kept %v, want %v", k, len(ls), i, got[i].limit, want[i].limit)
			}
		}
	}
}

const replacesConfig = `
domain: r
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1000, name: named}
  - key: r
    rate_limit: {unit: minute, requests_per_unit: 1000, replaces: [{name: named}]}
`

// BenchmarkReplaces is one request of n descriptors hitting a named limit
// that another descriptor's limit replaces (envoyproxy/ratelimit's
// quadratic case, 50,000 took 10 s): the time per descriptor stays flat.
func BenchmarkReplaces(b *testing.B) {
	cfg, err := Parse([]Source{{Name: "r.yaml", Data: []byte(replacesConfig)}})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1_000, 10_000, 50_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := New(cfg, Options{MaxDescriptors: n})
			ds := make([]*rlv3.RateLimitDescriptor, n)
			for i := range ds {
				ds[i] = desc("k", strconv.Itoa(i))
			}
			ds[n-1] = desc("r", "x")
			req := &rlpb.RateLimitRequest{Domain: "r", Descriptors: ds}
			b.ReportAllocs()
			for b.Loop() {
				r := GetReply()
				if err := s.Decide(t0, req, r); err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/descriptor")
		})
	}
}

// TestRLSHTTPHitsAddendWrapRefused replays the wrap through /json: the
// body is refused (400 naming hits_addend) and the key stays over.
func TestRLSHTTPHitsAddendWrapRefused(t *testing.T) {
	srv := NewServer(capService(t, Options{}), func() time.Time { return t0 })
	h := srv.HTTPHandler()
	post := func(body string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/json", strings.NewReader(body)))
		return w.Code, w.Body.String()
	}
	for range 11 {
		post(`{"domain":"v","descriptors":[{"entries":[{"key":"yearly","value":"w"}]}]}`)
	}
	code, body := post(`{"domain":"v","descriptors":[{"entries":[{"key":"yearly","value":"w"}],"hits_addend":"18446744073709551605"}]}`)
	if code != 400 || !strings.Contains(body, "hits_addend 18446744073709551605, at most 4294967295") {
		t.Fatalf("wrapping hits_addend: %d %q, want 400 naming the bound", code, body)
	}
	if code, _ := post(`{"domain":"v","descriptors":[{"entries":[{"key":"yearly","value":"w"}]}]}`); code != 429 {
		t.Fatalf("after the wrap attempt: %d, want 429", code)
	}
}
