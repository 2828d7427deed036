package api

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/local"
)

// cluster.go shows the cluster: GET /v1/peers, the per-origin part of
// GET /v1/state, and the gossip series of /metrics.

// ClusterView is the cluster as the operations endpoints show it. The agent
// implements it over its gossip node and reconcile cluster, whose figures it
// copies into the types below: api shows the cluster without linking it
// (nor memberlist). Implementations must be safe for concurrent use and must
// not block.
type ClusterView interface {
	// Peers returns this node and every member it knows.
	Peers() []Peer
	// Contributions returns each node's share of resource/domain at now,
	// this node first.
	Contributions(resource, domain string, now time.Time) []Contribution
	// Counters returns the gossip and merge counters.
	Counters() ClusterCounters
}

// Peer is one node as GET /v1/peers shows it.
type Peer struct {
	Name     string
	Address  string
	State    string // alive, suspect, dead, left
	Self     bool
	LastSync time.Time // last packet received from it; zero for none (and for self)
	BytesIn  uint64    // gossip bytes received from it
	BytesOut uint64    // gossip bytes sent to it
}

// ClusterCounters are the cluster's counters for /metrics.
type ClusterCounters struct {
	BytesIn, BytesOut     uint64 // gossip payload bytes
	PacketsIn, PacketsOut uint64 // gossip datagrams
	Dropped               uint64 // datagrams that failed to decode
	QueueDrops            uint64 // datagrams dropped on a full receive queue
	SendErrors            uint64
	// Repair of numbered streams (gossip.Stats): seqs asked for, messages
	// sent again, push/pulls for gaps that could not be filled, messages
	// heard twice; key names asked for and told.
	Asked, Resent, RepairResyncs, Duplicates uint64
	NamesAsked, NamesSent                    uint64
	// UnheardResyncs: push/pulls asked of live members never heard from
	// (most likely unaware of this node: gossip.Stats).
	UnheardResyncs uint64
	// Reships asked of members (a gap in one's targeted stream given up
	// on) and made (asked for targeted messages no longer kept).
	ReshipsAsked, ReshipsMade uint64
	Sequenced                 bool // this node numbers its messages (every live peer reads them)
	Targeted                  bool // this node numbers its messages to one member (every live member reads them)
	Live                      int  // live members, this node included
	// HeartbeatStretch spreads this node's idle heartbeats in a large mesh
	// (gossip.Node.HeartbeatStretch): 1, every fourth tick; S, every 4·S.
	HeartbeatStretch int
	Merge            MergeCounters
}

// MergeCounters are the reconcile cluster's counters /metrics shows (the
// agent copies them from reconcile.Stats, which documents each).
type MergeCounters struct {
	PacketsMerged, Flushes, Stale, CountsApplied, TooOld, NodesGone uint64
	// Owner mode: in it (as of the last tick); packets sent to one member,
	// sums sent and merged, relays of a key near its limit to every member.
	Owners                                     bool
	Targeted, SumsSent, SumsMerged, WideRelays uint64
	// Counts kept and passed on for gone origins and earlier incarnations.
	HeldStates, HeldGrew, HeldOrigins, HeldKeys, Welcomes, HeldPassed uint64
	// Resets: peers' resets applied, and the resets kept now.
	ResetsApplied, ResetsKept uint64
	// MergeLag is how old a merged delta's newest bucket was on arrival.
	MergeLag LagHistogram
}

// LagHistogram is a cumulative histogram: Counts[i] observations were at
// most BoundsMs[i] milliseconds; Count and SumMs cover all of them.
type LagHistogram struct {
	BoundsMs []int64
	Counts   []uint64
	Count    uint64
	SumMs    int64
}

// Contribution is one node's share of a key, as GET /v1/state shows it
// under "origins" (local.Contribution, which the cluster fills).
type Contribution = local.Contribution

