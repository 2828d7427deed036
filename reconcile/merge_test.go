package reconcile

import (
	"math/rand/v2"
	"testing"

	"github.com/obol-dev/obol/gossip/packet"
)

// packetsFrom turns fuzz bytes into packets from two origins about four
// keys. A gauge's value is a function of its version, as it is on a real
// node (one value per version).
func packetsFrom(data []byte) []*packet.Packet {
	var out []*packet.Packet
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	for len(data) > 0 && len(out) < 64 {
		b := next()
		p := &packet.Packet{From: []string{"x", "y"}[b&1], Incarnation: 1}
		if b&2 != 0 {
			p.Names = append(p.Names, packet.Name{Hash: uint64(next()%4) + 1, Resource: "r", Domain: "d"})
		}
		for n := next() % 6; n > 0; n-- {
			h := uint64(next()%4) + 1
			switch next() % 3 {
			case 0:
				p.Counts = append(p.Counts, packet.Count{Hash: h, Slot: uint32(next() % 3), Bucket: int64(next() % 5), Value: uint64(next() % 16)})
			case 1:
				p.Marks = append(p.Marks, packet.Mark{Hash: h, Slot: uint32(next() % 3), At: int64(next() % 4)})
			case 2:
				v := uint64(next() % 8)
				p.Gauges = append(p.Gauges, packet.Gauge{Hash: h, Value: int64(v * 3 % 7), Version: v})
			}
		}
		out = append(out, p)
	}
	return out
}

type totals struct {
	counts map[[4]int64]int64 // (origin, hash-ish via name, slot, bucket) → applied
	holds  map[string]int64
	marks  map[[3]int64]bool
}

// mergeAll merges packets in order into a fresh table and sums the ops.
func mergeAll(ps []*packet.Packet) (totals, *table) {
	t := newTable("self")
	tot := totals{counts: map[[4]int64]int64{}, holds: map[string]int64{}, marks: map[[3]int64]bool{}}
	for _, p := range ps {
		ops, _ := t.merge(p, 0, nil)
		for _, o := range ops {
			switch o.kind {
			case opCount:
				tot.counts[[4]int64{int64(len(o.domain)), int64(o.slot), o.at, 0}] += o.n
			case opHolds:
				tot.holds[o.resource+"/"+o.domain] += o.n
			case opEntry:
				tot.marks[[3]int64{int64(o.slot), o.at}] = true
			}
		}
	}
	return tot, t
}

// FuzzMerge checks the merge properties: any order, any duplication, the
// same counts applied, the same holds, every entry seen.
func FuzzMerge(f *testing.F) {
	f.Add([]byte{3, 1, 4, 0, 1, 2, 9, 2, 2, 0, 1, 5, 1, 1, 1, 3, 4, 7})
	f.Add([]byte{0, 3, 0, 0, 1, 1, 7, 1, 3, 2, 2, 5, 0, 3, 1, 2, 4})
	f.Add([]byte{2, 1, 2, 2, 2, 6, 3, 3, 2, 3, 0, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		ps := packetsFrom(data)
		if len(ps) == 0 {
			return
		}
		want, wt := mergeAll(ps)
		rng := rand.New(rand.NewPCG(uint64(len(data)), 7))
		var shuffled []*packet.Packet
		for _, p := range ps {
			for range 1 + rng.IntN(3) {
				shuffled = append(shuffled, p)
			}
		}
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, gt := mergeAll(shuffled)
		// Counts: what was applied is the max per bucket, in any order, as
		// long as the key's name arrived at some point in both runs.
		for k, v := range want.counts {
			if got.counts[k] != v {
				t.Fatalf("count %v: applied %d in order, %d shuffled", k, v, got.counts[k])
			}
		}
		for k, v := range got.counts {
			if want.counts[k] != v {
				t.Fatalf("count %v: applied %d shuffled, %d in order", k, v, want.counts[k])
			}
		}
		for k, v := range want.holds {
			if got.holds[k] != v {
				t.Fatalf("holds %s: %d in order, %d shuffled", k, v, got.holds[k])
			}
		}
		// Entries: each origin's latest entry per key and tier is applied
		// in both runs.
		for name, o := range wt.origins {
			for h, k := range o.keys {
				if !k.resolved {
					continue
				}
				for _, m := range k.marks {
					if !got.marks[[3]int64{int64(m.slot), m.at}] || !want.marks[[3]int64{int64(m.slot), m.at}] {
						t.Fatalf("origin %s key %d: latest entry %+v not applied in both orders", name, h, m)
					}
				}
			}
		}
		// The tables agree on every count and gauge.
		for name, o := range wt.origins {
			g := gt.origins[name]
			for h, k := range o.keys {
				gk := g.keys[h]
				if gk == nil || gk.gauge != k.gauge || gk.gver != k.gver {
					t.Fatalf("origin %s key %d: gauge differs", name, h)
				}
				if len(gk.marks) != len(k.marks) {
					t.Fatalf("origin %s key %d: entries %+v vs %+v", name, h, k.marks, gk.marks)
				}
				for _, m := range k.marks {
					if gk.setMark(m.slot, m.at) {
						t.Fatalf("origin %s key %d: shuffled table lacks entry %+v", name, h, m)
					}
				}
				for _, c := range k.counts {
					if gk.setCount(c.slot, c.bucket, c.value) != 0 {
						t.Fatalf("origin %s key %d: shuffled table lower at %+v", name, h, c)
					}
				}
			}
		}
		// Re-merging everything changes nothing.
		for _, p := range ps {
			ops, _ := gt.merge(p, 0, nil)
			for _, o := range ops {
				if o.kind != opEntry {
					t.Fatalf("re-merge produced %+v", o)
				}
			}
		}
	})
}

