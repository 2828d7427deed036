package local

// Differential tests: random configs and traces, decided request by request by
// the oracle of reference_test.go and by the engine, every reply field
// compared. Scale with -diff.n=N (or OBOL_DIFF_N); reproduce with the seed
// printed on failure, -diff.seed=S (or OBOL_DIFF_SEED).

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

var (
	diffNFlag    = flag.Int("diff.n", 0, "random traces per differential test (0 = the default; env OBOL_DIFF_N)")
	diffSeedFlag = flag.Uint64("diff.seed", 0, "seed of the differential tests (0 = a fresh one; env OBOL_DIFF_SEED)")
)

// The default numbers of traces keep a run of both tests under -race within
// about 10 s on a small machine; the oracle's brute-force retry_after search is
// what costs.
const (
	diffDefaultTiers = 700
	diffDefaultGCRA  = 1000
)

func diffN(t *testing.T, def int) int {
	n := *diffNFlag
	if n == 0 {
		if v := os.Getenv("OBOL_DIFF_N"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 0 {
				t.Fatalf("OBOL_DIFF_N=%q: want a count of traces", v)
			}
		}
	}
	if n == 0 {
		n = def
		if testing.Short() {
			n /= 10
		}
	}
	return n
}

func diffSeed(t *testing.T) uint64 {
	s := *diffSeedFlag
	if s == 0 {
		if v := os.Getenv("OBOL_DIFF_SEED"); v != "" {
			var err error
			if s, err = strconv.ParseUint(v, 10, 64); err != nil {
				t.Fatalf("OBOL_DIFF_SEED=%q: want an unsigned integer", v)
			}
		}
	}
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	return s
}

// diffFieldRule is the sentence of docs/semantics.md each compared field checks.
var diffFieldRule = map[string]string{
	"granted": "granted — hits granted (0 = rejected); reject (change nothing) if granted < m or granted = 0, " +
		"else commit the first `granted` hits of `take`, lowest tier first (gcra: granted = min(q, fit))",
	"tier":           "the current tier c is the active tier with the greatest index, or 0",
	"tier_limit":     "tier_limit — its limit (0 for tier 0)",
	"tier_hits":      "tier_hits — the hits in its window; a hit made at h is inside a window of length W at time t exactly when t - h < W",
	"tier_window_ms": "the current tier's window (0 for tier 0), after normalization",
	"burst":          "burst — this request entered a tier above the one that was current before it",
	"limited_by_hard": "limited_by_hard — H cut the grant below what the tiers allowed " +
		"(H − domain hits within 1 s < q − need)",
	"limited_by_global": "limited_by_global — G cut the grant below what the tiers allowed " +
		"(G − all domains' hits within 1 s < q − need)",
	"hard_limit":              "hard_limit H as configured",
	"global_limit":            "global_limit G as configured",
	"domain_hits_last_second": "domain hits within 1 s of t, after the decision",
	"global_hits_last_second": "all domains' hits within 1 s of t, after the decision",
	"remaining": "remaining — the most hits a request at the same instant could now be granted (the same walk with q = ∞, " +
		"capped by H and G); gcra: floor((t + B − max(tat, t)) / EI) after the decision",
	"retry_after_ms": "retry_after_ms — the least wait after which a request of min_copies hits (at least 1) would be granted, " +
		"assuming no other traffic; 0 when now; −1 when never (gcra: max(0, max(tat,t) + m·EI − B − t)), rounded up to the ms",
	"reset_after_ms": "reset_after_ms — the least wait after which every tier of the domain is inactive and the domain has no hit " +
		"within 1 s (gcra: max(0, tat − t)), rounded up to the ms",
	"kind":        "the resource's kind",
	"gcra_burst":  "gcra burst as configured",
	"gcra_period": "gcra period as configured",
	"shadow":      "shadow is off: rejections are not turned into grants",
	"lenient":     "the resource is configured: no lenient grant",
	"error":       "q > burst is a client error (gcra); a tiers request is never an error",
}

