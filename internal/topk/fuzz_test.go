package topk

import (
	"fmt"
	"testing"
	"time"
)

// FuzzWindowBounds runs a stream of adds over a small window against exact
// counts and checks the guarantees of Top at every step: each key's true
// count in the window is within [Count−Err, Count], Err ≤ Total/Capacity,
// Total is exact, and every key whose true count exceeds Total/Capacity is
// ranked. Each input byte is an add of one of 12 keys at the current
// instant, or (0xF0 and up) moves time on by its low nibble in seconds.
func FuzzWindowBounds(f *testing.F) {
	f.Add(uint8(1), []byte("aaaabbbcdefghijkl\xf5aab\xffmm\xf3aaaaaaa"))
	f.Add(uint8(3), []byte("abcdefghijklabcdefghijkl\xfaaaaa\xfa\xfa\xfa\xfab"))
	f.Add(uint8(0), []byte("abcdefghijklabcdefghijkl\xfaabcdefghijkl\xfaaaaaaaaaaaaaaaaaaa"))
	f.Add(uint8(2), []byte("\x00\x00\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\xf9\x00\x00"))
	f.Fuzz(func(t *testing.T, shards uint8, ops []byte) {
		if len(ops) > 4096 {
			return
		}
		cfg := Config{Capacity: 4, Slots: 3, Span: 10 * time.Second, Shards: int(shards%4) + 1}
		w, err := New(cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		type add struct {
			idx int64
			key string
		}
		var log []add
		now := t0
		for step, b := range ops {
			if b >= 0xF0 {
				now = now.Add(time.Duration(b&0x0F) * time.Second)
			} else {
				k := fmt.Sprintf("k%d", b%12)
				w.Add(now, []byte(k))
				log = append(log, add{w.index(now), k})
			}
			if step%16 != 15 && step != len(ops)-1 {
				continue
			}
			snap := w.Top(now, 1<<20)
			hi := w.index(now)
			lo := hi - int64(cfg.Slots) + 1
			truth := map[string]uint64{}
			var total uint64
			for _, a := range log {
				if a.idx >= lo && a.idx <= hi {
					truth[a.key]++
					total++
				}
			}
			if snap.Total != total {
				t.Fatalf("step %d: total %d, want %d", step, snap.Total, total)
			}
			bound := total / uint64(cfg.Capacity)
			ranked := map[string]bool{}
			for _, it := range snap.Items {
				ranked[it.Key] = true
				tr := truth[it.Key]
				if it.Count < tr || it.Count-it.Err > tr {
					t.Fatalf("step %d: %s counted %d±%d, true %d", step, it.Key, it.Count, it.Err, tr)
				}
				if it.Err > bound {
					t.Fatalf("step %d: %s has error %d over the bound %d (total %d)", step, it.Key, it.Err, bound, total)
				}
			}
			for k, tr := range truth {
				if tr*uint64(cfg.Capacity) > total && !ranked[k] {
					t.Fatalf("step %d: %s (true %d of %d) is not ranked", step, k, tr, total)
				}
			}
		}
	})
}
