package reconcile

import (
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// params.go is what reconcile knows of a registered resource: its spec
// (local.ClusterSpec, which the registrant builds from what it owns: the
// engine from the resource's config, the rate limit service from its limit
// values), the bucket each slot's records are counted in, derived here
// from the slot's span, and the applier its peers' records go to. Slots
// are local's (local.SlotTotal, ...).

// Bucket sizes: a slot's bucket is a fiftieth of its window, between 1 ms
// and a minute, so a remote hit placed at its bucket's start leaves the
// window at most 2% of it early.
const (
	bucketDiv = 50
	minBucket = int64(1)
	maxBucket = int64(60_000)
)

// params is what reconcile knows of one registered resource.
type params struct {
	drift     float64
	shipLate  bool    // ship a bucket that aged out unshipped, once (local.ClusterSpec.ShipLate)
	replays   bool    // a reset forgets peers' later counts too: apply them again (local.ClusterSpec.Replays)
	requested bool    // a limit set by a request (local.ClusterSpec.Requested)
	global    int64   // the limit of every key together (0 = none or zero: a limit of 0 grants nothing, so ships nothing)
	hard      int64   // the limit of one key's hits of every tier (0 = none or zero, as global)
	limit     []int64 // per slot: the limit a drift threshold is taken of
	bucket    []int64 // per slot: bucket size, ms (0 for a slot of no span)
	life      []int64 // per slot: how long a bucket's hits count, ms
	mark      []int64 // per slot: how long a tier entry matters (active + cooldown), ms
	applier   local.Applier
}

func bucketFor(window int64) int64 {
	return min(max(window/bucketDiv, minBucket), maxBucket)
}

// paramsOf returns the params of a resource registered with spec s and
// applier a. The spec's values are taken as they are: the registrant has
// validated them.
func paramsOf(s local.ClusterSpec, a local.Applier) *params {
	p := &params{drift: s.Drift, shipLate: s.ShipLate, replays: s.Replays, requested: s.Requested, global: s.Global, hard: s.Hard, applier: a}
	entries := false
	if len(s.Spans) > 0 {
		p.bucket = make([]int64, len(s.Spans))
		p.life = make([]int64, len(s.Spans))
		p.mark = make([]int64, len(s.Spans))
		for i, sp := range s.Spans {
			p.life[i], p.mark[i] = sp.Hits, sp.Entry
			if sp.Hits > 0 {
				p.bucket[i] = bucketFor(sp.Hits)
			}
			entries = entries || sp.Entry > 0
		}
		if s.Refunds { // slot SlotTierRefund+i: hits of slot i given back
			n := len(s.Spans)
			for _, a := range []*[]int64{&p.bucket, &p.life, &p.mark} {
				*a = append(*a, make([]int64, local.SlotTierRefund+n-len(*a))...)
			}
			copy(p.bucket[local.SlotTierRefund:], p.bucket[:n])
			copy(p.life[local.SlotTierRefund:], p.life[:n])
		}
	}
	if !entries {
		p.mark = nil // no slot has entries: a peer's entry of one matters nowhere (life)
	}
	if len(s.Limits) > 0 {
		p.limit = append([]int64(nil), s.Limits...)
	}
	return p
}

// BucketWidths returns the bucket size, ms, of each slot of a resource
// configured as rc (normalized), as the engine registers it: a hit made at
// t counts in the bucket starting at t − t mod width. Simulators use it to
// tell which shipped bucket holds a given hit.
func BucketWidths(rc *config.Resource) []int64 {
	s := local.ClusterSpecOf(rc)
	return paramsOf(s, nil).bucket[:len(s.Spans)]
}

// threshold is the unshipped hits of a key at which it is shipped at once:
// max(1, drift·limit/n) for a slot whose limit is limit; limit 0 means no
// limit, and so no hurry.
func threshold(drift float64, limit int64, n int) int64 {
	if limit <= 0 {
		return 1 << 62
	}
	if n < 1 {
		n = 1
	}
	return max(1, int64(drift*float64(limit)/float64(n)))
}
