package local_test

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// clustered_test.go runs the engine attached to package reconcile's
// cluster, which imports this package: an external test.

// BenchmarkClustered is a decision on an engine attached to a cluster (no
// peers): what recording each committed hit for shipping costs on top of
// BenchmarkGCRA and BenchmarkTiers. The cluster is stepped (and its records
// shipped to nowhere) every 25,000 decisions, a 250 ms tick at this rate.
func BenchmarkClustered(b *testing.B) {
	for _, res := range []string{"b/gcra", "b/tiers"} {
		b.Run(res[2:], func(b *testing.B) {
			e := local.BenchEngine()
			c := reconcile.New(reconcile.Options{Name: "bench"})
			e.Attach(c)
			ds := local.Domains(1000)
			t0 := time.Unix(1_700_000_000, 0)
			var d local.Decision
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := t0.Add(time.Duration(i) * 10 * time.Microsecond)
				if err := e.Decide(&d, t, res, ds[i%len(ds)], 1, 1); err != nil {
					b.Fatal(err)
				}
				if i%25_000 == 0 {
					c.Step(t)
				}
			}
		})
	}
}
