package config

import "time"

// Kind names a resource's limiting algorithm.
type Kind string

// The resource kinds of SEMANTICS.md.
const (
	KindTiers    Kind = "tiers"
	KindGCRA     Kind = "gcra"
	KindCopies   Kind = "copies"
	KindAdaptive Kind = "adaptive"
)

// DefaultMaxKeys is the number of keys a resource tracks when max_keys is 0.
const DefaultMaxKeys = 1_000_000

// DefaultDrift is the drift tolerance of a resource that sets none.
const DefaultDrift = 0.05

// Config is the whole agent configuration, as loaded from YAML or JSON.
// The zero value is a valid, empty configuration.
type Config struct {
	Agent      Agent                 `json:"agent"`
	Gossip     Gossip                `json:"gossip"`
	Namespaces map[string]*Namespace `json:"namespaces,omitempty"`
	Resources  map[string]*Resource  `json:"resources"`
}

// Agent holds the listener settings. Empty strings mean the built-in defaults.
type Agent struct {
	// Socket is the Unix socket path ("" = $XDG_RUNTIME_DIR/obol.sock, else /tmp/obol.sock).
	Socket string `json:"socket,omitempty"`
	// HTTP is the loopback TCP address ("" = 127.0.0.1:7070).
	HTTP string `json:"http,omitempty"`
}

// Gossip holds the cluster settings (used once the cluster lands).
type Gossip struct {
	Bind         string        `json:"bind,omitempty"`
	Join         []string      `json:"join,omitempty"`
	SyncInterval time.Duration `json:"sync_interval,omitempty"`
	SecretFile   string        `json:"secret_file,omitempty"`
}

// Namespace is the per-namespace mode (the part of a resource name before '/').
type Namespace struct {
	// IgnoreConfigured grants every request of the namespace (still recorded).
	IgnoreConfigured bool `json:"ignore_configured,omitempty"`
	// AllowUnconfigured makes an unknown resource of the namespace behave as
	// the most permissive config instead of being unknown_resource.
	AllowUnconfigured bool `json:"allow_unconfigured,omitempty"`
}

// Tier is one burst tier (SEMANTICS.md, kind tiers).
type Tier struct {
	Limit     int           `json:"limit"`
	Window    time.Duration `json:"window"`
	Active    time.Duration `json:"active"`
	Cooldown  time.Duration `json:"cooldown"`
	Skippable bool          `json:"skippable"`
}

// Group is a named pool of copies shared by some domains (kind copies).
type Group struct {
	Name    string   `json:"name"`
	Limit   int      `json:"limit"`
	Domains []string `json:"domains"`
}

// Resource is one resource's configuration. Which fields apply depends on Kind.
// A per-domain override (Domains) replaces the default for that domain, whole:
// it holds only the kind-specific limit fields.
type Resource struct {
	Kind   Kind    `json:"kind"`
	Shadow bool    `json:"shadow,omitempty"`
	Drift  float64 `json:"drift,omitempty"`
	// MaxKeys bounds the keys tracked; 0 means DefaultMaxKeys.
	MaxKeys int `json:"max_keys,omitempty"`

	// tiers
	HardLimit   int    `json:"hard_limit,omitempty"`
	GlobalLimit int    `json:"global_limit,omitempty"` // tiers and copies
	Tiers       []Tier `json:"tiers,omitempty"`

	// gcra
	Burst  int           `json:"burst,omitempty"`
	Count  int           `json:"count,omitempty"`
	Period time.Duration `json:"period,omitempty"`

	// copies
	DomainLimit int     `json:"domain_limit,omitempty"`
	Groups      []Group `json:"groups,omitempty"`

	// adaptive
	MinWindow int           `json:"min_window,omitempty"`
	MaxWindow int           `json:"max_window,omitempty"`
	GrowEvery int           `json:"grow_every,omitempty"`
	Margin    int           `json:"margin,omitempty"`
	Timeout   time.Duration `json:"timeout,omitempty"`

	// Domains maps a domain to its override.
	Domains map[string]*Override `json:"domains,omitempty"`
}

// Override is a per-domain replacement of a resource's limit fields.
// Only the fields of the resource's kind may be set.
type Override struct {
	HardLimit   int           `json:"hard_limit,omitempty"`
	Tiers       []Tier        `json:"tiers,omitempty"`
	Burst       int           `json:"burst,omitempty"`
	Count       int           `json:"count,omitempty"`
	Period      time.Duration `json:"period,omitempty"`
	DomainLimit int           `json:"domain_limit,omitempty"`
}
