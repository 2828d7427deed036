package reconcile

import (
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// params.go is what reconcile knows of a resource's config: how long each
// slot's records matter, which it takes from the engine's own rules
// (local.TierSpans, local.GCRALife) rather than deriving them again, the
// bucket it counts them in, and the limits its drift thresholds are taken
// of. Slots are local's (local.SlotTotal, ...).

// Bucket sizes: a slot's bucket is a fiftieth of its window, between 1 ms
// and a minute, so a remote hit placed at its bucket's start leaves the
// window at most 2% of it early.
const (
	bucketDiv = 50
	minBucket = int64(1)
	maxBucket = int64(60_000)
)

// params is what reconcile knows of one resource's config.
type params struct {
	kind   config.Kind
	drift  float64
	global int64   // tiers global limit (0 = none or zero: a limit of 0 grants nothing, so ships nothing)
	hard   int64   // tiers hard limit (0 = none or zero, as global)
	limit  []int64 // per slot: the limit a drift threshold is taken of
	bucket []int64 // per slot: bucket size, ms
	life   []int64 // per slot: how long a bucket's hits count, ms
	mark   []int64 // per tier slot: active + cooldown, ms (how long an entry matters)
}

func bucketFor(window int64) int64 {
	return min(max(window/bucketDiv, minBucket), maxBucket)
}

// paramsOf derives a resource's params from its (normalized) config. Per-domain
// overrides are not looked at: buckets and lifetimes come from the default,
// widened to the longest window any override has, so that no hit is dropped
// before its window ends.
func paramsOf(rc *config.Resource) *params {
	p := &params{kind: rc.Kind, drift: config.DefaultDrift}
	if rc.Drift != nil {
		p.drift = *rc.Drift // 0: every hit is its own threshold
	}
	switch rc.Kind {
	case config.KindTiers:
		n := len(rc.Tiers)
		for _, o := range rc.Domains {
			n = max(n, len(o.Tiers))
		}
		p.hard, p.global = int64(config.LimitOr(rc.HardLimit, 0)), int64(config.LimitOr(rc.GlobalLimit, 0))
		p.limit = make([]int64, n+1)
		p.bucket = make([]int64, n+1)
		p.life = make([]int64, n+1)
		p.mark = make([]int64, n+1)
		p.limit[local.SlotTotal] = p.hard
		if p.limit[local.SlotTotal] == 0 {
			p.limit[local.SlotTotal] = p.global
		}
		widen := func(ts []config.Tier) {
			for s, sp := range local.TierSpans(ts) {
				if sp.Hits > p.life[s] {
					p.life[s], p.bucket[s] = sp.Hits, bucketFor(sp.Hits)
				}
				p.mark[s] = max(p.mark[s], sp.Entry)
				if s == local.SlotTotal {
					continue
				}
				if l := int64(ts[s-1].Limit); p.limit[s] == 0 || l < p.limit[s] {
					p.limit[s] = l
				}
			}
		}
		widen(rc.Tiers)
		for _, o := range rc.Domains {
			widen(o.Tiers)
		}
	case config.KindGCRA:
		life := local.GCRALife(rc.Burst, rc.Count, rc.Period)
		for _, o := range rc.Domains {
			life = max(life, local.GCRALife(o.Burst, o.Count, o.Period))
		}
		p.limit = []int64{int64(rc.Burst), int64(rc.Burst)}
		p.bucket = []int64{bucketFor(life), bucketFor(life)}
		p.life = []int64{life, life}
	default:
		// copies ship gauges only; adaptive windows are per node.
	}
	return p
}

// BucketWidths returns the bucket size, ms, of each slot of a resource
// configured as rc (normalized): a hit made at t counts in the bucket
// starting at t − t mod width. Simulators use it to tell which shipped
// bucket holds a given hit.
func BucketWidths(rc *config.Resource) []int64 {
	return append([]int64(nil), paramsOf(rc).bucket...)
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
