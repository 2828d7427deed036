package reconcile

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/local"
)

// stats.go is what a cluster tells of itself: its counters and merge-lag
// histogram (Stats), and each node's share of a key (Contributions), for
// the metrics and /v1/state.

// Stats are the cluster's counters since it started.
type Stats struct {
	PacketsSent   uint64 // packets handed to the sender (before splitting)
	Flushes       uint64 // of those, sent at a drift threshold
	SendErrors    uint64
	PacketsMerged uint64
	Stale         uint64 // from an older incarnation, or our own
	CountsApplied uint64 // peers' hits applied to the engine
	// TooOld counts peers' counts not applied because their bucket was
	// past its lifetime plus the grace a bucket is kept for (Cluster.apply).
	TooOld    uint64
	NodesGone uint64
	// SilentExpired counts peers whose holds were dropped after a silence
	// (see Cluster.Step); NameConflicts housekeeping ticks that found two
	// live agents under one node name.
	SilentExpired, NameConflicts uint64
	// NamesAsked counts key hashes whose names this node asked their
	// origin for (counts arrived for a key it could not name).
	NamesAsked uint64
	// Owner mode (owner.go): Owners says whether the node is in it (as of
	// its last tick); Targeted counts packets sent to one member (counts
	// to a key's owner or successor, and sums), SumsSent the sums among
	// them, SumsMerged the sums merged from owners, WideRelays the relays
	// of a key near its limit to every live member (relayWide).
	Owners                                     bool
	Targeted, SumsSent, SumsMerged, WideRelays uint64
	// HeldStates counts the peers' states (push/pull, a join's among
	// them) that passed on origins' counts (held.go), HeldGrew the counts
	// they added; HeldOrigins and HeldKeys are what this node keeps of
	// gone origins and earlier incarnations now, until their windows end.
	HeldStates, HeldGrew, HeldOrigins, HeldKeys uint64
	// Welcomes counts the members that joined this node sent its recent
	// counts to (Cluster.Welcome); HeldPassed the push/pulls asked of new
	// owners of keys it holds gone origins' counts of (owner mode).
	Welcomes, HeldPassed uint64
	// Resets counts the keys this node reset (Res.Reset), ResetsApplied
	// the peers' resets it applied; ResetsKept is the resets it keeps
	// now, to apply no count made before them (reset.go).
	Resets, ResetsApplied, ResetsKept uint64
	// MergeLag is, per merged delta, how old its newest bucket was on
	// arrival: the sender's wait to ship plus the network, plus up to one
	// bucket width (the hit is dated to its bucket's start).
	MergeLag Histogram
}

// LagBoundsMs are the upper bounds of the merge-lag histogram's buckets, ms.
var LagBoundsMs = []int64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000}

// Histogram is a cumulative histogram over LagBoundsMs: Counts[i] is how
// many observations were ≤ LagBoundsMs[i]; Count and SumMs cover all.
type Histogram struct {
	Counts []uint64
	Count  uint64
	SumMs  int64
}

type lagHistogram struct {
	buckets [10]atomic.Uint64 // len(LagBoundsMs)
	count   atomic.Uint64
	sum     atomic.Int64
}

func (h *lagHistogram) observe(ms int64) {
	if ms < 0 {
		ms = 0
	}
	for i, b := range LagBoundsMs {
		if ms <= b {
			h.buckets[i].Add(1)
			break
		}
	}
	h.count.Add(1)
	h.sum.Add(ms)
}

func (h *lagHistogram) load() Histogram {
	out := Histogram{Counts: make([]uint64, len(LagBoundsMs)), Count: h.count.Load(), SumMs: h.sum.Load()}
	var cum uint64
	for i := range LagBoundsMs {
		cum += h.buckets[i].Load()
		out.Counts[i] = cum
	}
	return out
}

type statsCounters struct {
	packetsSent, flushes, sendErrors, packetsMerged, stale, nodesGone atomic.Uint64
	silentExpired, nameConflicts, namesAsked                          atomic.Uint64
	targeted, sumsSent, sumsMerged, wide, tooOld                      atomic.Uint64
	heldStates, heldGrew, welcomes, heldPassed                        atomic.Uint64
	resets, resetsApplied                                             atomic.Uint64
	countsApplied                                                     atomic.Int64
	lag                                                               lagHistogram
}