// diffCase is one random config and trace. res is already normalized; raw is
// the tier list before normalization, for the report.
type diffCase struct {
	res  *config.Resource
	raw  []config.Tier
	reqs []confRequest
	want []map[string]string // the oracle's replies, when already known
}

func diffIntp(n int) *int { return &n }

// diffGenTiers draws a tiers config: 0–4 tiers, whole-ms durations, some
// windows longer than active, some actives not a multiple of the window, some
// removed (active 0), cooldowns, skippable tiers, hard and global limits.
func diffGenTiers(r *rand.Rand) (raw []config.Tier, res *config.Resource) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for range r.IntN(5) {
		limit := 1 + r.IntN(6)
		if r.IntN(5) == 0 {
			limit = 1 + r.IntN(20)
		}
		var window int
		switch r.IntN(3) {
		case 0:
			window = 1 + r.IntN(20)
		case 1:
			window = 100 * (1 + r.IntN(15))
		default:
			window = 1 + r.IntN(1500)
		}
		var active int
		switch r.IntN(8) {
		case 0:
			active = 0 // removed by normalization
		case 1:
			active = window
		case 2, 3:
			active = window * (1 + r.IntN(4))
		case 4:
			active = 1 + r.IntN(window) // window > active
		default:
			active = 1 + r.IntN(3000) // rarely a multiple of window
		}
		cooldown := 0
		if r.IntN(2) == 0 {
			cooldown = 1 + r.IntN(2500)
		}
		raw = append(raw, config.Tier{Limit: limit, Window: ms(window), Active: ms(active),
			Cooldown: ms(cooldown), Skippable: r.IntN(3) == 0})
	}
	res = &config.Resource{Kind: config.KindTiers, Tiers: confNormalize(raw)}
	sum := 0
	for _, t := range res.Tiers {
		sum += t.Limit
	}
	// "an absent limit is no limit; a limit of 0 grants nothing": half the
	// resources leave a limit absent, and one set limit in eight is 0.
	drawLimit := func(most int) *int {
		switch {
		case r.IntN(2) == 0:
			return nil
		case r.IntN(8) == 0:
			return config.Limit(0)
		}
		return config.Limit(1 + r.IntN(most))
	}
	res.HardLimit = drawLimit(sum + 3)
	res.GlobalLimit = drawLimit(2*sum + 3)
	return raw, res
}

// diffGenTiersTrace draws requests of 1–4 domains: bulk requests (up to about
// twice the sum of the limits) with min_copies in 0..copies, peeks, several
// requests at the same instant, short and long gaps, gaps that land on (or
// next to) the instant the previous reply named in retry_after_ms or
// reset_after_ms, and gaps long enough for everything to reset. It decides
// the trace with the oracle as it goes and keeps the replies in want.
func diffGenTiersTrace(r *rand.Rand, res *config.Resource) (reqs []confRequest, want []map[string]string) {
	sum := 0
	var cycle int64
	for _, t := range res.Tiers {
		sum += t.Limit
		cycle = max(cycle, refMs(t.Active+t.Cooldown))
	}
	o := newConfOracle(res)
	domains := 1 + r.IntN(4)
	at := int64(r.IntN(3))
	var last map[string]string
	for range 10 + r.IntN(70) {
		at += diffGap(r, last, max(cycle, 1000))
		req := confRequest{AtMs: at, Domain: "d" + strconv.Itoa(r.IntN(domains))}
		switch c := r.IntN(20); {
		case c < 3:
			req.Copies = diffIntp(0) // peek
		case c < 12: // copies defaults to 1
		case c < 18:
			req.Copies = diffIntp(2 + r.IntN(sum+1))
		default:
			req.Copies = diffIntp(2 + r.IntN(2*sum+2))
		}
		if req.Copies != nil && *req.Copies > 0 && r.IntN(2) == 0 {
			req.MinCopies = diffIntp(r.IntN(*req.Copies + 1))
		}
		last = o.do(req)
		reqs, want = append(reqs, req), append(want, last)
	}
	return reqs, want
}

