package local

import (
	"time"

	"github.com/obol-dev/obol/config"
)

// Never is the RetryAfter of a request that no wait would let through.
const Never = time.Duration(-1)

// Decision is the outcome of a rate decision (kinds tiers and gcra), with the
// response fields of docs/semantics.md. Fields that do not apply to the kind are zero.
type Decision struct {
	Kind    config.Kind
	Granted int
	// Remaining is the most hits a request at the same instant could now get.
	Remaining int
	// RetryAfter is the least wait until a request of max(min_copies,1) would be
	// granted: 0 when it would be now, Never when it never would.
	RetryAfter time.Duration
	// ResetAfter is the least wait until the key is fully reset.
	ResetAfter time.Duration

	// tiers only
	Tier                 int
	TierLimit            int
	TierHits             int
	TierWindow           time.Duration // the current tier's window (0 for tier 0)
	FirstTierLimit       int           // tier 1's limit, for RateLimit-Policy at tier 0
	FirstTierWindow      time.Duration
	Burst                bool
	LimitedByHard        bool
	LimitedByGlobal      bool
	HardLimit            int // NoLimit when the domain has none
	GlobalLimit          int // NoLimit when the resource has none
	DomainHitsLastSecond int
	GlobalHitsLastSecond int

	// gcra only: the burst and period, for the RateLimit-Policy field.
	GCRABurst  int
	GCRAPeriod time.Duration

	// The figures of the RateLimit field (draft-ietf-httpapi-ratelimit-
	// headers), one per policy: what the domain has left under it and its
	// refill, the least wait until more of it is available with no other
	// traffic (Never when no more ever will be). The refill is the policy's
	// effective window: the time within which the domain can use no more
	// than what it has left (its window when it has used nothing, since a
	// hit made now leaves only then).
	//
	// tiers: PolicyTier is the tier (1-based) that a request draws from
	// now and is closest to its limit: among the current tier (its room)
	// and the tiers the walk would enter above it (their limits), or, when
	// every tier the walk visits is cooling down, among those (room 0 until
	// their cooldown ends); the least room wins, ties go to the longer
	// refill, then to the lower tier. It is 0 when the resource has no
	// tier. The hard limit has HardLimit − DomainHitsLastSecond left and
	// refills when the domain's oldest hit of the last second leaves it;
	// the global limit, likewise, with GlobalHitsLastSecond. GlobalRefill
	// costs a scan of the last second, so it is filled only when the global
	// limit has no more left than the tier policy and the hard limit (the
	// only case it can be reported); it is 0 otherwise.
	PolicyTier          int
	PolicyTierRemaining int
	PolicyTierRefill    time.Duration
	HardRefill          time.Duration // 0 when there is no hard limit
	GlobalRefill        time.Duration
	// gcra: Remaining is what is left; GCRARefill is when one more token
	// is (an emission interval when the bucket is full).
	GCRARefill time.Duration

	// Shadow is true when a rejection was turned into a grant by shadow mode.
	Shadow bool
	// Lenient is true when the grant was made without a limit: the namespace
	// ignores its config, the resource is unconfigured but allowed, or the
	// resource tracks max_keys keys already.
	Lenient bool
}

// NoLimit is the value of a limit field of a Decision, Reservation or
// GroupHolds when that limit is absent (no limit of its scope). A limit of 0
// is a real limit that grants nothing (docs/semantics.md: absent is none, zero is
// zero).
const NoLimit = -1

// GroupHolds is one domain group's pool as seen by a reservation.
type GroupHolds struct {
	Name  string
	Limit int // NoLimit = none
	Holds int
}

// Reservation is the outcome of Reserve.
type Reservation struct {
	Granted     int
	Hold        string // "" when rejected
	DomainLimit int    // effective; NoLimit = none
	GlobalLimit int    // NoLimit = none
	DomainHolds int
	GlobalHolds int
	Groups      []GroupHolds
	Shadow      bool
	Lenient     bool
}

// Seized is the outcome of Seize: the new hold and what it holds.
type Seized struct {
	Hold     string
	Resource string
	Domain   string
	Groups   []string
	Copies   int
}

// TierState is one tier of a key as shown by State.
type TierState struct {
	Index     int
	Limit     int
	State     string // "active", "cooldown" or "inactive"
	EnteredAt time.Time
	Hits      int // hits within the tier's window at the asked instant
}

// KeyState is what State reports of a (resource, domain) key without spending.
type KeyState struct {
	Resource string
	Domain   string
	Kind     config.Kind
	Tracked  bool
	Tiers    []TierState
	TAT      time.Time // gcra; zero when the bucket is full
	Holds    int       // copies: the domain's holds
	Peek     *Decision // rate kinds: the decision of a peek at that instant
	// Adaptive (kind adaptive) is the resource's window, swept as of the
	// asked instant; nil when the resource has none (its namespace ignores
	// its config). The domain plays no part.
	Adaptive *AdaptiveState
}