// PeerReply is one node of GET /v1/peers.
type PeerReply struct {
	Name          string `json:"name"`
	Address       string `json:"address"`
	State         string `json:"state"`
	LastSyncAgeMs int64  `json:"last_sync_age_ms"`
	Self          bool   `json:"self"`
	BytesIn       uint64 `json:"bytes_in"`
	BytesOut      uint64 `json:"bytes_out"`
}

// GET /v1/peers → {"peers": [...]}: this node first, then every member
// memberlist knows, with its state, the age of its last sync packet (−1 when
// none arrived yet) and the gossip bytes exchanged with it. Alone (no
// cluster configured) it lists this node only, with its HTTP address.
func (s *Server) peers(ctx *fasthttp.RequestCtx, _ params) {
	out := []PeerReply{}
	if s.cluster == nil {
		out = append(out, PeerReply{Name: s.name, Address: *s.address.Load(), State: "alive", Self: true})
	} else {
		now := s.now()
		for _, p := range s.cluster.Peers() {
			r := PeerReply{Name: p.Name, Address: p.Address, State: p.State, Self: p.Self, BytesIn: p.BytesIn, BytesOut: p.BytesOut, LastSyncAgeMs: -1}
			switch {
			case p.Self:
				r.LastSyncAgeMs = 0
			case !p.LastSync.IsZero():
				r.LastSyncAgeMs = max(0, now.Sub(p.LastSync).Milliseconds())
			}
			if p.Self {
				out = append([]PeerReply{r}, out...)
			} else {
				out = append(out, r)
			}
		}
	}
	s.replyJSON(ctx, struct {
		Peers []PeerReply `json:"peers"`
	}{out})
}

// clusterCollector exports the gossip counters.
type clusterCollector struct{ v ClusterView }

