package config

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
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

// Defaults filled in by normalization for kind adaptive.
const (
	// DefaultGrowEvery is the adaptive grow_every used when it is 0.
	DefaultGrowEvery = 10
	// DefaultMargin is the adaptive margin used when it is 0.
	DefaultMargin = 10
	// DefaultTimeout is the adaptive timeout used when it is 0.
	DefaultTimeout = 30 * time.Second
)

// Valid reports whether k is one of the five kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindTiers, KindGCRA, KindCopies, KindAdaptive, KindPacer:
		return true
	}
	return false
}

// kindNames are the kinds, in the order messages list them.
var kindNames = []string{"tiers", "gcra", "copies", "adaptive", "pacer"}

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

// pacerStrategyFields lists the pacer fields only some strategies read, and
// which.
var pacerStrategyFields = map[string][]Strategy{
	"min_sleep":   {StrategyExponentialBackoff, StrategyProportionalRemaining},
	"multiplier":  {StrategyExponentialBackoff, StrategyProportionalRemaining},
	"start_sleep": {StrategyKeepReserve, StrategyProportionalRemaining},
}

// pacerUses reports whether a pacer of strategy s ("" = the default) reads
// the field name.
func pacerUses(name string, s Strategy) bool {
	if s == "" {
		s = StrategyKeepReserve
	}
	ss, limited := pacerStrategyFields[name]
	if !limited {
		return true
	}
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// enumMsg is the problem of a value that is not one of names, with a
// suggestion when one is close.
func enumMsg(got string, names []string) string {
	s := fmt.Sprintf("must be one of %s, got %q", orList(names), got)
	if sug := suggest(got, names); sug != "" {
		s += fmt.Sprintf(" (did you mean %q?)", sug)
	}
	return s
}

func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// kindFields lists, for each kind-specific field of Resource, the kinds it
// belongs to. Fields not listed (kind, shadow, drift, max_keys) are common.
var kindFields = map[string][]Kind{
	"hard_limit":   {KindTiers},
	"global_limit": {KindTiers, KindCopies},
	"tiers":        {KindTiers},
	"burst":        {KindGCRA},
	"count":        {KindGCRA},
	"period":       {KindGCRA, KindPacer},
	"domain_limit": {KindCopies},
	"groups":       {KindCopies},
	"min_window":   {KindAdaptive},
	"max_window":   {KindAdaptive},
	"grow_every":   {KindAdaptive},
	"margin":       {KindAdaptive},
	"timeout":      {KindAdaptive},
	"rules":        {KindAdaptive},
	"client_share": {KindAdaptive},
	"strategy":     {KindPacer},
	"quota":        {KindPacer},
	"min_sleep":    {KindPacer},
	"multiplier":   {KindPacer},
	"jitter":       {KindPacer},
	"start_sleep":  {KindPacer},
	"domains":      {KindTiers, KindGCRA, KindCopies},
}

// overrideFields lists the fields a per-domain override of each kind may set.
var overrideFields = map[Kind][]string{
	KindTiers:  {"tiers", "hard_limit"},
	KindGCRA:   {"burst", "count", "period"},
	KindCopies: {"domain_limit"},
}

func belongs(name string, k Kind) bool {
	for _, x := range kindFields[name] {
		if x == k {
			return true
		}
	}
	return false
}

func overrideBelongs(name string, k Kind) bool {
	for _, x := range overrideFields[k] {
		if x == name {
			return true
		}
	}
	return false
}

func kindList(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return joinAnd(s)
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

func wrongKindMsg(name string, k Kind) string {
	return fmt.Sprintf("not a field of kind %s (%s is for kind %s)", k, name, kindList(kindFields[name]))
}

func wrongOverrideMsg(name string, k Kind) string {
	switch k {
	case KindAdaptive:
		return "kind adaptive takes no per-domain overrides"
	case KindPacer:
		return "kind pacer takes no per-domain overrides (one pacer paces every caller of the agent)"
	}
	return fmt.Sprintf("not a field of a %s override (a %s override sets %s)", k, k, joinAnd(overrideFields[k]))
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
	for name := range c.Namespaces {
		checkNamespaceName(l, entry("namespaces", name), name)
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

// checkTier checks one tier: limit ≥ 1, window > 0, active ≥ 0, cooldown ≥ 0,
// each duration a whole number of milliseconds (the tiers engine keeps time in
// milliseconds, the API's unit; a finer duration would be silently rounded).
func checkTier(l *problemList, path string, t Tier) {
	checkInt(l, field(path, "limit"), t.Limit, 1)
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
// period/count of at least 1ns and a burst offset within MaxDuration.
func checkGCRA(l *problemList, path string, burst, count int, period time.Duration) {
	checkInt(l, field(path, "burst"), burst, 1)
	checkInt(l, field(path, "count"), count, 1)
	checkDuration(l, field(path, "period"), period, true)
	if count < 1 || count > MaxLimit || period <= 0 || period > MaxDuration {
		return
	}
	ei := period / time.Duration(count)
	if ei < 1 {
		l.add(field(path, "period"), "period/count must be at least 1ns, got %s/%d (count at most %d for this period)", period, count, int64(period))
		return
	}
	if burst >= 1 && burst <= MaxLimit && ei > MaxDuration/time.Duration(burst) {
		l.add(field(path, "burst"), "burst·period/count must be ≤ %s (100 years), got %d·%s", MaxDuration, burst, ei)
	}
}

func checkResource(l *problemList, path string, r *Resource) {
	if r == nil {
		l.add(path, "must be a mapping, got null")
		return
	}
	k := r.Kind
	known := k.Valid()
	switch {
	case k == "":
		l.add(field(path, "kind"), "required (one of %s)", orList(kindNames))
	case !known:
		l.add(field(path, "kind"), "%s", badKindMsg(k))
	}
	if r.Drift != nil && (math.IsNaN(*r.Drift) || *r.Drift < 0 || *r.Drift > 1) {
		l.add(field(path, "drift"), "must be in [0, 1] (absent means %v, 0 ships every hit at once), got %v", DefaultDrift, *r.Drift)
	}
	checkInt(l, field(path, "max_keys"), r.MaxKeys, 0)
	if k == KindPacer && r.Shadow {
		l.add(field(path, "shadow"), "kind pacer has no shadow mode: a pacer only advises a wait (to try one, let the callers ignore wait_ms)")
	}

	// Fields of another kind.
	if known {
		for _, f := range r.setFields() {
			if !belongs(f, k) {
				if f == "domains" {
					l.add(field(path, f), "%s", wrongOverrideMsg(f, k))
				} else {
					l.add(field(path, f), "%s", wrongKindMsg(f, k))
				}
			}
		}
	}
	// With an unknown kind, check the fields that are set, each on its own
	// terms; with a known one, every field of the kind.
	set := map[string]bool{}
	for _, f := range r.setFields() {
		set[f] = true
	}
	want := func(f string) bool {
		if known {
			return belongs(f, k)
		}
		return set[f]
	}
	if want("hard_limit") {
		checkLimit(l, field(path, "hard_limit"), r.HardLimit)
	}
	if want("global_limit") {
		checkLimit(l, field(path, "global_limit"), r.GlobalLimit)
	}
	if want("tiers") {
		checkTiers(l, field(path, "tiers"), r.Tiers)
	}
	switch {
	case known && k == KindGCRA:
		checkGCRA(l, path, r.Burst, r.Count, r.Period)
	case known && k == KindPacer:
		checkDuration(l, field(path, "period"), r.Period, true)
	case !known:
		checkSetGCRA(l, path, set, r.Burst, r.Count, r.Period)
	}
	if want("domain_limit") {
		checkLimit(l, field(path, "domain_limit"), r.DomainLimit)
	}
	if want("groups") {
		checkGroups(l, field(path, "groups"), r.Groups)
	}
	if want("min_window") {
		checkInt(l, field(path, "min_window"), r.MinWindow, 1)
	}
	if want("max_window") {
		min := max(r.MinWindow, 1)
		if r.MaxWindow < min {
			l.add(field(path, "max_window"), "must be ≥ min_window (%d), got %d", min, r.MaxWindow)
		} else {
			checkInt(l, field(path, "max_window"), r.MaxWindow, min)
		}
	}
	if want("grow_every") {
		checkInt(l, field(path, "grow_every"), r.GrowEvery, 0)
	}
	if want("margin") {
		checkInt(l, field(path, "margin"), r.Margin, 0)
	}
	if want("timeout") {
		checkDuration(l, field(path, "timeout"), r.Timeout, false)
		if k == KindAdaptive && r.Timeout > MaxAdaptiveTimeout {
			l.add(field(path, "timeout"), "must be ≤ %s (a ticket nobody completes holds its place in the window that long), got %s", MaxAdaptiveTimeout, r.Timeout)
		}
	}
	if want("client_share") && r.ClientShare != nil && !(*r.ClientShare > 0 && *r.ClientShare <= 1) {
		l.add(field(path, "client_share"), "must be in (0, 1] (absent means 1: no bound per client), got %v", *r.ClientShare)
	}
	if want("rules") && r.Rules != "" && !r.Rules.Valid() {
		l.add(field(path, "rules"), "%s", enumMsg(string(r.Rules), rulesNames))
	}
	checkPacer(l, path, r, want)
	if belongs("domains", k) || !known {
		for d, o := range r.Domains {
			p := entry(field(path, "domains"), d)
			checkDomain(l, p, d)
			checkOverride(l, p, k, o)
		}
	}
}

// checkPacer checks the pacer fields want selects: strategy one of the
// three, quota in [1, MaxLimit], min_sleep and start_sleep in [0,
// MaxDuration], multiplier 0 or a finite number ≥ 1, jitter in [0, 1], and
// no field the strategy does not read (it would silently do nothing).
func checkPacer(l *problemList, path string, r *Resource, want func(string) bool) {
	if want("strategy") && r.Strategy != "" && !r.Strategy.Valid() {
		l.add(field(path, "strategy"), "%s", enumMsg(string(r.Strategy), strategyNames))
	}
	if want("quota") {
		checkInt(l, field(path, "quota"), r.Quota, 1)
	}
	if want("min_sleep") {
		checkDuration(l, field(path, "min_sleep"), r.MinSleep, false)
	}
	if want("multiplier") && r.Multiplier != 0 && !(r.Multiplier >= 1 && r.Multiplier <= math.MaxFloat64) {
		l.add(field(path, "multiplier"), "must be a number ≥ 1 (0 means %v), got %v", DefaultPacerMultiplier, r.Multiplier)
	}
	if want("jitter") && r.Jitter != nil && !(*r.Jitter >= 0 && *r.Jitter <= 1) {
		l.add(field(path, "jitter"), "must be in [0, 1] (absent means %v, 0 none), got %v", DefaultPacerJitter, *r.Jitter)
	}
	if want("start_sleep") {
		checkDuration(l, field(path, "start_sleep"), r.StartSleep, false)
	}
	if r.Kind != KindPacer || !r.Strategy.Valid() && r.Strategy != "" {
		return
	}
	for _, f := range r.setFields() {
		if !pacerUses(f, r.Strategy) {
			s := r.Strategy
			if s == "" {
				s = StrategyKeepReserve
			}
			users := make([]string, 0, 2)
			for _, x := range pacerStrategyFields[f] {
				users = append(users, string(x))
			}
			l.add(field(path, f), "not read by strategy %s (%s is for strategy %s): leave it out", s, f, joinAnd(users))
		}
	}
}

// setFields returns the kind-specific fields of r that are set: limits
// that are present (even 0), other fields that are not zero.
func (r *Resource) setFields() []string {
	var s []string
	add := func(name string, set bool) {
		if set {
			s = append(s, name)
		}
	}
	add("hard_limit", r.HardLimit != nil)
	add("global_limit", r.GlobalLimit != nil)
	add("tiers", len(r.Tiers) != 0)
	add("burst", r.Burst != 0)
	add("count", r.Count != 0)
	add("period", r.Period != 0)
	add("domain_limit", r.DomainLimit != nil)
	add("groups", len(r.Groups) != 0)
	add("min_window", r.MinWindow != 0)
	add("max_window", r.MaxWindow != 0)
	add("grow_every", r.GrowEvery != 0)
	add("margin", r.Margin != 0)
	add("timeout", r.Timeout != 0)
	add("rules", r.Rules != "")
	add("client_share", r.ClientShare != nil)
	add("strategy", r.Strategy != "")
	add("quota", r.Quota != 0)
	add("min_sleep", r.MinSleep != 0)
	add("multiplier", r.Multiplier != 0)
	add("jitter", r.Jitter != nil)
	add("start_sleep", r.StartSleep != 0)
	add("domains", len(r.Domains) != 0)
	return s
}

// setFields returns the fields of o that are set (limits even at 0).
func (o *Override) setFields() []string {
	var s []string
	add := func(name string, set bool) {
		if set {
			s = append(s, name)
		}
	}
	add("hard_limit", o.HardLimit != nil)
	add("tiers", len(o.Tiers) != 0)
	add("burst", o.Burst != 0)
	add("count", o.Count != 0)
	add("period", o.Period != 0)
	add("domain_limit", o.DomainLimit != nil)
	return s
}

func checkOverride(l *problemList, path string, k Kind, o *Override) {
	if o == nil {
		l.add(path, "must be a mapping, got null")
		return
	}
	known := k.Valid()
	if known {
		for _, f := range o.setFields() {
			if !overrideBelongs(f, k) {
				l.add(field(path, f), "%s", wrongOverrideMsg(f, k))
			}
		}
	}
	set := map[string]bool{}
	for _, f := range o.setFields() {
		set[f] = true
	}
	want := func(f string) bool {
		if known {
			return overrideBelongs(f, k)
		}
		return set[f]
	}
	if want("hard_limit") {
		checkLimit(l, field(path, "hard_limit"), o.HardLimit)
	}
	if want("tiers") {
		checkTiers(l, field(path, "tiers"), o.Tiers)
	}
	if known && k == KindGCRA {
		checkGCRA(l, path, o.Burst, o.Count, o.Period)
	} else if !known {
		checkSetGCRA(l, path, set, o.Burst, o.Count, o.Period)
	}
	if want("domain_limit") {
		checkLimit(l, field(path, "domain_limit"), o.DomainLimit)
	}
}

// checkSetGCRA checks the gcra fields that are set, for a resource whose kind
// is unknown.
func checkSetGCRA(l *problemList, path string, set map[string]bool, burst, count int, period time.Duration) {
	if set["burst"] && set["count"] && set["period"] {
		checkGCRA(l, path, burst, count, period)
		return
	}
	if set["burst"] {
		checkInt(l, field(path, "burst"), burst, 1)
	}
	if set["count"] {
		checkInt(l, field(path, "count"), count, 1)
	}
	if set["period"] {
		checkDuration(l, field(path, "period"), period, true)
	}
}

// checkDomain checks a domain named in an override or a group: non-empty,
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
