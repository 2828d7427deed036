// Package cluster is a virtual-time cluster simulator: N nodes, each the
// real local.Engine and reconcile.Cluster the agent runs, on one virtual
// clock over a simulated network, without memberlist, goroutines or sleep.
// A run is deterministic for its Scenario (the seed included).
//
// # The model
//
// One discrete-event queue orders every event by virtual instant (ties in
// the order they were scheduled):
//
//   - requests: each node is offered Scenario.Rate requests per second on
//     average (spread over the nodes by Scenario.Skew: even, one hot node
//     taking 80%, or Zipf), evenly paced (node i's k-th request at
//     (k + i/N)/rate, as bench/cluster paces them) or Poisson; each asks
//     for one hit of one of Scenario.Keys keys (one hot key, or many chosen
//     uniformly or by Zipf) and is decided by the node's engine at once;
//   - drift flushes: after each decision the simulator asks the cluster
//     whether a key reached its drift threshold (reconcile.Cluster.Kicked)
//     and, if so, calls Flush at reconcile.Cluster.FlushAt: at the same
//     instant, or at the end of the node's flush gap (Scenario.FlushGap),
//     as the agent's flusher goroutine would with no scheduling delay;
//   - sync ticks: each node calls Step every SyncInterval × U[0.9, 1.1), the
//     agent's jitter, drawn from the node's own seeded source;
//   - the engine's housekeeping Step, every second per node, as the agent
//     runs it;
//   - deliveries: every packet a cluster sends is split and encoded by the
//     real codec (gossip/packet.Split, at the datagram budget gossip.Budget
//     gives for the scenario's encryption and label), decoded by
//     gossip/packet.Decode, and delivered to each peer after Delay plus a
//     uniform jitter in [0, Jitter), unless it is lost (probability Loss,
//     per datagram and peer), cut by a partition active when it is sent,
//     or its receiver is dead; each datagram is decoded once and the same
//     decoded packet is merged by every receiver (decoding is
//     deterministic; DecodeBytes still counts each receiver's bytes);
//   - repair (unless Scenario.Unsequenced): every node numbers its
//     messages and keeps the recent ones (gossip.RepairMessages,
//     gossip.RepairBytes); a receiver follows every peer's numbers with
//     gossip/stream, as gossip does, and its asks (Request datagrams, lost
//     and cut like any other) are answered by the messages sent again to it
//     alone, or by a snapshot exchange (memberlist's push/pull, over TCP:
//     delayed, not lost, cut by partitions and dead nodes) when they are no
//     longer kept or the receiver gives up; names a receiver lacks are asked
//     for the same way (reconcile.NameAsker);
//   - node death: a dead node stops deciding, ticking and receiving; after
//     DetectAfter every survivor calls NodeGone for it, as gossip does when
//     memberlist declares it dead, and counts one live node fewer.
//   - churn (churn.go): an agent stops at a Restart or a Leave, cleanly
//     (a last Step ships what it has not shipped, it writes its state
//     file, and the others get NodeGone at once, as after memberlist's
//     Leave) or crashed (NodeGone after DetectAfter); a new agent takes
//     its node's place and load at the restart's return or a Start, with
//     a later incarnation, fresh streams, and the node's state file
//     restored when the restart says so; it joins with a push/pull with
//     the lowest-index running node (none: it starts alone), and
//     JoinSpread later every member lists it, counts it live and sends it
//     what it changed lately (reconcile.Cluster.Welcome). A departed
//     name's NodeGone is skipped when an agent of the same name is back
//     first. Push/pull states (resyncs, joins) are the mesh states gossip
//     sends (packet.EncodeState: with the counts a node holds for other
//     origins); a node's load is not offered while it is down.
//
// Not modelled: memberlist's own traffic (probes, membership gossip) and,
// unless Scenario.PushPullEvery, its periodic push/pull state exchange
// (every 30 s per node), a name that comes back being resynced by every
// member (gossip does so for a name it saw dead or left; the simulator
// Welcomes it as a new one), datagrams to a crashed node whose place a
// new name took before its death was known, gossip's resyncs after a
// silence, UDP and IP
// headers, CPU contention (decisions and merges take no virtual time, and
// nothing is reordered by a busy receiver), and memberlist declaring
// partitioned peers dead.
//
// # Bytes
//
// Payload bytes are the sync messages as encoded, what gossip.Node counts
// in its BytesOut (and so what bench/cluster reports). Wire bytes add
// memberlist's per-datagram overhead, gossip.MaxDatagram minus
// gossip.Budget: 1 (message type) + 5 (CRC) bytes always, 29 for AES-GCM
// (version byte, 12-byte nonce, 16-byte tag) when Encrypt is set, and 2 +
// len(Label) for a label.
//
// # The oracle
//
// An exact limiter per key is fed every grant of every node in event order
// (each grant is committed to it even when it would have refused it, so
// over-admission stays counted): one GCRA bucket (emission interval
// Period/Count, burst offset Burst intervals), or one tier instance (the
// first grant at or after the end of the previous instance and its
// cooldown enters a new one). A denial at whose instant that limiter had
// room is a false denial. Window ratios are the cluster-wide grants of a
// key in aligned windows (the gcra period, or the tier's window) after the
// warm-up, divided by the limit (Count, or the tier's limit): the worst
// over every key and window, and the mean over the windows in which a key
// had requests. The oracle takes gcra resources and tiers resources of one
// tier whose window equals its active time, without hard or global limits,
// domain overrides or shadow mode; Validate refuses others.
//
// # Convergence
//
// A sample of the granted hits is followed: the first hit of a bucket
// (reconcile's per-key time bucket of the slot decisions read) at its
// origin, at most one per node every Scenario.SampleGap. A peer reflects
// it once reconcile applies any count of that origin's bucket to the
// peer's engine (seen by wrapping the engine as the cluster's Applier):
// counts are cumulative, so any count of the bucket includes its first
// hit. The first hit of a bucket waits longest for the drift threshold,
// so this is the slow end of a key's hits; single hits of sparse keys are
// each the first of their bucket. Its lag is the time until every node alive when it was made,
// and still alive, reflects it. Hits of an origin that dies first are
// dropped from the sample; hits never reflected by the end are counted as
// Unconverged, outside the percentiles.
//
// # Churn figures
//
// LostHits, ExtraHits, JoinSync and the held origins are described in
// judge.go and on Result: a node's view of a key is a peek of its engine
// compared with the oracle's limiter; LostHits is judged exactly, after
// the load ends and the nodes settle, for a tiers resource whose window
// outlasts the run.
//
// # Work
//
// Scenario.MaxEvents bounds the events a run may process; Run refuses a
// scenario whose estimate is over it before running (ErrTooMuchWork) and
// stops one that reaches it. Estimate returns that estimate without
// running, for a caller that sums several runs first (the drift sweep).
package cluster
