package config

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/obol-dev/obol/adaptive"
)

// Bounds on configured values. They are far above any sensible setting; they
// exist so that arithmetic on them (t + burst·period/count, a tier's entry
// time plus active plus cooldown, sums of limits) can never overflow.
const (
	// MaxLimit is the largest count a limit-like field may hold (limits,
	// windows of the adaptive kind, max_keys…).
	MaxLimit = 1_000_000_000
	// MaxDuration is the longest duration a field may hold: 100 years of
	// 365 days.
	MaxDuration = 100 * 365 * 24 * time.Hour
	// MaxNameLen is the longest resource name, namespace name or domain, in
	// bytes. (The API refuses longer names, so a longer override key could
	// never match.)
	MaxNameLen = 256
	// MaxAdaptiveTimeout bounds an adaptive resource's timeout: how long an
	// admitted call nobody completes keeps its place in the window.
	MaxAdaptiveTimeout = time.Hour
	// MaxTiers is the most tiers one tier list (a resource's or an
	// override's) may have. Charon's configurations use a handful; the bound
	// keeps every decision's tier walk short (a decision's cost grows with
	// the tiers it may visit) and matches what a tier entry shared across a
	// cluster can name (64 tiers).
	MaxTiers = 64
)

// Valid reports whether k is one of the five kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindTiers, KindGCRA, KindCopies, KindAdaptive, KindPacer:
		return true
	}
	return false
}

// kindNames are the kinds' names, in the order of Kinds.
var kindNames = func() []string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return names
}()

// Valid reports whether r is one of the rules; "" (the default) is not.
func (r Rules) Valid() bool { return r == RulesOpenZiti || r == RulesPredictive }

// Valid reports whether s is one of the strategies; "" (the default) is not.
func (s Strategy) Valid() bool {
	switch s {
	case StrategyKeepReserve, StrategyExponentialBackoff, StrategyProportionalRemaining:
		return true
	}
	return false
}

var (
	rulesNames    = []string{string(RulesOpenZiti), string(RulesPredictive)}
	strategyNames = []string{string(StrategyKeepReserve), string(StrategyExponentialBackoff), string(StrategyProportionalRemaining)}
)

func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
func badKindMsg(k Kind) string { return enumMsg(string(k), kindNames) }

// Validate checks c and returns nil or a *Problems listing every problem, each
// with its path (`resources["api/search"].tiers[1].limit: must be ≥ 1, got 0`).
// It accepts both a configuration as written and one normalized by Normalize;
// it does not change c. Parse calls it; call it yourself on a Config built in
// Go. A nil or zero Config is valid. Safe for concurrent use if c is not being
// modified.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	var l problemList
	c.check(&l)
	return asError(l.list)
}

// Validate checks one resource's configuration like Config.Validate does,
// with paths starting "resource" (`resource.tiers[0].limit`). The name of the
// resource is not checked (a Resource does not know it).
func (r *Resource) Validate() error {
	var l problemList
	checkResource(&l, "resource", r)
	return asError(l.list)
}

func (c *Config) check(l *problemList) {
	if c.Agent.HTTP != ListenerOff {
		checkAddr(l, "agent.http", c.Agent.HTTP)
	}
	checkString(l, "agent.socket", c.Agent.Socket)
	checkAddr(l, "gossip.bind", c.Gossip.Bind)
	for i, j := range c.Gossip.Join {
		p := index("gossip.join", i)
		if j == "" {
			l.add(p, "must not be empty")
		}
		checkString(l, p, j)
	}
	checkDuration(l, "gossip.sync_interval", c.Gossip.SyncInterval, false)
	checkString(l, "gossip.secret_file", c.Gossip.SecretFile)
	for name, ns := range c.Namespaces {
		p := entry("namespaces", name)
		checkNamespaceName(l, p, name)
		if ns != nil {
			checkInt(l, p+".max_request_limits", ns.MaxRequestLimits, 0)
			checkInt(l, p+".max_request_keys", ns.MaxRequestKeys, 0)
			checkDuration(l, p+".max_request_window", ns.MaxRequestWindow, false)
		}
	}
	for name, r := range c.Resources {
		p := entry("resources", name)
		checkResourceName(l, p, name)
		checkResource(l, p, r)
	}
}

func checkString(l *problemList, path, s string) {
	if !utf8.ValidString(s) {
		l.add(path, "must be valid UTF-8")
	}
}