// Stats returns the counters.
func (c *Cluster) Stats() Stats {
	s := &c.stats
	c.mu.Lock()
	ho, hk := c.tab.heldOrigins()
	c.mu.Unlock()
	return Stats{
		Welcomes: s.welcomes.Load(), HeldPassed: s.heldPassed.Load(), HeldStates: s.heldStates.Load(), HeldGrew: s.heldGrew.Load(), HeldOrigins: uint64(ho), HeldKeys: uint64(hk),
		PacketsSent: s.packetsSent.Load(), Flushes: s.flushes.Load(), SendErrors: s.sendErrors.Load(),
		PacketsMerged: s.packetsMerged.Load(), Stale: s.stale.Load(),
		CountsApplied: uint64(s.countsApplied.Load()), TooOld: s.tooOld.Load(), NodesGone: s.nodesGone.Load(),
		SilentExpired: s.silentExpired.Load(), NameConflicts: s.nameConflicts.Load(),
		NamesAsked: s.namesAsked.Load(),
		Owners:     c.agg.Load(), Targeted: s.targeted.Load(), SumsSent: s.sumsSent.Load(), SumsMerged: s.sumsMerged.Load(),
		WideRelays: s.wide.Load(), MergeLag: s.lag.load(),
		Resets: s.resets.Load(), ResetsApplied: s.resetsApplied.Load(), ResetsKept: uint64(c.resets.len()),
	}
}

// Contribution is one node's share of a key, as /v1/state shows it
// (local.Contribution: api shows it without importing this package).
type Contribution = local.Contribution

// netOfRefunds returns a tiers key's counts per slot less the hits settles
// gave back (local.SlotTierRefund), without the refund slots; other
// counts as they are.
func netOfRefunds(counts []int64) []int64 {
	if len(counts) <= local.SlotTierRefund {
		return counts
	}
	n := len(counts) - local.SlotTierRefund
	for i := range n {
		counts[i] = max(0, counts[i]-counts[local.SlotTierRefund+i])
	}
	return counts[:n]
}

// Contributions returns each node's share of resource/domain at now, this
// node first, then peers by name.
func (c *Cluster) Contributions(resource, domain string, now time.Time) []Contribution {
	ms := now.UnixMilli()
	self := Contribution{Origin: c.name, Self: true}
	c.resMu.RLock()
	r := c.res[resource]
	c.resMu.RUnlock()
	var lifes []int64
	if r != nil {
		self.Counts, self.Entries = r.own(domain, ms)
		self.Counts = netOfRefunds(self.Counts)
		lifes = r.p.Load().life
	}
	h := KeyHash(resource, domain)
	c.gmu.Lock()
	if g, ok := c.gauges[h]; ok {
		self.Holds = g.value
	}
	c.gmu.Unlock()
	out := []Contribution{self}
	c.mu.Lock()
	origins := make([]*origin, 0, len(c.tab.origins)+len(c.tab.retired))
	for _, o := range c.tab.origins {
		origins = append(origins, o)
	}
	for _, o := range c.tab.retired {
		origins = append(origins, o)
	}
	for _, o := range origins {
		k, ok := o.keys[h]
		if !ok {
			continue
		}
		ct := Contribution{Origin: o.name, Gone: o.gone, Holds: k.gauge, LastSyncAgeMs: ms - o.lastSync}
		if len(lifes) > 0 {
			ct.Counts = make([]int64, len(lifes))
		}
		for _, cn := range k.counts {
			if int(cn.slot) < len(lifes) && cn.bucket+lifes[cn.slot] > ms {
				ct.Counts[cn.slot] += int64(cn.value)
			}
		}
		ct.Counts = netOfRefunds(ct.Counts)
		for _, m := range k.marks {
			if m.slot == local.SlotReset {
				continue
			}
			if ct.Entries == nil {
				ct.Entries = make(map[int]int64)
			}
			ct.Entries[int(m.slot)] = m.at
		}
		out = append(out, ct)
	}
	c.mu.Unlock()
	sort.Slice(out[1:], func(i, j int) bool { return out[1+i].Origin < out[1+j].Origin })
	return out
}
