package config

import "time"

// Kind names a resource's limiting algorithm (docs/semantics.md). The zero value
// "" is not a valid kind: Validate requires one of the five constants.
type Kind string

// The resource kinds.
const (
	// KindTiers is Charon's leniency-first burst tiers: a per-domain rate
	// with bursts that climb tiers, each active for a while and then cooling
	// down.
	KindTiers Kind = "tiers"
	// KindGCRA is a token bucket kept as a theoretical arrival time
	// (Boulder): a burst, then a steady rate.
	KindGCRA Kind = "gcra"
	// KindCopies is a copy-limited resource: a counting semaphore whose
	// copies are held until released.
	KindCopies Kind = "copies"
	// KindAdaptive is an adaptive queue window (OpenZiti): a bound on
	// concurrent work that shrinks when callers time out and grows back on
	// success.
	KindAdaptive Kind = "adaptive"
	// KindPacer is a client pacer: callers of a rate-limited API elsewhere
	// ask it how long to wait before each call and report each reply (its
	// status and remaining count), and it paces them so that together they
	// neither run the API's quota dry nor leave it unused.
	KindPacer Kind = "pacer"
)

// Kinds are every kind, in the order messages and the agent's
// --check-config summary list them.
var Kinds = []Kind{KindTiers, KindGCRA, KindCopies, KindAdaptive, KindPacer}

// Rules names how an adaptive window adapts (kind adaptive). The zero value
// "" means RulesOpenZiti (normalization fills it in).
type Rules string

// The rules of an adaptive window (docs/adaptive.md).
const (
	// RulesOpenZiti is OpenZiti's adaptive rate limiter, exactly: grow by
	// one every grow_every successes, drop to the failing position minus
	// margin on a backoff.
	RulesOpenZiti Rules = "openziti"
	// RulesPredictive is OpenZiti's rules plus what the latencies say: the
	// time one queue position takes and how long callers wait before they
	// give up. The window stops growing where calls would start to time
	// out instead of growing into the timeouts, and work that could no
	// longer finish in time is rejected at the head of the queue.
	RulesPredictive Rules = "predictive"
)

// Strategy names how a pacer throttles (kind pacer). The zero value ""
// means StrategyKeepReserve (normalization fills it in).
type Strategy string

// The strategies of a pacer (docs/adaptive.md, "The pacer").
const (
	// StrategyKeepReserve is obol's: it paces calls at a rate it steers
	// from the remaining count the API reports, so that the clients
	// together keep a small reserve instead of running the quota dry, and
	// converge on equal shares.
	StrategyKeepReserve Strategy = "keep_reserve"
	// StrategyExponentialBackoff is rate_throttle_client's
	// ExponentialBackoff: no wait until a 429, then min_sleep, times
	// multiplier per further 429 of the same call; a success resets it.
	StrategyExponentialBackoff Strategy = "exponential_backoff"
	// StrategyProportionalRemaining is rate_throttle_client's
	// ExponentialIncreaseProportionalRemainingDecrease: every call waits a
	// shared sleep; a 429 adds min_sleep to it and multiplies it by
	// multiplier; a success cuts it by the fraction remaining/quota.
	StrategyProportionalRemaining Strategy = "proportional_remaining"
)

// DefaultMaxKeys is the number of keys a resource tracks when max_keys is 0.
const DefaultMaxKeys = 1_000_000

// DefaultDrift is the drift tolerance of a resource that sets none.
const DefaultDrift = 0.05

// Limit returns a pointer to n: the way to set a limit field (HardLimit,
// GlobalLimit, DomainLimit, Group.Limit) in Go, where nil means no limit of
// that scope and Limit(0) grants nothing.
func Limit(n int) *int { return &n }

// Fraction returns a pointer to f, for Resource.Drift and Resource.Jitter.
func Fraction(f float64) *float64 { return &f }

// LimitOr returns *l, or none when l is nil (absent).
func LimitOr(l *int, none int) int {
	if l == nil {
		return none
	}
	return *l
}