func checkAddr(l *problemList, path, addr string) {
	if addr == "" {
		return
	}
	checkString(l, path, addr)
	if port, ok := splitPort(addr); !ok || port == "" {
		l.add(path, "must be host:port (e.g. \"127.0.0.1:7070\"), got %q", addr)
	}
}

// splitPort returns the port of a "host:port" address ("[host]:port" for
// an IPv6 host); ok is false for what net.SplitHostPort refuses (no port,
// a stray colon or bracket). It reads as SplitHostPort does, without
// linking package net into the engine, which links this package.
func splitPort(hostport string) (port string, ok bool) {
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		return "", false // missing port
	}
	j, k := 0, 0 // no '[' before j, no ']' before k
	if hostport[0] == '[' {
		end := strings.IndexByte(hostport, ']')
		if end < 0 || end+1 != i {
			return "", false // missing ']', or ']' not followed by the last ':'
		}
		j, k = 1, end+1
	} else if strings.IndexByte(hostport[:i], ':') >= 0 {
		return "", false // too many colons
	}
	if strings.IndexByte(hostport[j:], '[') >= 0 || strings.IndexByte(hostport[k:], ']') >= 0 {
		return "", false // unexpected '[' or ']'
	}
	return hostport[i+1:], true
}

func checkNamespaceName(l *problemList, path, name string) {
	switch {
	case name == "":
		l.add(path, "namespace name must not be empty")
	case !utf8.ValidString(name):
		l.add(path, "namespace name must be valid UTF-8")
	case strings.Contains(name, "/"):
		l.add(path, "namespace name must not contain '/' (it is the part of a resource name before '/')")
	case len(name) > MaxNameLen:
		l.add(path, "namespace name must be at most %d bytes, got %d", MaxNameLen, len(name))
	}
}

// SplitName splits a resource name "NAMESPACE/NAME" at its first '/'. ok is
// false when there is no '/' or either part is empty. NAME may itself contain
// '/'.
func SplitName(resource string) (namespace, name string, ok bool) {
	ns, n, found := strings.Cut(resource, "/")
	if !found || ns == "" || n == "" {
		return "", "", false
	}
	return ns, n, true
}

func checkResourceName(l *problemList, path, name string) {
	ns, n, found := strings.Cut(name, "/")
	switch {
	case !utf8.ValidString(name):
		l.add(path, "resource name must be valid UTF-8")
	case !found:
		l.add(path, "resource name must be NAMESPACE/NAME (e.g. \"api/search\"), got %q", name)
	case ns == "":
		l.add(path, "resource name must be NAMESPACE/NAME: the namespace before '/' is empty")
	case n == "":
		l.add(path, "resource name must be NAMESPACE/NAME: the name after '/' is empty")
	case len(name) > MaxNameLen:
		l.add(path, "resource name must be at most %d bytes, got %d", MaxNameLen, len(name))
	case strings.IndexByte(name, 0) >= 0:
		l.add(path, "resource name must not contain a NUL byte")
	}
}

// checkInt checks min ≤ v ≤ MaxLimit.
func checkInt(l *problemList, path string, v, min int) {
	if v < min {
		l.add(path, "must be ≥ %d, got %d", min, v)
	} else if v > MaxLimit {
		l.add(path, "must be ≤ %d, got %d", MaxLimit, v)
	}
}

// checkLimit checks a limit field: absent (nil) is no limit; a set one is
// in [0, MaxLimit], 0 granting nothing.
func checkLimit(l *problemList, path string, v *int) {
	if v != nil {
		checkInt(l, path, *v, 0)
	}
}

// checkDuration checks 0 ≤ d ≤ MaxDuration, and d > 0 when positive is set.
func checkDuration(l *problemList, path string, d time.Duration, positive bool) {
	switch {
	case positive && d <= 0:
		l.add(path, "must be > 0, got %s", d)
	case d < 0:
		l.add(path, "must be ≥ 0, got %s", d)
	case d > MaxDuration:
		l.add(path, "must be ≤ %s (100 years), got %s", MaxDuration, d)
	}
}

// minTierLimit is the least limit of a tier, which checkTier checks and
// the compact syntax's reader quotes.
const minTierLimit = 1