// diffGap draws the wait before the next request: none (same instant), short,
// long, one that lands on or next to an instant the last reply named, or one
// at least reset long (everything has reset after it).
func diffGap(r *rand.Rand, last map[string]string, reset int64) int64 {
	switch g := r.IntN(24); {
	case g < 5:
		return 0
	case g < 12:
		return 1 + r.Int64N(40)
	case g < 18:
		return 1 + r.Int64N(1500)
	case g < 19:
		return 1 + r.Int64N(6000)
	case g < 23:
		key := "retry_after_ms"
		if g >= 21 {
			key = "reset_after_ms"
		}
		w, err := strconv.ParseInt(last[key], 10, 64)
		if err != nil || w < 0 {
			return 1 + r.Int64N(40)
		}
		return max(0, w-1+r.Int64N(3)) // w−1, w or w+1
	default:
		return reset + r.Int64N(1000)
	}
}

// diffGenGCRA draws a gcra config (ms-granular periods) and a trace with
// partial grants, peeks, refunds and a few client errors (copies > burst).
func diffGenGCRA(r *rand.Rand) *diffCase {
	res := &config.Resource{Kind: config.KindGCRA, Burst: 1 + r.IntN(30), Count: 1 + r.IntN(50)}
	switch r.IntN(3) {
	case 0:
		res.Period = time.Duration(1+r.IntN(50)) * time.Millisecond
	case 1:
		res.Period = time.Duration(1+r.IntN(60)) * 100 * time.Millisecond
	default:
		res.Period = time.Duration(1+r.IntN(5000)) * time.Millisecond
	}
	ei := max(int64(res.Period)/int64(res.Count)/int64(time.Millisecond), 1)
	full := ei*int64(res.Burst) + 1
	o := newConfOracle(res)
	c := &diffCase{res: res}
	domains := 1 + r.IntN(3)
	at := int64(0)
	var last map[string]string
	for range 10 + r.IntN(90) {
		switch g := r.IntN(4); {
		case g == 0:
			at += diffGap(r, last, full)
		case g == 1:
			at += 1 + r.Int64N(2*ei+1)
		default:
			at += r.Int64N(full)
		}
		req := confRequest{AtMs: at, Domain: "k" + strconv.Itoa(r.IntN(domains))}
		switch k := r.IntN(40); {
		case k < 4:
			req.Op = "refund"
			req.Copies = diffIntp(1 + r.IntN(res.Burst+2))
		case k < 8:
			req.Copies = diffIntp(0)
		case k < 9:
			req.Copies = diffIntp(res.Burst + 1 + r.IntN(3)) // client error
		case k < 24:
		default:
			req.Copies = diffIntp(1 + r.IntN(res.Burst))
		}
		if req.Op == "" && req.Copies != nil && *req.Copies > 0 && r.IntN(2) == 0 {
			req.MinCopies = diffIntp(r.IntN(*req.Copies + 1))
		}
		last = o.do(req)
		c.reqs, c.want = append(c.reqs, req), append(c.want, last)
	}
	return c
}

// diffMismatch is the first request on which the two disagree.
type diffMismatch struct {
	index     int
	want, got map[string]string
	fields    []string
}

// diffRun decides c's trace with a fresh engine and, unless c.want holds its
// replies already, a fresh oracle.
func diffRun(c *diffCase) *diffMismatch {
	o, e := newConfOracle(c.res), newConfEngine(c.res)
	for i, req := range c.reqs {
		var want map[string]string
		if c.want != nil {
			want = c.want[i]
		} else {
			want = o.do(req)
		}
		got := e.do(req)
		if f := diffFields(want, got); len(f) > 0 {
			return &diffMismatch{index: i, want: want, got: got, fields: f}
		}
	}
	return nil
}

// diffFields lists the fields (union of both replies) whose values differ.
func diffFields(want, got map[string]string) []string {
	var f []string
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			f = append(f, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			f = append(f, k)
		}
	}
	sort.Strings(f)
	return f
}

