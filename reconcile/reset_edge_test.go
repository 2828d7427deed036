package reconcile_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// A reset stamped in the future (a clock that runs ahead) is taken as
// made now: it does not make the nodes drop every peer's count of the key
// until that instant, which would make the cluster's limit a node's.
func TestFutureResetTakenAsNow(t *testing.T) {
	for _, ahead := range []time.Duration{time.Hour, 24 * 365 * time.Hour} {
		fc := clock.NewFake(t0)
		_, nodes := cluster(t, fc, "a", "b")
		a, b := nodes[0], nodes[1]
		// b's clock runs `ahead`: its reset's instant is b's own now.
		if err := b.e.Reset(fc.Now().Add(ahead), "t/one", "u"); err != nil {
			t.Fatal(err)
		}
		fc.Advance(10 * time.Millisecond)
		step(fc, nodes)
		fc.Advance(100 * time.Millisecond)
		req(t, a, fc.Now(), "t/one", "u", 30) // a spends the whole limit
		fc.Advance(10 * time.Millisecond)
		step(fc, nodes)
		if d := req(t, b, fc.Now(), "t/one", "u", 30); d.Granted != 0 {
			t.Errorf("ahead %v: b granted %d more after a spent the limit of 30 (a's counts dropped as 'before the reset')", ahead, d.Granted)
		}
	}
}

// A reset mark at MaxInt64 or far in the future from an origin nobody
// knows is taken as made on arrival: the counts after it still count.
func TestFarFutureResetMark(t *testing.T) {
	for _, at := range []int64{math.MaxInt64, math.MaxInt64 / 2, t0.UnixMilli() + 365*24*3600*1000} {
		fc := clock.NewFake(t0)
		_, nodes := cluster(t, fc, "a", "b")
		a, b := nodes[0], nodes[1]
		h := reconcile.KeyHash("t/one", "u")
		evil := &packet.Packet{From: "evil", Incarnation: 1, Seq: 1,
			Names: []packet.Name{{Hash: h, Resource: "t/one", Domain: "u"}},
			Marks: []packet.Mark{{Hash: h, Slot: local.SlotReset, At: at}}}
		a.c.HandlePacket(evil)
		b.c.HandlePacket(evil)
		for range 8 { // 2 s of ticks: housekeeping/sweeps run
			fc.Advance(250 * time.Millisecond)
			step(fc, nodes)
		}
		req(t, a, fc.Now(), "t/one", "u", 30)
		fc.Advance(10 * time.Millisecond)
		step(fc, nodes)
		if d := req(t, b, fc.Now(), "t/one", "u", 30); d.Granted != 0 {
			t.Errorf("reset mark at %d: b granted %d after a spent the limit (kept resets: a %d, b %d)", at, d.Granted, a.c.Stats().ResetsKept, b.c.Stats().ResetsKept)
		}
	}
}

// A peer takes back only hits it counted itself: refunds of hits it never
// counted (SlotTierRefund) leave the receiver's own hits counted.
func TestRefundBoundedByThePeersHits(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a")
	a := nodes[0]
	if d := req(t, a, fc.Now(), "t/one", "u", 30); d.Granted != 30 {
		t.Fatal(d)
	}
	if d := req(t, a, fc.Now(), "t/one", "u", 1); d.Granted != 0 {
		t.Fatal("limit not reached")
	}
	h := reconcile.KeyHash("t/one", "u")
	now := fc.Now().UnixMilli()
	var counts []packet.Count
	for _, s := range []uint32{local.SlotTierRefund, local.SlotTierRefund + 1} {
		counts = append(counts, packet.Count{Hash: h, Slot: s, Bucket: now - now%20, Value: 1 << 40})
		counts = append(counts, packet.Count{Hash: h, Slot: s, Bucket: now - now%1000, Value: 1 << 40})
	}
	a.c.HandlePacket(&packet.Packet{From: "evil", Incarnation: 1, Seq: 1,
		Names:  []packet.Name{{Hash: h, Resource: "t/one", Domain: "u"}},
		Counts: counts})
	if d := req(t, a, fc.Now(), "t/one", "u", 30); d.Granted != 0 {
		t.Errorf("after a peer's refund of hits it never counted, a granted %d more (its own 30 hits erased)", d.Granted)
	}
}

// Requests, settles, resets and ticks at once on two nodes, for the race
// detector and lock order.
func TestSettleResetClusterConcurrently(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a", "b")
	stop := make(chan struct{})
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range nodes {
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					now := fc.Now()
					res := []string{"t/one", "g/bucket", "t/global"}[i%3]
					dom := []string{"u", "v"}[i%2]
					switch w {
					case 0:
						_, _ = n.e.Request(now, res, dom, 1, 1)
					case 1:
						var d local.Decision
						if tk, _ := n.e.DecideSettle(&d, now, res, dom, 3, 1); tk != "" {
							_, _ = n.e.Settle(now, tk, i%7)
						}
					case 2:
						if i%20 == 0 {
							_ = n.e.Reset(now, res, dom)
						}
					}
				}
			}()
		}
	}
	go func() {
		for range 400 {
			fc.Advance(5 * time.Millisecond)
			step(fc, nodes)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("deadlock?")
	}
	close(stop)
	wg.Wait()
}

// A reset mark dated longer ago than its resource's longest span (a clock
// far behind, a forged mark) is ignored: a gcra bucket, which cannot tell
// its spends apart by time, is not emptied.
func TestAncientResetIgnored(t *testing.T) {
	fc := clock.NewFake(t0)
	_, nodes := cluster(t, fc, "a")
	a := nodes[0]
	req(t, a, fc.Now(), "g/bucket", "u", 10)
	req(t, a, fc.Now(), "t/one", "u", 30)
	for _, res := range []string{"g/bucket", "t/one"} {
		h := reconcile.KeyHash(res, "u")
		a.c.HandlePacket(&packet.Packet{From: "evil-" + res, Incarnation: 1, Seq: 1,
			Names: []packet.Name{{Hash: h, Resource: res, Domain: "u"}},
			Marks: []packet.Mark{{Hash: h, Slot: local.SlotReset, At: 1}}})
		if d := req(t, a, fc.Now(), res, "u", 0); d.Remaining != 0 {
			t.Errorf("%s: a reset mark at 1970 gave back %d", res, d.Remaining)
		}
	}
}