// checkTier checks one tier: limit ≥ minTierLimit, window > 0, active ≥ 0,
// cooldown ≥ 0, each duration a whole number of milliseconds (the tiers
// engine keeps time in milliseconds, the API's unit; a finer duration would
// be silently rounded).
func checkTier(l *problemList, path string, t Tier) {
	checkInt(l, field(path, "limit"), t.Limit, minTierLimit)
	checkDuration(l, field(path, "window"), t.Window, true)
	checkDuration(l, field(path, "active"), t.Active, false)
	checkDuration(l, field(path, "cooldown"), t.Cooldown, false)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"window", t.Window}, {"active", t.Active}, {"cooldown", t.Cooldown}} {
		if d.v > 0 && d.v%time.Millisecond != 0 {
			l.add(field(path, d.name), "must be a whole number of milliseconds, got %s", d.v)
		}
	}
}

func checkTiers(l *problemList, path string, ts []Tier) {
	if len(ts) > MaxTiers {
		l.add(path, "at most %d tiers, got %d", MaxTiers, len(ts))
		return // one problem, not one per tier
	}
	for i, t := range ts {
		checkTier(l, index(path, i), t)
	}
}

// checkGCRA checks burst ≥ 1, count ≥ 1, period > 0, an emission interval
// period/count of at least 1ns and a burst offset within MaxDuration.// checkResource checks r: its kind, then each field the schema lists, as
// checkFields says, then the fields its pacer strategy does not read.
func checkResource(l *problemList, path string, r *Resource) {
	if r == nil {
		l.add(path, "must be a mapping, got null")
		return
	}
	k := r.Kind
	switch {
	case k == "":
		l.add(field(path, "kind"), "required (one of %s)", orList(kindNames))
	case !k.Valid():
		l.add(field(path, "kind"), "%s", badKindMsg(k))
	}
	checkFields(l, path, r, schema, (*spec).belongs, (*spec).wrongKind)
	if k != KindPacer || !r.Strategy.Valid() && r.Strategy != "" {
		return
	}
	s := r.Strategy
	if s == "" {
		s = StrategyKeepReserve
	}
	for _, f := range schema {
		if f.v.isSet(r) && !f.readBy(s) {
			users := make([]string, len(f.strategies))
			for i, x := range f.strategies {
				users[i] = string(x)
			}
			l.add(field(path, f.key), "not read by strategy %s (%s is for strategy %s): leave it out", s, f.key, joinAnd(users))
		}
	}
}

// checkOverride checks the override o of a resource of kind k, in a view
// of it as a Resource, as checkFields says.
func checkOverride(l *problemList, path string, k Kind, o *Override) {
	if o == nil {
		l.add(path, "must be a mapping, got null")
		return
	}
	checkFields(l, path, o.view(k), overrideSchema, (*spec).inOverrides, func(f *spec, k Kind) string { return wrongOverrideMsg(f.key, k) })
}

// checkFields checks the fields fs of r, a resource or an override's view.
// With a known kind, a field set but not belonging to it (in belongs' terms)
// is a problem, named by wrong, and every field that belongs is checked,
// set or not, as are the common ones; with an unknown kind, the fields that
// are set are checked, each on its own terms.
func checkFields(l *problemList, path string, r *Resource, fs []*spec, belongs func(*spec, Kind) bool, wrong func(*spec, Kind) string) {
	k := r.Kind
	known := k.Valid()
	for _, f := range fs {
		set := !f.common() && f.v.isSet(r)
		if known && set && !belongs(f, k) {
			l.add(field(path, f.key), "%s", wrong(f, k))
			continue
		}
		if f.common() || known && belongs(f, k) || !known && set {
			p := field(path, f.key)
			f.v.check(l, p, r)
			if f.check != nil {
				f.check(l, p, r)
			}
		}
	}
}

// The checks the schema's entries name beyond their values' own: each takes
// the path of its field.

// checkShadow: a pacer only advises a wait, so it has no shadow mode.
func checkShadow(l *problemList, path string, r *Resource) {
	if r.Kind == KindPacer && r.Shadow {
		l.add(path, "kind pacer has no shadow mode: a pacer only advises a wait (to try one, let the callers ignore wait_ms)")
	}
}