// Config is the whole agent configuration, as loaded from YAML or JSON.
// The zero value is a valid, empty configuration: no resources, the built-in
// listeners, no cluster. Parse and Load return it validated and normalized.
// A Config is plain data: safe for concurrent reads, not for concurrent
// mutation.
type Config struct {
	// Agent is where the application reaches this agent.
	Agent Agent `json:"agent"`
	// Gossip is how agents find each other and share counts.
	Gossip Gossip `json:"gossip"`
	// Namespaces maps a namespace name (the part of a resource name before
	// '/', never containing '/') to its modes. A namespace not listed has the
	// zero Namespace: configured resources enforced, unknown resources
	// refused.
	Namespaces map[string]*Namespace `json:"namespaces,omitempty"`
	// Resources maps a resource name, NAMESPACE/NAME (both parts non-empty,
	// valid UTF-8, at most MaxNameLen bytes; NAME may contain '/'), to its
	// configuration.
	Resources map[string]*Resource `json:"resources"`
}

// Agent holds the listener settings. Empty strings (keys left out) mean the
// built-in defaults; ListenerOff turns a listener off (the agent needs one
// at least). A key written with an empty value is refused: it would
// silently mean the default. Each field also has a flag and an OBOL_*
// environment variable.
type Agent struct {
	// Socket is the Unix socket path ("" = $XDG_RUNTIME_DIR/obol.sock, else
	// /run/obol/obol.sock when /run/obol exists, else /tmp/obol-UID/obol.sock in a 0700 directory; "off" = none).
	Socket string `json:"socket,omitempty"`
	// HTTP is the loopback TCP address ("" = 127.0.0.1:7070; "off" = none).
	// Otherwise it must be host:port.
	HTTP string `json:"http,omitempty"`
	// StateFile is where the agent keeps its counts across restarts (its
	// own and those it holds for peers): written every StateInterval and
	// on a clean stop, read at start; "" = none (docs/operations.md).
	StateFile string `json:"state_file,omitempty"`
	// StateInterval is how often the state file is written; 0 = the
	// built-in 5s. What a kill -9 can lose is what was admitted since the
	// last write.
	StateInterval time.Duration `json:"state_interval,omitempty"`
}

// ListenerOff is the value of Agent.Socket or Agent.HTTP that turns that
// listener off.
const ListenerOff = "off"

// Gossip holds the cluster settings. The zero value runs the agent alone;
// a Bind or a Join list makes it join a mesh (docs/cluster.md).
// DefaultOwnerFrom is gossip.owner_from's default: owner mode from 100
// live members. Below, direct fan-out costs fewer bytes with many sparse
// keys at their limits and admits a little less over them (one hop
// instead of two); from about 100 members on owner mode costs no more in
// that worst case and far less with hot keys, while direct fan-out's cost
// per node keeps growing with the members (docs/cluster.md, "Owner mode").
const DefaultOwnerFrom = 100

type Gossip struct {
	// Bind is the host:port memberlist listens on (UDP and TCP); "" = the
	// agent's default once Join is set: this host's private address, port
	// 7946 (never every interface).
	Bind string `json:"bind,omitempty"`
	// Join lists peers to contact at start (host, host:port or DNS names
	// resolving to several); any one live member is enough. Empty = start a
	// new cluster of one and wait to be joined.
	Join []string `json:"join,omitempty"`
	// SyncInterval is how often a node ships its changed counts to its
	// peers (jittered); 0 = the built-in 250ms. Shorter converges faster and
	// over-admits less (see Resource.Drift), at the cost of more packets:
	// O(N) per node per tick.
	SyncInterval time.Duration `json:"sync_interval,omitempty"`
	// SecretFile is the path of the 32-byte key that encrypts and
	// authenticates gossip; "" = unencrypted (only on a trusted network).
	SecretFile string `json:"secret_file,omitempty"`
	// OwnerFrom is the least number of live members at which the mesh
	// runs in owner mode: a node sends a key's counts to the key's owner
	// and successor only, and the owner sends back the sum of everyone
	// else's (docs/cluster.md). 0 (absent) = DefaultOwnerFrom; -1 = never
	// (every node sends to every peer); at least 2 otherwise. A config
	// file may not write 0: it is refused, saying what to write instead.
	OwnerFrom int `json:"owner_from,omitempty"`
}

