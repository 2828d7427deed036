package api

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// fakeCluster is a ClusterView with fixed counters.
type fakeCluster struct{ k ClusterCounters }

func (f fakeCluster) Peers() []Peer { return nil }
func (f fakeCluster) Contributions(string, string, time.Time) []Contribution {
	return nil
}
func (f fakeCluster) Counters() ClusterCounters { return f.k }

// TestClusterMetrics: each gossip counter is its own series on /metrics.
func TestClusterMetrics(t *testing.T) {
	h := &harness{t: t, clock: &clock{t: t0}, logs: &logBuffer{}}
	h.srv = New(testEngine(t), Options{
		Now: h.clock.now, Logger: slog.New(slog.NewJSONHandler(h.logs, nil)), NodeName: "node-a",
		Cluster: fakeCluster{ClusterCounters{BytesIn: 11, BytesOut: 12, PacketsIn: 13, PacketsOut: 14, Dropped: 3, QueueDrops: 7, SendErrors: 2, Live: 4,
			Asked: 21, Resent: 22, RepairResyncs: 23, UnheardResyncs: 29, Duplicates: 24, NamesAsked: 25, NamesSent: 26, Sequenced: true, ReshipsAsked: 27, ReshipsMade: 28, Targeted: true, HeartbeatStretch: 3,
			Merge: MergeCounters{Owners: true, Targeted: 31, SumsSent: 32, SumsMerged: 33, WideRelays: 34, TooOld: 35}}},
	})
	page := string(h.serve().do("GET", "/metrics", "").body)
	for _, want := range []string{
		`obol_gossip_bytes_total{direction="in"} 11`,
		`obol_gossip_packets_total{direction="out"} 14`,
		"obol_gossip_dropped_packets_total 3",
		"obol_gossip_receive_queue_drops_total 7",
		"obol_gossip_send_errors_total 2",
		"obol_gossip_repair_asked_total 21",
		"obol_gossip_repair_resent_total 22",
		"obol_gossip_repair_resyncs_total 23",
		"obol_gossip_unheard_resyncs_total 29",
		"obol_gossip_duplicates_total 24",
		`obol_gossip_names_total{op="asked"} 25`,
		`obol_gossip_names_total{op="told"} 26`,
		"obol_gossip_sequenced 1",
		`obol_gossip_reships_total{op="asked"} 27`,
		`obol_gossip_reships_total{op="made"} 28`,
		"obol_gossip_targeted_numbered 1",
		"obol_gossip_heartbeat_stretch 3",
		"obol_cluster_live_nodes 4",
		"obol_cluster_owner_mode 1",
		"obol_cluster_targeted_packets_total 31",
		`obol_cluster_sums_total{op="sent"} 32`,
		`obol_cluster_sums_total{op="merged"} 33`,
		"obol_cluster_wide_relays_total 34",
		"obol_cluster_too_old_hits_total 35",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %q: %s", want, grepLine(page, strings.Fields(strings.SplitN(want, "{", 2)[0])[0]))
		}
	}
}
