package local

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"golang.org/x/time/rate"
)

// benchEngine returns an engine with a gcra resource "b/gcra" (a large burst,
// so the benchmark measures grants and rejections alike) and a two-tier
// resource "b/tiers".
func benchEngine() *Engine {
	return New(normal(&config.Config{Resources: map[string]*config.Resource{
		"b/gcra": {Kind: config.KindGCRA, Burst: 100, Count: 1000, Period: time.Second},
		"b/tiers": {Kind: config.KindTiers, Tiers: []config.Tier{
			{Limit: 50, Window: time.Second, Active: time.Second},
			{Limit: 500, Window: 5 * time.Second, Active: 5 * time.Second, Cooldown: 15 * time.Second},
		}},
	}}))
}

func domains(n int) []string {
	d := make([]string, n)
	for i := range d {
		d[i] = "user-" + strconv.Itoa(i)
	}
	return d
}

func benchDecide(b *testing.B, resource string, keys int, parallel bool) {
	e := benchEngine()
	ds := domains(keys)
	t0 := time.Unix(1_700_000_000, 0)
	// Warm every key so the benchmark measures steady state, not inserts.
	for i, d := range ds {
		if _, err := e.Request(t0.Add(time.Duration(i)), resource, d, 1, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		var d Decision
		for i := 0; i < b.N; i++ {
			// 10 µs of virtual time per decision: a steady 100k decisions/s.
			if err := e.Decide(&d, t0.Add(time.Duration(i)*10*time.Microsecond), resource, ds[i%keys], 1, 1); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	var seq atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1)) * 7919
		var d Decision
		for pb.Next() {
			i++
			if err := e.Decide(&d, t0.Add(time.Duration(i)*10*time.Microsecond), resource, ds[i%keys], 1, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkGCRA(b *testing.B) {
	for _, keys := range []int{1, 100_000} {
		for _, par := range []bool{false, true} {
			b.Run(name(keys, par), func(b *testing.B) { benchDecide(b, "b/gcra", keys, par) })
		}
	}
}

func BenchmarkTiers(b *testing.B) {
	for _, keys := range []int{1, 100_000} {
		for _, par := range []bool{false, true} {
			b.Run(name(keys, par), func(b *testing.B) { benchDecide(b, "b/tiers", keys, par) })
		}
	}
}

func name(keys int, par bool) string {
	s := "keys=" + strconv.Itoa(keys)
	if par {
		return s + "/parallel"
	}
	return s + "/serial"
}

// BenchmarkXRateBaseline is the yardstick of the issue: x/time/rate's AllowN
// over a map of 100k limiters behind one mutex, serial and parallel.
func BenchmarkXRateBaseline(b *testing.B) {
	const keys = 100_000
	ds := domains(keys)
	var mu sync.Mutex
	m := make(map[string]*rate.Limiter, keys)
	for _, d := range ds {
		m[d] = rate.NewLimiter(1000, 100)
	}
	t0 := time.Unix(1_700_000_000, 0)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			mu.Lock()
			m[ds[i%keys]].AllowN(t0.Add(time.Duration(i)*10*time.Microsecond), 1)
			mu.Unlock()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(1)) * 7919
			for pb.Next() {
				i++
				mu.Lock()
				m[ds[i%keys]].AllowN(t0.Add(time.Duration(i)*10*time.Microsecond), 1)
				mu.Unlock()
			}
		})
	})
}

// BenchmarkGCRAFewKeyBytes reports the heap bytes a gcra key costs in a
// store holding few (1,000 keys, about four in each of its shards): what
// an agent with many lightly used resources, or a simulated cluster of
// many agents, pays per key.
func BenchmarkGCRAFewKeyBytes(b *testing.B) { gcraKeyBytes(b, 1_000) }

// BenchmarkGCRAIdleKeyBytes reports the heap bytes one idle gcra key costs:
// 1,000,000 keys each spent once, heap measured before and after.
func BenchmarkGCRAIdleKeyBytes(b *testing.B) { gcraKeyBytes(b, 1_000_000) }