// Namespace is the per-namespace mode (the part of a resource name before '/').
// The zero value enforces configured resources and refuses unknown ones.
type Namespace struct {
	// IgnoreConfigured grants every request of the namespace (still recorded).
	// It is a kill switch: false (the default) enforces the configured limits.
	IgnoreConfigured bool `json:"ignore_configured,omitempty"`
	// AllowUnconfigured makes an unknown resource of the namespace behave as
	// the most permissive config instead of being unknown_resource.
	// false (the default) surfaces typos in resource names at once; true
	// suits sandboxes where resources come and go.
	AllowUnconfigured bool `json:"allow_unconfigured,omitempty"`
	// RequestLimits lets a request carry its own limit (a gcra or tiers
	// definition) for a resource of the namespace the config does not
	// define (docs/api.md, "Limits set by the request"). false (the
	// default) refuses such a limit.
	RequestLimits bool `json:"request_limits,omitempty"`
	// MaxRequestLimits is the most definitions set by requests the
	// namespace keeps at once; 0 = DefaultMaxRequestLimits.
	MaxRequestLimits int `json:"max_request_limits,omitempty"`
	// MaxRequestKeys is the most keys (domains) all of the namespace's
	// definitions set by requests track together; 0 =
	// DefaultMaxRequestKeys.
	MaxRequestKeys int `json:"max_request_keys,omitempty"`
	// MaxRequestWindow is the longest a key of a limit set by a request
	// may keep state (Resource.StateLife): a longer limit is refused; 0 =
	// DefaultMaxRequestWindow.
	MaxRequestWindow time.Duration `json:"max_request_window,omitempty"`
}

// Defaults of a namespace's caps on limits set by requests.
const (
	DefaultMaxRequestLimits = 1000
	DefaultMaxRequestKeys   = 100_000
	DefaultMaxRequestWindow = 24 * time.Hour
)

// Tier is one burst tier (docs/semantics.md, kind tiers). A domain climbs to the
// next tier when the current one is full; the tier then stays active for
// Active, during which at most Limit hits fall in any Window, and cools down
// for Cooldown before it can be entered again. Normalization removes tiers
// with Active 0, shortens a Window longer than Active to Active, and cuts
// Active down to a multiple of Window.
type Tier struct {
	// Limit is the most hits in any Window while the tier is active; ≥ 1,
	// at most MaxLimit.
	Limit int `json:"limit"`
	// Window is the length of the sliding window Limit applies to; > 0.
	// With Window = Active the tier grants Limit hits in all; shorter
	// windows spread them out.
	Window time.Duration `json:"window"`
	// Active is how long the tier lasts once entered; ≥ 0, and a tier with
	// Active 0 is removed by normalization (it could never be used).
	Active time.Duration `json:"active"`
	// Cooldown is how long after Active ends the tier cannot be entered
	// again; ≥ 0, 0 = at once. Longer cooldowns make bursts rarer.
	Cooldown time.Duration `json:"cooldown"`
	// Skippable lets a burst climb past this tier while it cools down;
	// false (the default) blocks the climb there.
	Skippable bool `json:"skippable"`
}

// Group is a named pool of copies shared by some domains (kind copies). A
// domain in several groups takes one copy from each group's pool.
type Group struct {
	// Name identifies the group in reservations (it must be non-empty and
	// unique within the resource); releases name it.
	Name string `json:"name"`
	// Limit is the most copies the group's domains hold together; nil
	// (absent) = no limit of the group's own, 0 = the group's domains get
	// nothing (Charon's blacklist). Above global_limit (when set) it is
	// lowered to global_limit by normalization.
	Limit *int `json:"limit,omitempty"`
	// Domains are the group's members: at least one, no duplicates.
	Domains []string `json:"domains"`
}