var (
	descGossipBytes   = prometheus.NewDesc("obol_gossip_bytes_total", "Gossip payload bytes by direction (in, out).", []string{"direction"}, nil)
	descGossipPackets = prometheus.NewDesc("obol_gossip_packets_total", "Gossip datagrams by direction (in, out).", []string{"direction"}, nil)
	descGossipDropped = prometheus.NewDesc("obol_gossip_dropped_packets_total", "Gossip datagrams dropped because they could not be decoded (or came from another mesh).", nil, nil)
	descGossipErrors  = prometheus.NewDesc("obol_gossip_send_errors_total", "Failed gossip sends.", nil, nil)
	descQueueDrops    = prometheus.NewDesc("obol_gossip_receive_queue_drops_total", "Gossip datagrams dropped because the receive worker of their sender was behind (its queue full); asks, resends and resyncs repair the loss.", nil, nil)
	descAsked         = prometheus.NewDesc("obol_gossip_repair_asked_total", "Sequence numbers of peers' gossip messages this node found missing and asked for again.", nil, nil)
	descResent        = prometheus.NewDesc("obol_gossip_repair_resent_total", "Gossip messages this node sent again because a peer asked for them.", nil, nil)
	descRepairResyncs = prometheus.NewDesc("obol_gossip_repair_resyncs_total", "Push/pulls started because a gap in a gossip stream could not be filled message by message.", nil, nil)
	descUnheard       = prometheus.NewDesc("obol_gossip_unheard_resyncs_total", "Push/pulls asked of live members never heard from 2.5 s (times the heartbeat stretch) after they were reported: most likely members that never learned of this node, which ship their counts to the others only.", nil, nil)
	descDuplicates    = prometheus.NewDesc("obol_gossip_duplicates_total", "Numbered gossip messages that arrived twice (not merged again).", nil, nil)
	descNames         = prometheus.NewDesc("obol_gossip_names_total", "Key names asked of peers (asked) and told to peers that asked (told).", []string{"op"}, nil)
	descReships       = prometheus.NewDesc("obol_gossip_reships_total", "Owner-mode reships: everything a member routes to this node, asked of it after a gap in its targeted stream could not be filled message by message (asked), and made for a member that asked for targeted messages no longer kept (made).", []string{"op"}, nil)
	descStretch       = prometheus.NewDesc("obol_gossip_heartbeat_stretch", "How much this node spreads its idle heartbeats: 1 (every fourth tick, to every peer) up to 101 live members or while any member does not stretch, else ceil((members-1)/100), the heartbeat going every 4 x that ticks and the silence read as loss (2.5 s by default) that many times longer.", nil, nil)
	descTargetedOn    = prometheus.NewDesc("obol_gossip_targeted_numbered", "1 while this node numbers its messages to one member (owner mode's counts and sums ship once, repaired on request), 0 while they are resent on the schedule (a member of an earlier release).", nil, nil)
	descSequenced     = prometheus.NewDesc("obol_gossip_sequenced", "1 while this node numbers its gossip messages and ships each change once (every live peer reads numbered messages), 0 while it resends changes on the schedule (a peer of an earlier release is in the mesh).", nil, nil)
	descLive          = prometheus.NewDesc("obol_cluster_live_nodes", "Live members of the mesh, this node included.", nil, nil)
	descMerged        = prometheus.NewDesc("obol_cluster_packets_merged_total", "Peers' sync packets merged.", nil, nil)
	descFlushes       = prometheus.NewDesc("obol_cluster_drift_flushes_total", "Shipments made at once because a key reached its drift threshold.", nil, nil)
	descStale         = prometheus.NewDesc("obol_cluster_stale_packets_total", "Packets ignored as from an older incarnation of their node.", nil, nil)
	descApplied       = prometheus.NewDesc("obol_cluster_remote_hits_total", "Peers' hits applied to this node's counts.", nil, nil)
	descTooOld        = prometheus.NewDesc("obol_cluster_too_old_hits_total", "Peers' hits not applied because their bucket was older than its lifetime plus the grace a bucket is kept for.", nil, nil)
	descGone          = prometheus.NewDesc("obol_cluster_nodes_gone_total", "Nodes declared left or dead, whose holds were dropped.", nil, nil)
	descLag           = prometheus.NewDesc("obol_cluster_merge_lag_seconds", "Age of a sync packet's newest bucket when merged.", nil, nil)
	descOwnerMode     = prometheus.NewDesc("obol_cluster_owner_mode", "1 while this node sends keys' counts to their owners (owner mode), 0 while it sends them to every peer.", nil, nil)
	descTargeted      = prometheus.NewDesc("obol_cluster_targeted_packets_total", "Sync packets sent to one member in owner mode (counts to a key's owner or successor, and sums).", nil, nil)
	descSums          = prometheus.NewDesc("obol_cluster_sums_total", "Owner-mode sum messages this node sent as a key's owner or successor (sent) and merged (merged).", []string{"op"}, nil)
	descWide          = prometheus.NewDesc("obol_cluster_wide_relays_total", "Relays of a key near its limit to every live member (owner mode).", nil, nil)
	descHeldStates    = prometheus.NewDesc("obol_cluster_held_states_total", "Peers' push/pull states (a join's among them) that passed on the counts they hold for other origins.", nil, nil)
	descHeldHits      = prometheus.NewDesc("obol_cluster_held_hits_total", "Counts that peers' states passed on and that this node did not have yet (a joiner's catch-up).", nil, nil)
	descHeldOrigins   = prometheus.NewDesc("obol_cluster_held_origins", "Origins this node keeps counts of that are gone or earlier incarnations of a name, until their windows end.", nil, nil)
	descHeldKeys      = prometheus.NewDesc("obol_cluster_held_keys", "Keys of those origins this node keeps.", nil, nil)
	descWelcomes      = prometheus.NewDesc("obol_cluster_welcomes_total", "Members that joined this node sent its recent counts to.", nil, nil)
	descResetsApplied = prometheus.NewDesc("obol_cluster_resets_applied_total", "Peers' resets of a key (POST /v1/reset on another agent) this node applied.", nil, nil)
	descResetsKept    = prometheus.NewDesc("obol_cluster_resets_kept", "Resets this node keeps, to count nothing made before them, until their resource's longest window ends (at most 100,000).", nil, nil)
	descHeldPassed    = prometheus.NewDesc("obol_cluster_held_passed_total", "Push/pulls this node asked of a key's new owner or successor to pass on a gone origin's counts of it (owner mode).", nil, nil)
)

