// Package reconcile turns each node's hits into cluster-wide counts.
//
// A node records every hit its engine commits as its own grow-only counter
// per key, slot and time bucket (slot 0 is a key's total, slot i its tier i;
// for gcra, spends and refunds). Each sync tick it ships the buckets that
// changed, with its tier entries and its copy holds (gauges with a version),
// and it ships a key at once when the key's unshipped hits reach the drift
// threshold max(1, drift·limit/N), at most one such flush per flush gap.
// When the sender's peers repair loss (Repairer: numbered messages), a
// change ships once; otherwise again 1, 2, 4, 8 and 16 ticks later. A key's
// name rides its first shipment and not again while peers keep it
// (NameTTL); a receiver that lacks one asks the origin (NameAsker, and
// Names answers; names.go). A receiver keeps, per origin, the highest
// count it has seen for each (key, slot, bucket) and applies only the growth
// to its engine, placing those hits at the bucket's start: loss, duplication
// and reordering never inflate a count. Tier entries merge earliest-wins per instance (the engine does that);
// gauges merge highest-version-wins and are dropped when memberlist says
// their node left or died, when the node restarts (a new incarnation), or
// when it has sent nothing for 20 sync intervals (a ghost memberlist still
// thinks alive). Two live agents under one name are detected and logged.
// Nothing here blocks a decision: the engine reads its own merged state.
//
// In owner mode (opt-in, Options.OwnerFrom; owner.go), with a Router
// sender, a key's counts go to its owner and successor on a ring of the
// live members, and the owner sends each origin with the key active the
// sum of everyone else's counts (packet.Packet.Sum); a node counts per
// bucket the greater of sums and direct counts, both lower bounds.
//
// The engine (package local) knows no network: a Cluster is its
// local.Cluster, with which it registers each resource (Register: a
// local.ClusterSpec, which says how long a slot's records matter and the
// limits of its drift thresholds, and the applier of its peers' records)
// and gets the resource's Res, its local.Recorder (own.go), back. The rate
// limit service's store registers its limit values the same way. Peers'
// records are applied to the applier their resource was registered with
// (receive.go); the buckets come from the spec's spans (params.go);
// merge.go is the merge of peers' packets, pure, and sum.go owner mode's.
// The Cluster's steps have a file each: tick.go (Run, Step, Flush),
// ship.go, receive.go (HandlePacket) and repair.go (Snapshot, reships).
package reconcile