// diffShrink makes a failing case smaller while it still fails: fewer tiers,
// no hard or global limit, fewer requests.
func diffShrink(c *diffCase) *diffCase {
	fails := func(x *diffCase) bool { return diffRun(x) != nil }
	cur := c
	for changed := true; changed; {
		changed = false
		if cur.res.Kind == config.KindTiers {
			for i := len(cur.res.Tiers) - 1; i >= 0; i-- {
				res := *cur.res
				res.Tiers = append(append([]config.Tier(nil), cur.res.Tiers[:i]...), cur.res.Tiers[i+1:]...)
				if x := (&diffCase{res: &res, reqs: cur.reqs}); fails(x) {
					cur, changed = x, true
				}
			}
			if cur.res.HardLimit != nil {
				res := *cur.res
				res.HardLimit = nil
				if x := (&diffCase{res: &res, reqs: cur.reqs}); fails(x) {
					cur, changed = x, true
				}
			}
			if cur.res.GlobalLimit != nil {
				res := *cur.res
				res.GlobalLimit = nil
				if x := (&diffCase{res: &res, reqs: cur.reqs}); fails(x) {
					cur, changed = x, true
				}
			}
		}
		if len(cur.reqs) > 0 && cur.reqs[0].AtMs != 0 {
			// Decisions depend on time differences only: start at 0.
			reqs := slices.Clone(cur.reqs)
			for i := range reqs {
				reqs[i].AtMs -= cur.reqs[0].AtMs
			}
			if x := (&diffCase{res: cur.res, raw: cur.raw, reqs: reqs}); fails(x) {
				cur, changed = x, true
			}
		}
		for i := len(cur.reqs) - 1; i >= 0; i-- {
			reqs := append(append([]confRequest(nil), cur.reqs[:i]...), cur.reqs[i+1:]...)
			if x := (&diffCase{res: cur.res, raw: cur.raw, reqs: reqs}); fails(x) {
				cur, changed = x, true
			}
		}
	}
	return cur
}

func diffConfigString(c *diffCase) string {
	var b strings.Builder
	r := c.res
	switch r.Kind {
	case config.KindTiers:
		fmt.Fprintf(&b, "kind: tiers, hard_limit: %d, global_limit: %d (-1 = absent), tiers (normalized, whole ms): [", refLimit(r.HardLimit), refLimit(r.GlobalLimit))
		for i, t := range r.Tiers {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{limit: %d, window: %v, active: %v, cooldown: %v, skippable: %v}",
				t.Limit, t.Window, t.Active, t.Cooldown, t.Skippable)
		}
		b.WriteString("]")
		if c.raw != nil {
			fmt.Fprintf(&b, "\n  drawn before normalization: %+v", c.raw)
		}
	default:
		fmt.Fprintf(&b, "kind: gcra, burst: %d, count: %d, period: %v", r.Burst, r.Count, r.Period)
	}
	return b.String()
}

func diffMapString(m map[string]string, keys []string) string {
	var parts []string
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			v = "(absent)"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

// diffReport describes a failing case, minimised, for t.Fatal.
func diffReport(name string, seed uint64, trace int, orig *diffCase, first *diffMismatch) string {
	var b strings.Builder
	fmt.Fprintf(&b, "oracle and engine disagree (seed %d, trace #%d; rerun: go test -run '^%s$' ./local/ -diff.seed=%d)\n",
		seed, trace, name, seed)
	fmt.Fprintf(&b, "as drawn: %d requests, first difference at request #%d in %v\n", len(orig.reqs), first.index, first.fields)
	c := diffShrink(orig)
	m := diffRun(c)
	fmt.Fprintf(&b, "minimised case:\n  config: %s\n  trace (%d requests, at_ms from virtual 0):\n", diffConfigString(c), len(c.reqs))
	for i, r := range c.reqs[:m.index+1] {
		fmt.Fprintf(&b, "    #%d %s\n", i, confRequestString(r))
	}
	fmt.Fprintf(&b, "  at request #%d:\n", m.index)
	for _, f := range m.fields {
		w, ok := m.want[f]
		if !ok {
			w = "(absent)"
		}
		g, ok := m.got[f]
		if !ok {
			g = "(absent)"
		}
		fmt.Fprintf(&b, "    %s: oracle %s, engine %s\n      SEMANTICS: %s\n", f, w, g, diffFieldRule[f])
	}
	keys := make([]string, 0, len(m.want))
	for k := range m.want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "  oracle: %s\n  engine: %s\n", diffMapString(m.want, keys), diffMapString(m.got, keys))
	return b.String()
}