func (c clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGossipBytes, descGossipPackets, descGossipDropped, descGossipErrors, descQueueDrops, descAsked, descResent, descRepairResyncs, descUnheard, descDuplicates, descNames, descReships, descStretch, descTargetedOn, descSequenced, descLive, descMerged, descFlushes, descStale, descApplied, descTooOld, descGone, descLag, descOwnerMode, descTargeted, descSums, descWide, descHeldStates, descHeldHits, descHeldOrigins, descHeldKeys, descWelcomes, descHeldPassed, descResetsApplied, descResetsKept} {
		ch <- d
	}
}

func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	k := c.v.Counters()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descGossipBytes, k.BytesIn, "in")
	counter(descGossipBytes, k.BytesOut, "out")
	counter(descGossipPackets, k.PacketsIn, "in")
	counter(descGossipPackets, k.PacketsOut, "out")
	counter(descGossipDropped, k.Dropped)
	counter(descGossipErrors, k.SendErrors)
	counter(descQueueDrops, k.QueueDrops)
	counter(descAsked, k.Asked)
	counter(descResent, k.Resent)
	counter(descRepairResyncs, k.RepairResyncs)
	counter(descUnheard, k.UnheardResyncs)
	counter(descDuplicates, k.Duplicates)
	counter(descNames, k.NamesAsked, "asked")
	counter(descNames, k.NamesSent, "told")
	counter(descReships, k.ReshipsAsked, "asked")
	counter(descReships, k.ReshipsMade, "made")
	tnum := 0.0
	if k.Targeted {
		tnum = 1
	}
	ch <- prometheus.MustNewConstMetric(descTargetedOn, prometheus.GaugeValue, tnum)
	seq := 0.0
	if k.Sequenced {
		seq = 1
	}
	ch <- prometheus.MustNewConstMetric(descSequenced, prometheus.GaugeValue, seq)
	ch <- prometheus.MustNewConstMetric(descLive, prometheus.GaugeValue, float64(k.Live))
	ch <- prometheus.MustNewConstMetric(descStretch, prometheus.GaugeValue, float64(max(1, k.HeartbeatStretch)))
	m := k.Merge
	counter(descMerged, m.PacketsMerged)
	counter(descFlushes, m.Flushes)
	counter(descStale, m.Stale)
	counter(descApplied, m.CountsApplied)
	counter(descTooOld, m.TooOld)
	counter(descGone, m.NodesGone)
	owners := 0.0
	if m.Owners {
		owners = 1
	}
	ch <- prometheus.MustNewConstMetric(descOwnerMode, prometheus.GaugeValue, owners)
	counter(descTargeted, m.Targeted)
	counter(descSums, m.SumsSent, "sent")
	counter(descSums, m.SumsMerged, "merged")
	counter(descWide, m.WideRelays)
	counter(descHeldStates, m.HeldStates)
	counter(descHeldHits, m.HeldGrew)
	ch <- prometheus.MustNewConstMetric(descHeldOrigins, prometheus.GaugeValue, float64(m.HeldOrigins))
	ch <- prometheus.MustNewConstMetric(descHeldKeys, prometheus.GaugeValue, float64(m.HeldKeys))
	counter(descWelcomes, m.Welcomes)
	counter(descHeldPassed, m.HeldPassed)
	counter(descResetsApplied, m.ResetsApplied)
	ch <- prometheus.MustNewConstMetric(descResetsKept, prometheus.GaugeValue, float64(m.ResetsKept))
	buckets := make(map[float64]uint64, len(m.MergeLag.BoundsMs))
	for i, b := range m.MergeLag.BoundsMs {
		if i < len(m.MergeLag.Counts) {
			buckets[float64(b)/1000] = m.MergeLag.Counts[i]
		}
	}
	ch <- prometheus.MustNewConstHistogram(descLag, m.MergeLag.Count, float64(m.MergeLag.SumMs)/1000, buckets)
}