// Resource is one resource's configuration. Which fields apply depends on Kind.
// A per-domain override (Domains) replaces the default for that domain, whole:
// it holds only the kind-specific limit fields.
//
// Fields of another kind must be zero (in a file: absent). Count fields are
// at most MaxLimit and durations at most MaxDuration. The zero value is not
// valid (it has no kind). Plain data: safe for concurrent reads only.
type Resource struct {
	// Kind is the algorithm: tiers, gcra, copies, adaptive or pacer.
	// Required.
	Kind Kind `json:"kind"`
	// Shadow computes, records and reports decisions but grants what would
	// be rejected (marked shadow): a way to try a limit on real traffic.
	// Kind pacer has no shadow mode (a pacer only advises a wait, which its
	// callers are free to ignore while they try it).
	Shadow bool `json:"shadow,omitempty"`
	// Drift is the drift tolerance, a fraction in [0, 1] of the limit: a
	// node ships a key's unshipped hits at once when they reach
	// max(1, drift·limit/N) for N live nodes. nil (absent) means DefaultDrift
	// (filled in by normalization); 0 ships every hit at once. Smaller keeps
	// the cluster's over-admission tighter and costs more gossip packets
	// under load.
	Drift *float64 `json:"drift,omitempty"`
	// MaxKeys bounds the keys (domains) tracked at once; 0 means
	// DefaultMaxKeys (filled in by normalization). It caps the memory one
	// resource can take; what happens at the cap is the key store's rule
	// (package local).
	MaxKeys int `json:"max_keys,omitempty"`

	// tiers

	// HardLimit (tiers) is the most hits one domain gets in any 1 s
	// window, whatever its tiers allow; nil (absent) = none, 0 = every
	// request is rejected. A safety net under generous tiers.
	HardLimit *int `json:"hard_limit,omitempty"`
	// GlobalLimit (tiers and copies) bounds all domains together; nil
	// (absent) = none, 0 = nothing is granted to anyone.
	// For tiers: hits per 1 s window across domains, which makes domains
	// compete. For copies: copies held in total; a domain_limit or group
	// limit above it (or absent) is lowered to it by normalization.
	GlobalLimit *int `json:"global_limit,omitempty"` // tiers and copies
	// Tiers (tiers) are the burst tiers, lowest first. In a file, a list
	// of {limit, window, active, cooldown, skippable} or the compact string
	// "limit,window,active,cooldown,..." in seconds (ParseTiers). Required
	// for kind tiers in a file; an empty list rejects every request.
	Tiers []Tier `json:"tiers,omitempty"`

	// gcra

	// Burst (gcra) is the bucket's capacity in tokens: how many requests
	// may arrive at once after a quiet spell; ≥ 1.
	Burst int `json:"burst,omitempty"`
	// Count (gcra) is how many tokens refill per Period; ≥ 1. The rate is
	// Count/Period, so one token every Period/Count (whole nanoseconds,
	// which must be ≥ 1ns).
	Count int `json:"count,omitempty"`
	// Period (gcra and pacer) is the refill period: of Count for gcra, of
	// Quota for pacer; > 0.
	Period time.Duration `json:"period,omitempty"`

	// copies

	// DomainLimit (copies) is the most copies one domain holds at once;
	// nil (absent) = none, 0 = the domain gets nothing. Lowered to
	// GlobalLimit (when set) by normalization.
	DomainLimit *int `json:"domain_limit,omitempty"`
	// Groups (copies) are pools shared by named sets of domains, each with
	// its own limit. Empty = none.
	Groups []Group `json:"groups,omitempty"`

	// adaptive

	// MinWindow (adaptive) is the floor of the window, the fewest calls
	// admitted at once however many fail; ≥ 1.
	MinWindow int `json:"min_window,omitempty"`
	// MaxWindow (adaptive) is the ceiling and the starting window;
	// ≥ MinWindow.
	MaxWindow int `json:"max_window,omitempty"`
	// GrowEvery (adaptive) is how many successes grow the window by one;
	// 0 means adaptive.DefaultGrowEvery (10). Smaller recovers faster after a
	// backoff but probes the backend harder.
	GrowEvery int `json:"grow_every,omitempty"`
	// Margin (adaptive) is how far below a failing position the window
	// drops, and how far past the window queued work may sit before it is
	// rejected; 0 means adaptive.DefaultMargin (10).
	Margin int `json:"margin,omitempty"`
	// Timeout (adaptive) is how long an admitted call may stay outstanding
	// before it counts as a backoff; 0 means adaptive.DefaultTimeout (30s).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Rules (adaptive) selects how the window adapts: RulesOpenZiti or
	// RulesPredictive; "" means RulesOpenZiti (filled in by
	// normalization). Predictive wastes less work when callers time out
	// (docs/adaptive.md measures both); OpenZiti's is the published
	// algorithm, exactly.
	Rules Rules `json:"rules,omitempty"`
	// ClientShare (adaptive) is the fraction of the window one client may
	// hold outstanding at once, in (0, 1]; absent means 1 (no bound of its
	// own). A client is a process on the Unix socket (told apart by the
	// kernel, not by anything it sends) and an address on TCP, so on the
	// loopback listener every local process is one client. Below 1, a
	// client that never completes its tickets can take at most that share
	// of the window until they expire (timeout); at or above 1/N, N clients
	// can still fill it between them.
	ClientShare *float64 `json:"client_share,omitempty"`

	// pacer

	// Strategy (pacer) is how the pacer throttles: StrategyKeepReserve,
	// StrategyExponentialBackoff or StrategyProportionalRemaining; ""
	// means StrategyKeepReserve (filled in by normalization).
	Strategy Strategy `json:"strategy,omitempty"`
	// Quota (pacer) is the paced API's quota: requests per Period, and the
	// most its bucket holds; ≥ 1, required. KeepReserve keeps 0.5% of it
	// in reserve; the proportional strategy divides remaining counts by
	// it.
	Quota int `json:"quota,omitempty"`
	// MinSleep (pacer; exponential_backoff and proportional_remaining
	// only) is the sleep step of a 429; 0 means Period/Quota (filled in
	// by normalization). Longer backs off harder after a 429.
	MinSleep time.Duration `json:"min_sleep,omitempty"`
	// Multiplier (pacer; exponential_backoff and proportional_remaining
	// only) is how much a sleep grows per 429, ≥ 1; 0 means
	// adaptive.DefaultMultiplier (1.2, filled in by normalization).
	Multiplier float64 `json:"multiplier,omitempty"`
	// Jitter (pacer) is the most a wait is lengthened at random, as a
	// fraction of it in [0, 1]; nil (absent) means adaptive.DefaultJitter
	// (0.1, filled in by normalization), 0 none. Jitter keeps clients
	// that were throttled together from retrying together.
	Jitter *float64 `json:"jitter,omitempty"`
	// StartSleep (pacer; keep_reserve and proportional_remaining only) is
	// the wait a fresh pacer starts from: the interval between calls
	// (keep_reserve) or the sleep before each call (proportional_remaining)
	// until the replies say more; 0 means none (KeepReserve then does not
	// pace until it sees the quota run low).
	StartSleep time.Duration `json:"start_sleep,omitempty"`

	// Domains maps a domain to its override. Not allowed for kinds
	// adaptive and pacer.
	Domains map[string]*Override `json:"domains,omitempty"`
}

