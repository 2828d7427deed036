package replies

import "testing"

var benchDecision = Decision{Granted: 1, Remaining: 54, ResetAfterMs: 1000, Tiers: true, Tier: 1, TierLimit: 5,
	TierHits: 1, Burst: true, HardLimit: 100, GlobalLimit: NoLimit, DomainHitsLastSecond: 1, GlobalHitsLastSecond: 1}

func BenchmarkAppendDecision(b *testing.B) {
	for _, f := range []Format{JSON, Msgpack} {
		b.Run([]string{"json", "msgpack"}[f], func(b *testing.B) {
			w := NewWriter(f)
			buf := make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendDecision(w, buf[:0], &benchDecision)
			}
		})
	}
}
