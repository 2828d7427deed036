package cluster

import (
	"math"
	"slices"
	"time"
)

// result.go is what a run reports: the Result and how its figures are
// derived from the run's counters.

// NodeStats are one node's figures over the measured span (after the
// warm-up), per second of virtual time.
type NodeStats struct {
	BytesPerS        float64 // wire bytes sent (payload + memberlist overhead), all peers
	PayloadBytesPerS float64 // sync messages as encoded (gossip.Node's BytesOut)
	DatagramsPerS    float64 // datagrams sent, all peers
	MergesPerS       float64 // datagrams merged (HandlePacket calls)
	DecodeBytesPerS  float64 // bytes of the datagrams merged
	GrantsPerS       float64
}

// Result is what a run measured. Rates are per second of virtual time over
// the measured span (Duration − Warmup); "per node" figures are means over
// the nodes.
type Result struct {
	// Measured is the measured span (virtual time).
	Measured time.Duration
	// The oracle: grants per key per aligned window ÷ limit, the worst and
	// the mean over windows with requests; Windows is how many.
	WorstWindowRatio, MeanWindowRatio float64
	Windows                           int
	// FalseDenials: denials while the exact limiter had room (whole run).
	FalseDenials int
	// Requests, Grants and Denials over the whole run.
	Requests, Grants, Denials int
	// Convergence of the sampled hits (see the package doc).
	ConvergenceP50, ConvergenceP99, ConvergenceMax  time.Duration
	ConvergenceSamples, Unconverged, SamplesDropped int
	// Bytes and datagrams sent per node per second, and the busiest node's.
	BytesPerNodeS, MaxBytesPerNodeS, PayloadBytesPerNodeS, DatagramsPerNodeS float64
	// BytesPerHitPerPeer is the wire bytes sent per granted hit and per
	// peer: BytesPerNodeS ÷ (grants per node per second × (N − 1)).
	BytesPerHitPerPeer float64
	// Receive work per node per second.
	MergesPerNodeS, DecodeBytesPerNodeS float64
	// Totals over the measured span: wire and payload bytes sent,
	// datagrams sent, delivered (merged), lost (Loss), cut (partitions and
	// dead receivers); over the whole run: ticks, drift flushes, events.
	Bytes, PayloadBytes, Datagrams, Delivered, Lost, Cut int64
	Ticks, Flushes, Events                               int64
	// Repair over the measured span: seqs asked for, messages sent again
	// from a ring, resyncs (snapshot exchanges), and datagrams that
	// arrived twice (a repair that crossed a late original; not merged).
	Asked, Resent, Resyncs, Duplicates int64
	// NamesAsked counts key hashes whose names a node asked the origin
	// for (measured span).
	NamesAsked int64
	// Owner mode over the measured span: datagrams sent to one node (counts
	// to an owner or successor, and sums), sums among them, and reships
	// made (a receiver asked for a targeted message no longer kept, or gave
	// up on a gap). Seqs of targeted streams asked for and sent again
	// count in Asked and Resent.
	Targeted, Sums, Reships int64
	// FollowUps are the empty messages to one node among Targeted: sent
	// 1, 4 and 16 ticks after a node's last message to it, so that a lost
	// last message shows as a gap.
	FollowUps int64
	// StateBytes are the bytes of the push/pull states among Bytes
	// (resyncs, joins and periodic push/pulls: packet.EncodeState, with
	// the counts a node holds for other origins), measured span.
	StateBytes int64
	// WorstInstanceRatio (tiers) is the most hits the oracle's limiter
	// took in one tier instance of a key, ÷ the limit, over the whole run:
	// for a window longer than the run, which no aligned window fits, the
	// over-admission of the run.
	WorstInstanceRatio float64
	// SoloWorstWindowRatio (gcra) is WorstWindowRatio of one exact bucket
	// per key fed every request of the run in time order (the requests
	// inside the windows; its state from the run's start): what a single
	// limiter would have granted in its worst window. A gcra bucket may
	// grant its burst plus a period's refill in one aligned window, so
	// WorstWindowRatio ÷ SoloWorstWindowRatio, not WorstWindowRatio
	// alone, is what the mesh admits beyond one limiter.
	SoloWorstWindowRatio float64
	// Churn (see Scenario.Restarts): agents started
	// (restarts and late starts: Joins, whole run), periodic push/pulls made
	// (PushPulls, measured span), state files written (StateWrites).
	Joins, PushPulls, StateWrites int64
	// LostHits is, at the end of the run, the most granted hits still
	// inside their key's window that a running node does not count,
	// summed over the keys (in owner mode, the keys it needs; see
	// judge.go); ExtraHits, the most it counts that were never granted
	// (counted twice). Both compare every node's engine (a peek) with the
	// oracle after the load ends and the nodes settle (max(2 s, 8 sync
	// intervals) of ticks, deliveries and repairs with no requests), and
	// only for a tiers resource whose window outlasts the run and the
	// settle, where the comparison is exact: −1 otherwise.
	LostHits, ExtraHits int
	// JoinSync is, for each agent that started during the run (restarts
	// and Starts), the time from its start until its view of every key
	// first agreed with the oracle within drift × the limit (at least one
	// hit), or for gcra with the mesh (the view of the lowest-index node
	// running and not joining, within the same), checked at each of its
	// requests and ticks: percentiles over
	// JoinSyncs joins that agreed; JoinsUnsynced never did (they stopped
	// first, or the run ended).
	JoinSyncP50, JoinSyncP99, JoinSyncMax time.Duration
	JoinSyncs, JoinsUnsynced              int
	// HeldOriginsMax and HeldKeysMax are the most origins (gone ones and
	// earlier incarnations) and their keys any node kept, sampled at each
	// node's housekeeping (reconcile.Stats HeldOrigins, HeldKeys).
	HeldOriginsMax, HeldKeysMax int
	// DatagramOverhead is the bytes added to each datagram's payload.
	DatagramOverhead int
	// Nodes are the per-node figures.
	Nodes []NodeStats
}

