package cluster

import (
	"math"
	"slices"
	"time"

	"github.com/obol-dev/obol/config"
)

// judge.go judges what churn costs: how soon a joining agent's view of
// the keys agrees with the oracle (JoinSync), how many granted hits a
// node no longer counts at the end (LostHits), and what keeping other
// origins' counts costs in memory (HeldOriginsMax, HeldKeysMax).
//
// A node's view of key k is what its engine counts, read without
// spending (a peek: zero copies): for tiers, the hits of the instance
// active at the node (TierHits; 0 with none active); for gcra, the tokens
// its bucket is ahead of now ((TAT − now) ÷ emission interval; 0 when
// full), at most the burst: an over-admitted bucket is ahead by more
// than any node can learn of (a count is kept only for its bucket's
// life), and a node whose bucket is full decides as the oracle would. The
// oracle's, the same of its exact limiter (oracle.used). In
// owner mode a node is judged on the keys it needs, as convergence is
// (sim.expects): those it owns or succeeds on the ring and those it
// granted within the last window; every node is judged on every key
// otherwise.
//
// A gcra mesh itself runs below the exact limiter by the spends on their
// way, and by more with tiny limits: a peer's spend is placed at its
// bucket's start, so it has drained a little when it lands (at 5 a second
// over 10 nodes, a steady token below it, over a tolerance of one). So a
// joiner's gcra view also agrees when it is within the tolerance of the
// mesh's, read at its lowest-index node running and not joining: what a
// join must bring is what its peers know.

// joinRec is one agent's join: when it started and how long until its
// view first agreed with the oracle (−1: not yet).
type joinRec struct {
	idx      int
	gen      uint32
	at, lag  int64
	cursor   int // the key that disagreed last: checked first
	finished bool
}

// settleTicks is how many sync intervals (at least 2 s) the run goes on
// after the load ends when LostHits is judged: what a count made at the
// end takes to reach every node (a tick to ship, another for an owner's
// sum, and repair).
const settleTicks = 8

// judgeSetup decides whether LostHits is judged: for a tiers resource
// whose window outlasts the run and its settle, so that every grant is
// still inside its window, and the oracle's one tier instance holds them
// all, when they are compared. Such a run settles after the load ends.
func (sm *sim) judgeSetup() {
	sm.stopAt = sm.end
	if sm.rc.Kind != config.KindTiers {
		return
	}
	settle := max(int64(2*time.Second), settleTicks*sm.sync)
	if int64(sm.rc.Tiers[0].Window) > sm.end+settle {
		sm.lost, sm.stopAt = true, sm.end+settle
	}
}

// tolerance is how far a view may be from the oracle's and agree: drift
// × the limit, at least one hit. The drift is the normalized resource's
// (Scenario.Resource), or the scenario's own.
func (sm *sim) tolerance() float64 {
	d := *sm.rc.Drift
	limit := float64(sm.rc.Count)
	if sm.rc.Kind == config.KindTiers {
		limit = float64(sm.rc.Tiers[0].Limit)
	}
	return max(1, d*limit)
}

// view is node nd's count of key k now (see the file's doc).
func (sm *sim) view(nd *node, k int) float64 {
	t := sm.at(sm.now)
	if sm.rc.Kind == config.KindGCRA {
		ks, err := nd.eng.State(t, sm.resName, sm.domains[k])
		if err != nil || ks.TAT.IsZero() {
			return 0
		}
		return min(float64(ks.TAT.Sub(t))/float64(sm.orc.ei), float64(sm.rc.Burst))
	}
	if err := nd.eng.Decide(&sm.dec, t, sm.resName, sm.domains[k], 0, 0); err != nil || sm.dec.Tier < 1 {
		return 0
	}
	return float64(sm.dec.TierHits)
}

// needs reports whether nd is judged on key k (see the file's doc).
func (sm *sim) needs(nd *node, k int) bool {
	if !sm.owners() {
		return true
	}
	return sm.expects(k)(nd.idx)
}

// checkJoin, at each request and tick of an agent that joined and whose
// view has not yet agreed with the oracle, checks it, from the key that
// disagreed last: the first instant at which every key agrees ends its
// join.
func (sm *sim) checkJoin(nd *node) {
	if nd.join < 0 {
		return
	}
	j := &sm.joins[nd.join]
	tol := sm.tolerance()
	var ref *node
	if sm.rc.Kind == config.KindGCRA {
		for _, o := range sm.nodes {
			if !o.dead && o.join < 0 && o != nd {
				ref = o
				break
			}
		}
	}
	n := len(sm.domains)
	for i := range n {
		k := (j.cursor + i) % n
		if !sm.needs(nd, k) {
			continue
		}
		v := sm.view(nd, k)
		if math.Abs(v-sm.orc.used(k, sm.now)) > tol && (ref == nil || math.Abs(v-sm.view(ref, k)) > tol) {
			j.cursor = k
			return
		}
	}
	j.lag, j.finished = sm.now-j.at, true
	nd.join = -1
}

// sampleHeld takes nd's held origins and keys into their maxima.
func (sm *sim) sampleHeld(nd *node) {
	st := nd.rec.Stats()
	sm.res.HeldOriginsMax = max(sm.res.HeldOriginsMax, int(st.HeldOrigins))
	sm.res.HeldKeysMax = max(sm.res.HeldKeysMax, int(st.HeldKeys))
}

// judge closes the run's churn figures: LostHits and ExtraHits (when
// judged) over the running nodes, and the joins.
func (sm *sim) judge() {
	r := &sm.res
	sm.now = max(sm.now, sm.stopAt-1)
	sm.clk.Set(sm.at(sm.now))
	r.LostHits, r.ExtraHits = -1, -1
	if sm.lost {
		r.LostHits, r.ExtraHits = 0, 0
		for _, nd := range sm.nodes {
			if nd.dead {
				continue
			}
			var lost, extra int
			for k := range sm.domains {
				if !sm.needs(nd, k) {
					continue
				}
				d := int(math.Round(sm.orc.used(k, sm.now) - sm.view(nd, k)))
				if d > 0 {
					lost += d
				} else {
					extra -= d
				}
			}
			r.LostHits, r.ExtraHits = max(r.LostHits, lost), max(r.ExtraHits, extra)
		}
	}
	var lags []int64
	for _, j := range sm.joins {
		if j.finished {
			lags = append(lags, j.lag)
		} else {
			r.JoinsUnsynced++
		}
	}
	slices.Sort(lags)
	r.JoinSyncs = len(lags)
	r.JoinSyncP50 = time.Duration(quantile(lags, 0.50))
	r.JoinSyncP99 = time.Duration(quantile(lags, 0.99))
	if len(lags) > 0 {
		r.JoinSyncMax = time.Duration(lags[len(lags)-1])
	}
}
