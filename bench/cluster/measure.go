package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// measure.go turns what a run recorded into its figures. It is pure: every
// function takes recorded instants (Unix ns unless said otherwise) and
// nothing here reads a clock.

// decision is one request the load made on one node.
type decision struct {
	at      int64 // the decision instant handed to the engine, Unix ns
	done    int64 // when Request returned, Unix ns
	granted bool
	node    int   // which node decided
	retry   int64 // the decision's RetryAfter, ns: the node's view
}

// windowCounts returns the grants in each aligned window [from+k·w,
// from+(k+1)·w) that ends at or before to. grants must be sorted.
func windowCounts(grants []int64, from, to, w int64) []int {
	if w <= 0 || to-from < w {
		return nil
	}
	out := make([]int, (to-from)/w)
	for _, g := range grants {
		if g < from {
			continue
		}
		k := (g - from) / w
		if k >= int64(len(out)) {
			break
		}
		out[k]++
	}
	return out
}

// slidingMax returns the most grants in any window of length w that lies
// inside [from, to). grants must be sorted. A window holding the most grants
// can be slid right until it starts at a grant, or left until it ends at
// one, so only those windows are tried: [g, g+w) and (g−w, g].
func slidingMax(grants []int64, from, to, w int64) int {
	lo := sort.Search(len(grants), func(i int) bool { return grants[i] >= from })
	hi := sort.Search(len(grants), func(i int) bool { return grants[i] >= to })
	gs := grants[lo:hi]
	best, j := 0, 0
	for i, g := range gs { // windows starting at a grant
		if g+w > to {
			break
		}
		j = max(j, i)
		for j < len(gs) && gs[j] < g+w {
			j++
		}
		best = max(best, j-i)
	}
	j = 0
	for i, g := range gs { // windows ending at a grant
		if g-w+1 < from {
			continue
		}
		for gs[j] <= g-w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// meanMax returns the mean and the maximum of xs, each divided by by.
func meanMax(xs []int, by float64) (mean, most float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	sum, hi := 0, xs[0]
	for _, x := range xs {
		sum += x
		hi = max(hi, x)
	}
	return float64(sum) / float64(len(xs)) / by, float64(hi) / by
}

// The ground truth. Every grant of every node, in time order, is what really
// happened to the key cluster-wide; the oracles below replay them into one
// exact limiter (every grant is committed, even one the exact limiter would
// have refused, so over-admission stays counted) and ask, at a denial's
// instant, whether that limiter would have had room. A denial it would have
// granted is a false denial.
//
// A node decides at `at` but runs a little later (its goroutine may be
// preempted between reading the clock and deciding), and a peer's grant made
// in between may already have reached it. So the truth at a denial counts
// every grant made up to the denial's `done` (everything the node could have
// known), and "strict" counts only those made up to its `at`; the two differ
// only by that scheduling artefact.

// falseDenialsGCRA replays grants (sorted, Unix ns) into one GCRA bucket of
// emission interval ei and burst offset b (ns) and counts the denials at whose
// instant that bucket held a whole token.
func falseDenialsGCRA(grants []int64, denials []decision, ei, b int64) (counted, strict int) {
	fits := func(tat, t int64) bool { return floorDiv(t+b-max(tat, t), ei) >= 1 }
	for pass := range 2 {
		ds := slices.Clone(denials)
		by := func(d decision) int64 { return d.at }
		if pass == 0 {
			by = func(d decision) int64 { return d.done }
		}
		slices.SortFunc(ds, func(x, y decision) int { return cmp.Compare(by(x), by(y)) })
		var tat int64
		i, n := 0, 0
		for _, d := range ds {
			for i < len(grants) && grants[i] <= by(d) {
				tat = max(tat, grants[i]) + ei
				i++
			}
			if fits(tat, d.at) {
				n++
			}
		}
		if pass == 0 {
			counted = n
		} else {
			strict = n
		}
	}
	return counted, strict
}

// instance is one tier instance of the exact limiter: entered at start (Unix
// ms), with the grants (Unix ns, sorted) it took.
type instance struct {
	start  int64
	grants []int64
}

// tierInstances replays grants (sorted, Unix ns) into one tier of active
// (= window) activeMs and no cooldown, as the engine does in ms: the first
// grant at or after an instance's end enters a new instance.
func tierInstances(grants []int64, activeMs int64) []instance {
	var out []instance
	for _, g := range grants {
		ms := floorDiv(g, 1e6)
		if len(out) == 0 || ms >= out[len(out)-1].start+activeMs {
			out = append(out, instance{start: ms})
		}
		in := &out[len(out)-1]
		in.grants = append(in.grants, g)
	}
	return out
}

// falseDenialsTiers counts the denials at whose instant (ms) the exact
// limiter's tier of limit and activeMs had room: no instance was active (a
// request would have entered a new one), or the active one had taken fewer
// than limit grants.
func falseDenialsTiers(grants []int64, denials []decision, limit int, activeMs int64) (counted, strict int) {
	ins := tierInstances(grants, activeMs)
	room := func(d decision, upTo int64) bool {
		ms := floorDiv(d.at, 1e6)
		k := sort.Search(len(ins), func(i int) bool { return ins[i].start > ms }) - 1
		if k < 0 || ms >= ins[k].start+activeMs {
			return true
		}
		taken := sort.Search(len(ins[k].grants), func(i int) bool { return ins[k].grants[i] > upTo })
		return taken < limit
	}
	for _, d := range denials {
		if room(d, d.done) {
			counted++
		}
		if room(d, d.at) {
			strict++
		}
	}
	return counted, strict
}

// quantile returns the q-quantile of sorted xs by nearest rank.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// probe is one convergence probe: a single hit on a domain of its own, made
// on node at at (Unix ns).
type probe struct {
	node   int
	at     int64
	domain string
}

// convergence returns, for each probe, how long until every other node
// counted it (seen[j][domain] is when node j first applied it, Unix ns), in
// ms, sorted; a probe some node never counted is +Inf and also counted in
// lost.
func convergence(probes []probe, seen []map[string]int64) (lags []float64, lost int) {
	for _, p := range probes {
		worst := 0.0
		for j, s := range seen {
			if j == p.node {
				continue
			}
			t, ok := s[p.domain]
			if !ok {
				worst = math.Inf(1)
				break
			}
			worst = max(worst, float64(t-p.at)/1e6)
		}
		if math.IsInf(worst, 1) {
			lost++
		}
		lags = append(lags, worst)
	}
	slices.Sort(lags)
	return lags, lost
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// explainGCRA describes up to k false denials (counted as falseDenialsGCRA
// counts them): when, on which node, the node's retry-after and the exact
// bucket's tokens; and how many fell in each second of the run.
func explainGCRA(grants []int64, denials []decision, ei, b, start int64, k int) []string {
	ds := slices.Clone(denials)
	slices.SortFunc(ds, func(x, y decision) int { return cmp.Compare(x.done, y.done) })
	var tat int64
	i := 0
	var out []string
	per := map[int64]int{}
	for _, d := range ds {
		for i < len(grants) && grants[i] <= d.done {
			tat = max(tat, grants[i]) + ei
			i++
		}
		fit := floorDiv(d.at+b-max(tat, d.at), ei)
		if fit < 1 {
			continue
		}
		per[(d.at-start)/1e9]++
		if len(out) < k {
			out = append(out, fmt.Sprintf("  t+%.3fs node %d: node retry-after %.1fms; exact bucket %d tokens (grants so far %d), done−at %dµs",
				float64(d.at-start)/1e9, d.node, float64(d.retry)/1e6, fit, i, (d.done-d.at)/1000))
		}
	}
	secs := slices.Sorted(maps.Keys(per))
	var h []string
	for _, s := range secs {
		h = append(h, fmt.Sprintf("%ds:%d", s, per[s]))
	}
	if len(h) > 0 {
		out = append(out, "  per second of the run: "+strings.Join(h, " "))
	}
	return out
}

// explainTiers is explainGCRA for a tier of limit and activeMs.
func explainTiers(grants []int64, denials []decision, limit int, activeMs, start int64, k int) []string {
	ins := tierInstances(grants, activeMs)
	var out []string
	per := map[int64]int{}
	for _, d := range denials {
		ms := floorDiv(d.at, 1e6)
		j := sort.Search(len(ins), func(i int) bool { return ins[i].start > ms }) - 1
		taken, desc := 0, "no instance active"
		if j >= 0 && ms < ins[j].start+activeMs {
			taken = sort.Search(len(ins[j].grants), func(i int) bool { return ins[j].grants[i] > d.done })
			desc = fmt.Sprintf("instance %d entered t+%.3fs has %d", j, float64(ins[j].start*1e6-start)/1e9, taken)
			if taken >= limit {
				continue
			}
		}
		per[(d.at-start)/1e9]++
		if len(out) < k {
			out = append(out, fmt.Sprintf("  t+%.3fs node %d: node retry-after %.1fms; %s", float64(d.at-start)/1e9, d.node, float64(d.retry)/1e6, desc))
		}
	}
	secs := slices.Sorted(maps.Keys(per))
	var h []string
	for _, s := range secs {
		h = append(h, fmt.Sprintf("%ds:%d", s, per[s]))
	}
	if len(h) > 0 {
		out = append(out, "  per second of the run: "+strings.Join(h, " "))
	}
	return out
}
