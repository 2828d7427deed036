package reconcile

import (
	"strconv"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
)

// benchKeys is how many keys the benchmarks' packets are about, and
// benchPerPacket how many counts one packet carries.
const (
	benchKeys      = 1000
	benchPerPacket = 64
)

// benchPackets returns a stream of delta packets from origin x about
// benchKeys keys of resource t/one, benchPerPacket counts each (slot 0 and
// tier 1, one bucket per packet); the first packet about a key carries its
// name and its tier entry. bump makes packet i's counts grow each time the
// stream comes round again, as a live peer's do.
func benchPackets(at int64) (ps []*packet.Packet, bump func(i int)) {
	n := benchKeys * 2 / benchPerPacket
	named := make(map[uint64]bool)
	for i := range n {
		p := &packet.Packet{From: "x", Incarnation: 1}
		for j := range benchPerPacket / 2 {
			d := "d" + strconv.Itoa((i*benchPerPacket/2+j)%benchKeys)
			h := KeyHash("t/one", d)
			if !named[h] {
				named[h] = true
				p.Names = append(p.Names, packet.Name{Hash: h, Resource: "t/one", Domain: d})
				p.Marks = append(p.Marks, packet.Mark{Hash: h, Slot: 1, At: at})
			}
			for s := range uint32(2) {
				p.Counts = append(p.Counts, packet.Count{Hash: h, Slot: s, Bucket: at, Value: 1})
			}
		}
		ps = append(ps, p)
	}
	bump = func(i int) {
		p := ps[i%len(ps)]
		for k := range p.Counts {
			p.Counts[k].Value = uint64(i/len(ps) + 1)
		}
	}
	return ps, bump
}

// BenchmarkMerge is table.merge alone (merge.go, pure) on a steady stream
// of delta packets from one peer, every count grown since it was last
// seen: per op, one packet of 64 counts.
func BenchmarkMerge(b *testing.B) {
	ps, bump := benchPackets(0)
	t := newTable("self")
	var ops []op
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bump(i)
		ops, _ = t.merge(ps[i%len(ps)], 0, ops[:0])
	}
	b.ReportMetric(float64(len(ps[0].Counts)), "counts/op")
}

// BenchmarkHandlePacket is a peer's packet merged and its growth applied
// to an engine (HandlePacket on a cluster attached to local.Engine): per
// op, one packet of 64 counts about a tiers resource.
func BenchmarkHandlePacket(b *testing.B) {
	cfg, err := config.Parse([]byte("resources:\n  t/one:\n    kind: tiers\n    tiers: \"1000000,60,60,0\"\n"))
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	c := New(Options{Name: "self", Clock: clock.NewFake(t0)})
	local.New(cfg).Attach(c)
	ps, bump := benchPackets(t0.UnixMilli())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bump(i)
		c.HandlePacket(ps[i%len(ps)])
	}
	b.ReportMetric(float64(len(ps[0].Counts)), "counts/op")
}

// nopSender takes every packet and ships it nowhere.
type nopSender struct{}

func (nopSender) Send(*packet.Packet) error { return nil }
func (nopSender) Live() int                 { return 3 }

// BenchmarkStep is one sync tick (Cluster.Step) that ships the keys a
// node's engine recorded since the last one: per op, one tick of 250 ms
// over 1000 tiers keys that each took a hit, and every fourth tick its
// housekeeping.
func BenchmarkStep(b *testing.B) {
	cfg, err := config.Parse([]byte("resources:\n  t/one:\n    kind: tiers\n    tiers: \"100,1,1,0,10,10,10,0\"\n"))
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	c := New(Options{Name: "self", Clock: clock.NewFake(t0)})
	c.SetSender(nopSender{})
	r := c.Register("t/one", local.ClusterSpecOf(cfg.Resources["t/one"]), nil)
	ds := make([]string, benchKeys)
	for i := range ds {
		ds[i] = "d" + strconv.Itoa(i)
	}
	taken := []int64{1, 0}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now := t0.Add(time.Duration(i) * 250 * time.Millisecond)
		b.StopTimer()
		for _, d := range ds {
			r.TierHits(d, now.UnixMilli(), 1, taken, 0)
		}
		b.StartTimer()
		c.Step(now)
	}
	b.ReportMetric(benchKeys, "keys/op")
}

// BenchmarkFirstSum is the first sum an owner sends of a key, merged by a
// node in owner mode that holds counts of many keys from 1,000 origins:
// per op, one key's first sum (newSum reads only the origins holding it).
func BenchmarkFirstSum(b *testing.B) {
	const origins, keys = 1000, 100
	t := newTable("self")
	t.holders = make(map[uint64][]*origin) // owner mode
	for i := range origins {
		p := &packet.Packet{From: "o" + strconv.Itoa(i), Incarnation: 1}
		for k := range keys {
			if (i+k)%10 == 0 { // each key held by a tenth of the origins
				p.Counts = append(p.Counts, packet.Count{Hash: uint64(k + 1), Bucket: 1000, Value: 1})
			}
		}
		t.merge(p, 0, nil)
	}
	sum := &packet.Packet{From: "owner", Incarnation: 1, Sum: true, Counts: []packet.Count{{Bucket: 1000, Value: 200}}}
	var ops []op
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum.Counts[0].Hash = uint64(i%keys + 1)
		delete(t.sums, sum.Counts[0].Hash)
		ops = t.mergeSum(sum, 0, ops[:0])
	}
}
