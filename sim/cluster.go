package sim

import (
	"errors"
	"time"

	"github.com/obol-dev/obol/config"
)

// cluster.go is the cluster simulation as POST /v1/simulate/cluster asks for
// one and reports it: the words package api and package sim/cluster share,
// so that api need not link the cluster simulator (and memberlist with it).

// ErrScenario is wrapped by every error about a cluster scenario the
// simulator refuses; the text after it names the field and what it
// expected ("sim: bad scenario: nodes: must be 1 to 5000, got 0").
var ErrScenario = errors.New("sim: bad scenario")

// ErrTooMuchWork is wrapped by a cluster simulation's error when its work is
// over its budget, estimated before the run or counted during it.
var ErrTooMuchWork = errors.New("sim: over the work budget")

// ClusterScenario is one run of the cluster simulator as the endpoint asks
// for it: N agents sharing Resource, a load offered to them, a network
// between them. Zero fields take the simulator's defaults (sim/cluster's
// Scenario, which has every knob, documents them).
type ClusterScenario struct {
	// Resource is the key's config, normalized (config.ParseResource);
	// required.
	Resource *config.Resource
	// Nodes is the cluster's size; required.
	Nodes int
	// SyncInterval is the shipping tick; 0 = the default.
	SyncInterval time.Duration
	// Drift overrides the resource's drift tolerance when set, in [0, 1].
	Drift *float64
	// Delay is the one-way network delay; nil = the default, 0 = none.
	Delay *time.Duration
	// Loss is the probability that a datagram is lost, per peer: [0, 1).
	Loss float64
	// Rate is the requests offered per second per node; 0 = the default.
	Rate float64
	// Skew spreads the load over the nodes: "even" (""), "hot", "zipf".
	Skew string
	// Keys is how many keys the load falls on; 0 = one.
	Keys int
	// Duration is the simulated time; 0 = the default.
	Duration time.Duration
	// Seed seeds every random draw: one seed, one result.
	Seed uint64
	// TickOnly ships only on the tick, never at the drift threshold.
	TickOnly bool
	// Label is memberlist's label, whose bytes count in every datagram.
	Label string
	// MaxEvents is the run's work budget (requests, ticks, merges and keys held);
	// 0 = the simulator's default. Over it the run fails with
	// ErrTooMuchWork.
	MaxEvents int64
	// Yield, when set, is called between units of work; its error stops
	// the run and is returned as it is.
	Yield func() error
}

// ClusterFigures are what one run of the cluster simulator measured, as the
// endpoint reports them. Rates are per second of virtual time over the
// measured span; "per node" figures are means over the nodes.
type ClusterFigures struct {
	// WorstWindowRatio and MeanWindowRatio: grants per key per aligned
	// window ÷ limit, the worst and the mean over windows with requests.
	WorstWindowRatio, MeanWindowRatio float64
	// FalseDenials: denials while the exact limiter had room.
	FalseDenials int
	// ConvergenceP50 and ConvergenceP99: how long a hit took to be counted
	// on every node; Unconverged, the sampled hits that never were.
	ConvergenceP50, ConvergenceP99 time.Duration
	Unconverged                    int
	// BytesPerNodeS and DatagramsPerNodeS: wire bytes and datagrams sent
	// per node per second; BytesPerHitPerPeer, per granted hit and peer.
	BytesPerNodeS, DatagramsPerNodeS, BytesPerHitPerPeer float64
	// MergesPerNodeS: datagrams merged per node per second.
	MergesPerNodeS float64
	// Requests and Grants over the whole run.
	Requests, Grants int
	// Events is the run's work, as its budget counts it (not in the reply).
	Events int64
}
