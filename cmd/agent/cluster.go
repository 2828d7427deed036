package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/obol-dev/obol/api"
	"github.com/obol-dev/obol/gossip"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/reconcile"
)

// Cluster defaults.
const (
	defaultGossipPort = "7946"
	defaultSync       = 250 * time.Millisecond
	defaultLabel      = "obol"
	leaveTimeout      = 2 * time.Second
)

// clusterSettings are the resolved gossip settings. The agent joins a mesh
// only when a gossip bind address or a join list is given (flag, env or
// the config's gossip: keys); otherwise it runs alone and opens no port.
type clusterSettings struct {
	enabled    bool
	name       string
	bind       string
	join       []string
	secretFile string
	secretFrom string // the flag, variable or key secretFile came from
	key        []byte // the gossip key read from secretFile, by loadKey
	label      string
	sync       time.Duration
	ownerFrom  int  // gossip.owner_from
	insecure   bool // gossip off loopback without a key, asked for explicitly
	// nameGenerated: the name is the hostname and this process's suffix,
	// not one the operator gave.
	nameGenerated bool
}

// loadKey reads the gossip key when the agent joins a mesh with a secret
// file. The error names the file and where it was given.
func (cs *clusterSettings) loadKey() error {
	if !cs.enabled || cs.secretFile == "" {
		return nil
	}
	k, err := gossip.LoadSecret(cs.secretFile)
	if err != nil {
		return fmt.Errorf("%v: %w", value{cs.secretFile, cs.secretFrom}, err)
	}
	cs.key = k
	return nil
}

// clusterRun is a running cluster membership: the reconcile side that ships
// and merges counts, and the gossip node that moves them. It is the API's
// view of the mesh.
type clusterRun struct {
	node     *gossip.Node
	rec      *reconcile.Cluster
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

var _ api.ClusterView = (*clusterRun)(nil)

// newRecorder returns the record of the engine's counts that the mesh and
// the state file share (reconcile), attached to e. Its loop is not
// started.
func newRecorder(cs clusterSettings, e *local.Engine, log *slog.Logger, base clock.Clock, onConflict func(uint64)) *reconcile.Cluster {
	name := cs.name
	if name == "" {
		name = "obol" // alone with a state file and no host name: the name travels nowhere
	}
	rec := reconcile.New(reconcile.Options{Name: name, SyncInterval: cs.sync, OwnerFrom: cs.ownerFrom, Logger: log, Clock: base, OnNameConflict: onConflict})
	e.Attach(rec)
	return rec
}

// startCluster joins rec to the mesh cs describes: the join's push/pull
// has passed on the seed's counts, its own and those it holds for others,
// when it returns. A seed that does not answer is not an error: the node
// runs alone (fail open) until someone joins it. The key must have been
// loaded (loadKey).
func startCluster(ctx context.Context, cs clusterSettings, rec *reconcile.Cluster, log *slog.Logger, onConflict func(uint64)) (*clusterRun, error) {
	node, err := gossip.New(gossip.Config{
		Name: cs.name, Bind: cs.bind, Join: cs.join, SecretKey: cs.key, Label: cs.label,
		Incarnation: rec.Incarnation(), Logger: log, OnNameConflict: onConflict,
	}, rec)
	if err != nil {
		return nil, &exitError{exitFailure, fmt.Errorf("gossip: %w", err)}
	}
	rec.SetSender(node)
	rctx, cancel := context.WithCancel(ctx)
	c := &clusterRun{node: node, rec: rec, cancel: cancel}
	c.wg.Go(func() { rec.Run(rctx) })
	return c, nil
}

// stop ships what this node has not shipped yet, in owner mode hands its
// counts of the keys it owned or succeeded to the members that take its
// place (reconcile.Cluster.Handover), leaves the mesh (peers
// drop this node's holds at once and keep its counts) and shuts the node
// down, releasing the gossip port. Safe to call twice.
func (c *clusterRun) stop(log *slog.Logger, now func() time.Time) {
	c.stopOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		t := now()
		c.rec.Step(t) // the counts of the last tick go out before the node leaves
		if n := c.rec.Handover(t); n > 0 {
			log.Info("handed over counts of keys this node owned or succeeded", "keys", n)
		}
		if err := c.node.Leave(leaveTimeout); err != nil {
			log.Warn("gossip leave", "err", err)
		}
		if err := c.node.Shutdown(); err != nil {
			log.Warn("gossip shutdown", "err", err)
		}
	})
}

// Peers returns this node and its peers.
func (c *clusterRun) Peers() []api.Peer {
	ps := c.node.Peers()
	out := make([]api.Peer, 0, len(ps))
	for _, p := range ps {
		out = append(out, api.Peer{Name: p.Name, Address: p.Addr, State: p.State, Self: p.Self,
			LastSync: p.LastSync, BytesIn: p.BytesIn, BytesOut: p.BytesOut})
	}
	return out
}

// Contributions returns each node's share of resource/domain.
func (c *clusterRun) Contributions(resource, domain string, now time.Time) []api.Contribution {
	return c.rec.Contributions(resource, domain, now)
}

// Counters returns gossip and merge counters.
func (c *clusterRun) Counters() api.ClusterCounters {
	s := c.node.Stats()
	return api.ClusterCounters{
		BytesIn: s.BytesIn, BytesOut: s.BytesOut, PacketsIn: s.PacketsIn, PacketsOut: s.PacketsOut,
		Dropped: s.Dropped, QueueDrops: s.QueueDrops, SendErrors: s.SendErrors, Live: c.node.Live(), Merge: mergeCounters(c.rec.Stats()),
		Asked: s.Asked, Resent: s.Resent, RepairResyncs: s.RepairResyncs, UnheardResyncs: s.UnheardResyncs, Duplicates: s.Duplicates,
		NamesAsked: s.NamesAsked, NamesSent: s.NamesSent, Sequenced: c.node.Repairs(),
		ReshipsAsked: s.ReshipsAsked, ReshipsMade: s.ReshipsMade, Targeted: c.node.Reships(),
		HeartbeatStretch: c.node.HeartbeatStretch(),
	}
}

// mergeCounters are m as /metrics shows them.
func mergeCounters(m reconcile.Stats) api.MergeCounters {
	return api.MergeCounters{
		PacketsMerged: m.PacketsMerged, Flushes: m.Flushes, Stale: m.Stale, CountsApplied: m.CountsApplied, TooOld: m.TooOld, NodesGone: m.NodesGone,
		Owners: m.Owners, Targeted: m.Targeted, SumsSent: m.SumsSent, SumsMerged: m.SumsMerged, WideRelays: m.WideRelays,
		HeldStates: m.HeldStates, HeldGrew: m.HeldGrew, HeldOrigins: m.HeldOrigins, HeldKeys: m.HeldKeys, Welcomes: m.Welcomes, HeldPassed: m.HeldPassed,
		ResetsApplied: m.ResetsApplied, ResetsKept: m.ResetsKept,
		MergeLag: api.LagHistogram{BoundsMs: reconcile.LagBoundsMs, Counts: m.MergeLag.Counts, Count: m.MergeLag.Count, SumMs: m.MergeLag.SumMs},
	}
}

// splitJoin splits a comma-separated join list, dropping empty items.
func splitJoin(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