// gcraInterval returns the emission interval period/count of r (a gcra
// resource or override, or one of unknown kind with burst, count and period
// all set), when count and period are in range; ok is false otherwise.
func gcraInterval(r *Resource) (ei time.Duration, ok bool) {
	together := r.Kind == KindGCRA || !r.Kind.Valid() && r.Burst != 0 && r.Count != 0 && r.Period != 0
	if !together || r.Count < 1 || r.Count > MaxLimit || r.Period <= 0 || r.Period > MaxDuration {
		return 0, false
	}
	return r.Period / time.Duration(r.Count), true
}

// checkPeriod: the emission interval period/count is at least 1ns.
func checkPeriod(l *problemList, path string, r *Resource) {
	if ei, ok := gcraInterval(r); ok && ei < 1 {
		l.add(path, "period/count must be at least 1ns, got %s/%d (count at most %d for this period)", r.Period, r.Count, int64(r.Period))
	}
}

// checkBurst: the burst offset burst·period/count is within MaxDuration.
func checkBurst(l *problemList, path string, r *Resource) {
	ei, ok := gcraInterval(r)
	if ok && ei >= 1 && r.Burst >= 1 && r.Burst <= MaxLimit && ei > MaxDuration/time.Duration(r.Burst) {
		l.add(path, "burst·period/count must be ≤ %s (100 years), got %d·%s", MaxDuration, r.Burst, ei)
	}
}

// checkMaxWindow: min_window (at least adaptive.MinMinWindow) ≤
// max_window ≤ MaxLimit.
func checkMaxWindow(l *problemList, path string, r *Resource) {
	min := max(r.MinWindow, adaptive.MinMinWindow)
	if r.MaxWindow < min {
		l.add(path, "must be ≥ min_window (%d), got %d", min, r.MaxWindow)
	} else {
		checkInt(l, path, r.MaxWindow, min)
	}
}

// checkTimeout: an adaptive timeout is at most MaxAdaptiveTimeout.
func checkTimeout(l *problemList, path string, r *Resource) {
	if r.Kind == KindAdaptive && r.Timeout > MaxAdaptiveTimeout {
		l.add(path, "must be ≤ %s (a ticket nobody completes holds its place in the window that long), got %s", MaxAdaptiveTimeout, r.Timeout)
	}
}

// checkMultiplier: a multiplier is 0 (the default) or a finite number ≥
// adaptive.MinMultiplier.
func checkMultiplier(l *problemList, path string, r *Resource) {
	if r.Multiplier != 0 && !(r.Multiplier >= adaptive.MinMultiplier && r.Multiplier <= math.MaxFloat64) {
		l.add(path, "must be a number ≥ %v (0 means %v), got %v", adaptive.MinMultiplier, adaptive.DefaultMultiplier, r.Multiplier)
	}
}

// valid UTF-8, at most MaxNameLen bytes.
func checkDomain(l *problemList, path, d string) {
	switch {
	case d == "":
		l.add(path, "domain must not be empty")
	case !utf8.ValidString(d):
		l.add(path, "domain must be valid UTF-8")
	case len(d) > MaxNameLen:
		l.add(path, "domain must be at most %d bytes, got %d", MaxNameLen, len(d))
	}
}

func checkGroups(l *problemList, path string, gs []Group) {
	names := make(map[string]int, len(gs))
	for i, g := range gs {
		p := index(path, i)
		switch {
		case g.Name == "":
			l.add(field(p, "name"), "must not be empty")
		case names[g.Name] > 0:
			l.add(field(p, "name"), "duplicate group name %q (also %s)", g.Name, index(path, names[g.Name]-1))
		default:
			names[g.Name] = i + 1
		}
		if !utf8.ValidString(g.Name) {
			l.add(field(p, "name"), "must be valid UTF-8")
		} else if len(g.Name) > MaxNameLen {
			l.add(field(p, "name"), "must be at most %d bytes, got %d", MaxNameLen, len(g.Name))
		}
		checkLimit(l, field(p, "limit"), g.Limit)
		if len(g.Domains) == 0 {
			l.add(field(p, "domains"), "must list at least one domain")
		}
		seen := make(map[string]int, len(g.Domains))
		for j, d := range g.Domains {
			dp := index(field(p, "domains"), j)
			checkDomain(l, dp, d)
			if d != "" && seen[d] > 0 {
				l.add(dp, "duplicate domain %q in group (also domains[%d])", d, seen[d]-1)
			} else {
				seen[d] = j + 1
			}
		}
	}
}