// gcraKeyBytes reports the heap bytes per key of an engine whose gcra
// resource holds keys, each spent once.
func gcraKeyBytes(b *testing.B, keys int) {
	ds := domains(keys)
	t0 := time.Unix(1_700_000_000, 0)
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		e := benchEngine()
		for _, d := range ds {
			_, _ = e.Request(t0, "b/gcra", d, 1, 1)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if e.Keys("b/gcra") != keys {
			b.Fatalf("tracked %d keys, want %d", e.Keys("b/gcra"), keys)
		}
		// The domain strings live in ds already; the store clones them, so
		// their bytes are part of the cost measured here.
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(keys), "bytes/key")
		runtime.KeepAlive(e)
	}
}

// benchBatch is how many decisions BenchmarkVsXRate runs of each kind in a
// row: short batches (a few ms) put the machine's drift on all three alike;
// batches of two full passes over the keys gave less steady ratios here.
var benchBatch = 10_000

// BenchmarkVsXRate alternates, in batches of benchBatch, gcra decisions, two-tier
// decisions and the x/time/rate yardstick over the same 100,000 keys, so that
// the machine's drift (this machine's speed wanders by 2× between runs) falls
// on all three alike; it reports each one's ns/decision and the ratios.
func BenchmarkVsXRate(b *testing.B) {
	const keys = 100_000
	batch := benchBatch
	e := benchEngine()
	ds := domains(keys)
	t0 := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	lim := make(map[string]*rate.Limiter, keys)
	for i, d := range ds {
		lim[d] = rate.NewLimiter(1000, 100)
		_, _ = e.Request(t0, "b/gcra", d, 1, 1)
		_, _ = e.Request(t0.Add(time.Duration(i)), "b/tiers", d, 1, 1)
	}
	var gcraNS, tiersNS, xrateNS time.Duration
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += batch {
		start := time.Now()
		var d Decision
		for k := 0; k < batch; k++ {
			_ = e.Decide(&d, t0.Add(time.Duration(i+k)*10*time.Microsecond), "b/gcra", ds[(i+k)%keys], 1, 1)
		}
		mid := time.Now()
		for k := 0; k < batch; k++ {
			_ = e.Decide(&d, t0.Add(time.Duration(i+k)*10*time.Microsecond), "b/tiers", ds[(i+k)%keys], 1, 1)
		}
		mid2 := time.Now()
		for k := 0; k < batch; k++ {
			mu.Lock()
			lim[ds[(i+k)%keys]].AllowN(t0.Add(time.Duration(i+k)*10*time.Microsecond), 1)
			mu.Unlock()
		}
		end := time.Now()
		gcraNS += mid.Sub(start)
		tiersNS += mid2.Sub(mid)
		xrateNS += end.Sub(mid2)
		i += batch
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(i) }
	b.ReportMetric(per(gcraNS), "gcra-ns/op")
	b.ReportMetric(per(tiersNS), "tiers-ns/op")
	b.ReportMetric(per(xrateNS), "xrate-ns/op")
	b.ReportMetric(per(gcraNS)/per(xrateNS), "gcra/xrate")
	b.ReportMetric(per(tiersNS)/per(xrateNS), "tiers/xrate")
}

// BenchmarkSettle is check now, charge later: a decision with a ticket,
// then its settle (half for less, half for more), per key of 1,000.
func BenchmarkSettle(b *testing.B) {
	for _, res := range []string{"b/gcra", "b/tiers"} {
		b.Run(res, func(b *testing.B) {
			e := benchEngine()
			ds := domains(1000)
			t0 := time.Unix(1_700_000_000, 0)
			b.ReportAllocs()
			var d Decision
			for i := 0; b.Loop(); i++ {
				at := t0.Add(time.Duration(i) * time.Millisecond)
				tk, err := e.DecideSettle(&d, at, res, ds[i%len(ds)], 2, 1)
				if err != nil {
					b.Fatal(err)
				}
				if tk != "" {
					if _, err := e.Settle(at, tk, 1+2*(i%2)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