func TestMergeCountsOnlyGrowth(t *testing.T) {
	tab := newTable("self")
	name := packet.Name{Hash: 1, Resource: "r", Domain: "d"}
	steps := []struct {
		p     packet.Packet
		wantN []int64 // count ops' n, in order
	}{
		{packet.Packet{From: "x", Incarnation: 1, Names: []packet.Name{name}, Counts: []packet.Count{{Hash: 1, Bucket: 0, Value: 5}}}, []int64{5}},
		{packet.Packet{From: "x", Incarnation: 1, Counts: []packet.Count{{Hash: 1, Bucket: 0, Value: 3}}}, nil},             // older: ignored
		{packet.Packet{From: "x", Incarnation: 1, Counts: []packet.Count{{Hash: 1, Bucket: 0, Value: 8}}}, []int64{3}},      // growth only
		{packet.Packet{From: "x", Incarnation: 1, Counts: []packet.Count{{Hash: 1, Bucket: 20, Value: 2}}}, []int64{2}},     // a new bucket
		{packet.Packet{From: "x", Incarnation: 0, Counts: []packet.Count{{Hash: 1, Bucket: 40, Value: 9}}}, nil},            // an old incarnation
		{packet.Packet{From: "x", Incarnation: 2, Counts: []packet.Count{{Hash: 1, Bucket: 0, Value: 1}}}, []int64{1}},      // restarted: counts anew
		{packet.Packet{From: "self", Incarnation: 9, Counts: []packet.Count{{Hash: 1, Bucket: 0, Value: 100}}}, nil},        // our own echo
		{packet.Packet{From: "y", Incarnation: 1, Counts: []packet.Count{{Hash: 7, Bucket: 0, Value: 4}}}, nil},             // unnamed: waits
		{packet.Packet{From: "z", Incarnation: 1, Names: []packet.Name{{Hash: 7, Resource: "r", Domain: "e"}}}, []int64{4}}, // the name arrives
	}
	for i, st := range steps {
		ops, _ := tab.merge(&st.p, 0, nil)
		var got []int64
		for _, o := range ops {
			if o.kind == opCount {
				got = append(got, o.n)
			}
		}
		if len(got) != len(st.wantN) {
			t.Fatalf("step %d: ops %v, want %v", i, got, st.wantN)
		}
		for j := range got {
			if got[j] != st.wantN[j] {
				t.Fatalf("step %d: ops %v, want %v", i, got, st.wantN)
			}
		}
	}
}

func TestSnapshotGaugeWatermark(t *testing.T) {
	tab := newTable("self")
	names := []packet.Name{{Hash: 1, Resource: "r", Domain: "a"}, {Hash: 2, Resource: "r", Domain: "b"}}
	ops, _ := tab.merge(&packet.Packet{From: "x", Incarnation: 1, Names: names, Gauges: []packet.Gauge{{Hash: 1, Value: 3, Version: 1}, {Hash: 2, Value: 2, Version: 2}}}, 0, nil)
	if len(ops) != 2 {
		t.Fatalf("ops %+v", ops)
	}
	// A snapshot at watermark 5 lists only key 2: key 1's holds are gone.
	ops, _ = tab.merge(&packet.Packet{From: "x", Incarnation: 1, Full: true, Gauges: []packet.Gauge{{Hash: 2, Value: 2, Version: 2}, {Hash: 0, Version: 5}}}, 0, nil)
	if len(ops) != 1 || ops[0].kind != opHolds || ops[0].n != -3 || ops[0].domain != "a" {
		t.Fatalf("ops %+v, want key a's 3 holds dropped", ops)
	}
	ops = tab.gone("x", nil)
	if len(ops) != 1 || ops[0].n != -2 {
		t.Fatalf("gone: %+v", ops)
	}
}