// diffStats counts what the traces exercised, logged so that a generator
// that stops covering something shows.
type diffStats map[string]int

func (s diffStats) add(c *diffCase) {
	for i, req := range c.reqs {
		f := c.want[i]
		switch {
		case f["error"] != "":
			s["client errors"]++
		case req.Op == "refund":
			s["refunds"]++
		case req.Copies != nil && *req.Copies == 0:
			s["peeks"]++
		case f["granted"] == "0":
			s["rejections"]++
		default:
			s["grants"]++
			if copies, _ := req.args(); f["granted"] != strconv.Itoa(copies) {
				s["partial grants"]++
			}
		}
		for _, k := range []string{"burst", "limited_by_hard", "limited_by_global"} {
			if f[k] == "true" {
				s[k]++
			}
		}
		if f["retry_after_ms"] == "-1" {
			s["retry never"]++
		}
		if f["tier"] != "" && f["tier"] != "0" && c.res.Kind == config.KindTiers {
			s["in tier "+f["tier"]]++
		}
	}
}

func (s diffStats) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, s[k]))
	}
	return strings.Join(parts, ", ")
}

// diffMain decides n random traces, spread over GOMAXPROCS workers (each
// trace has its own oracle and engine), and reports the failing trace of the
// lowest index.
func diffMain(t *testing.T, defaultN int, gen func(r *rand.Rand) *diffCase) {
	n, seed := diffN(t, defaultN), diffSeed(t)
	type failure struct {
		trace int
		c     *diffCase
		m     *diffMismatch
	}
	var (
		mu    sync.Mutex
		first *failure
		reqs  int
		wg    sync.WaitGroup
	)
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				mu.Lock()
				stop := first != nil && first.trace < i
				mu.Unlock()
				if stop {
					return
				}
				c := gen(rand.New(rand.NewPCG(seed, uint64(i))))
				m := diffRun(c)
				mu.Lock()
				reqs += len(c.reqs)
				if m != nil && (first == nil || i < first.trace) {
					first = &failure{i, c, m}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		if e := first.m.got["error"]; first.m.index == 0 && strings.Contains(e, "not implemented") {
			t.Fatalf("the engine is not implemented yet: %s", e)
		}
		t.Fatal(diffReport(t.Name(), seed, first.trace, first.c, first.m))
	}
	stats := diffStats{}
	for i := range min(n, 200) {
		stats.add(gen(rand.New(rand.NewPCG(seed, uint64(i)))))
	}
	t.Logf("seed %d: %d traces, %d requests agree; what the first %d traces exercised: %v", seed, n, reqs, min(n, 200), stats)
}

// TestDifferentialTiers compares oracle and engine on random tiers resources.
func TestDifferentialTiers(t *testing.T) {
	diffMain(t, diffDefaultTiers, func(r *rand.Rand) *diffCase {
		raw, res := diffGenTiers(r)
		reqs, want := diffGenTiersTrace(r, res)
		return &diffCase{res: res, raw: raw, reqs: reqs, want: want}
	})
}

// TestDifferentialGCRA compares oracle and engine on random gcra resources,
// refunds included.
func TestDifferentialGCRA(t *testing.T) {
	diffMain(t, diffDefaultGCRA, diffGenGCRA)
}