// Override is a per-domain replacement of a resource's limit fields.
// Only the fields of the resource's kind may be set: tiers sets Tiers (required
// in a file) and HardLimit; gcra sets Burst, Count and Period (all three
// required); copies sets DomainLimit. The same rules and the same
// normalization apply as to the resource's own fields. An override does not
// inherit anything from the default: a tiers override without hard_limit has
// no hard limit, a copies override without domain_limit no domain limit.
type Override struct {
	// HardLimit (tiers) is the domain's own hard limit per 1 s; nil
	// (absent) = none, 0 = the domain is refused every request.
	HardLimit *int `json:"hard_limit,omitempty"`
	// Tiers (tiers) are the domain's tiers, normalized like the resource's;
	// an empty list rejects every request of the domain.
	Tiers []Tier `json:"tiers,omitempty"`
	// Burst (gcra) is the domain's bucket capacity; ≥ 1.
	Burst int `json:"burst,omitempty"`
	// Count (gcra) is the domain's refill per Period; ≥ 1.
	Count int `json:"count,omitempty"`
	// Period (gcra) is the domain's refill period; > 0, and Period/Count
	// ≥ 1ns.
	Period time.Duration `json:"period,omitempty"`
	// DomainLimit (copies) is the copies the domain may hold at once; nil
	// (absent) = none, 0 = nothing. Lowered to the resource's global_limit
	// (when set) by normalization.
	DomainLimit *int `json:"domain_limit,omitempty"`
}
