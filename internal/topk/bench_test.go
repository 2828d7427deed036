package topk

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchKeys are n keys of about 20 bytes.
func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "domain-%08d.example", i)
	}
	return keys
}

// BenchmarkAdd is the record path: keys the summary holds (a few heavy
// domains), a stream where every key is new (each add takes over a
// counter and copies its key), and keys drawn uniformly from twice the
// capacity (about half the adds hit a held key, half take one over: the
// agent's /v1/top under bench/load's uniform domains).
func BenchmarkAdd(b *testing.B) {
	cfg := Config{Capacity: 128, Slots: 6, Span: 10 * time.Second, Shards: 4}
	for _, c := range []struct {
		name   string
		keys   int
		random bool
	}{{"held", 10, false}, {"new", 1 << 16, false}, {"uniform", 2 * 128 * 4, true}} {
		b.Run(c.name, func(b *testing.B) {
			w, _ := New(cfg, t0)
			keys := benchKeys(c.keys)
			order := make([]int, 1<<16)
			for i := range order {
				order[i] = i % len(keys)
				if c.random {
					order[i] = rand.IntN(len(keys))
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w.Add(t0, keys[order[i%len(order)]])
				i++
			}
		})
	}
}

// BenchmarkAddParallel adds held keys from every P, with one shard and with
// four: what sharding saves under contention.
func BenchmarkAddParallel(b *testing.B) {
	for _, shards := range []int{1, 4} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			w, _ := New(Config{Capacity: 128, Slots: 6, Span: 10 * time.Second, Shards: shards}, t0)
			keys := benchKeys(64)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					w.Add(t0, keys[i%len(keys)])
					i++
				}
			})
		})
	}
}

// BenchmarkTop is a full window's query (off the hot path).
func BenchmarkTop(b *testing.B) {
	cfg := Config{Capacity: 128, Slots: 6, Span: 10 * time.Second, Shards: 4}
	w, _ := New(cfg, t0)
	keys := benchKeys(1 << 14)
	for i := range 1 << 18 {
		w.Add(t0.Add(time.Duration(i)*60*time.Second/(1<<18)), keys[i%len(keys)])
	}
	now := t0.Add(59 * time.Second)
	b.ReportAllocs()
	for b.Loop() {
		w.Top(now, 20)
	}
}