// nodeCounts are one node's counters over the measured span.
type nodeCounts struct {
	bytes, payload, datagrams, merges, decodeBytes, grants int64
}

// quantile returns the q-quantile of sorted xs by nearest rank (0 when
// empty).
func quantile(xs []int64, q float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// finish fills r's rates from the counters.
func (s *sim) finish() Result {
	r := &s.res
	span := float64(s.end-s.warm) / 1e9
	r.Measured = time.Duration(s.end - s.warm)
	n := float64(len(s.nodes))
	var grants float64
	r.Nodes = make([]NodeStats, len(s.nodes))
	for i, nd := range s.nodes {
		c := nd.cnt
		ns := NodeStats{
			BytesPerS: float64(c.bytes) / span, PayloadBytesPerS: float64(c.payload) / span,
			DatagramsPerS: float64(c.datagrams) / span, MergesPerS: float64(c.merges) / span,
			DecodeBytesPerS: float64(c.decodeBytes) / span, GrantsPerS: float64(c.grants) / span,
		}
		r.Nodes[i] = ns
		r.BytesPerNodeS += ns.BytesPerS / n
		r.MaxBytesPerNodeS = max(r.MaxBytesPerNodeS, ns.BytesPerS)
		r.PayloadBytesPerNodeS += ns.PayloadBytesPerS / n
		r.DatagramsPerNodeS += ns.DatagramsPerS / n
		r.MergesPerNodeS += ns.MergesPerS / n
		r.DecodeBytesPerNodeS += ns.DecodeBytesPerS / n
		grants += ns.GrantsPerS / n
	}
	if grants > 0 && len(s.nodes) > 1 {
		r.BytesPerHitPerPeer = r.BytesPerNodeS / (grants * (n - 1))
	}
	s.orc.close(r)
	lags := s.conv.lags
	slices.Sort(lags)
	r.ConvergenceSamples = len(lags)
	r.Unconverged = s.conv.pendingCount()
	r.SamplesDropped = s.conv.dropped
	r.ConvergenceP50 = time.Duration(quantile(lags, 0.50))
	r.ConvergenceP99 = time.Duration(quantile(lags, 0.99))
	if len(lags) > 0 {
		r.ConvergenceMax = time.Duration(lags[len(lags)-1])
	}
	r.Events = s.events
	r.DatagramOverhead = s.overhead
	return *r
}
