// Package sim runs simulations: what an agent would decide, in virtual
// time, without touching any live state.
//
// This package is the single-node simulator behind POST /v1/simulate: Run
// decides simulated requests on a fresh local.Engine that holds only the
// simulated resource, at the virtual instants Base + AtMs. Pace bounds a
// simulation's work (a limit of processor time, read by ThreadTime, and a
// bound on the clock) and rests between slices of work; the caller runs
// it with internal/lowprio.Run (a thread of its own at the lowest
// scheduling priority, with a P of its own), so that live decisions keep
// the processors.
//
// Package sim/cluster is the virtual-time cluster simulator (N agents, each
// the real engine and reconcile cluster, over a simulated network) behind
// POST /v1/simulate/cluster, bench/scale and bench/churn. It is a package of
// its own because it runs the real gossip and reconcile code, and so links
// memberlist: package api imports this package, which links only config and
// local, and reaches sim/cluster through its ClusterSimulator interface,
// which the agent fills.
package sim
