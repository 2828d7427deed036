package config

import (
	"encoding/json"
	"strconv"
	"time"
)

// The MarshalJSON methods render the config-file schema back, so that
// Parse(json.Marshal(c)) returns a config equal to c when c is valid and
// normalized: durations are Go duration strings (time.Duration.String),
// tier lists are always the list form, and a resource shows the fields of
// its kind (even when zero) plus any other field that is set. A resource's
// and an override's fields are rendered as the schema's entries say, in its
// order. GET /v1/config and the config field of POST /v1/simulate are
// written this way.

// MarshalJSON renders c in the config-file schema. Resources is always
// present ({} when empty); namespaces is omitted when empty.
func (c Config) MarshalJSON() ([]byte, error) {
	res := c.Resources
	if res == nil {
		res = map[string]*Resource{}
	}
	return json.Marshal(struct {
		Agent      Agent                 `json:"agent"`
		Gossip     Gossip                `json:"gossip"`
		Namespaces map[string]*Namespace `json:"namespaces,omitempty"`
		Resources  map[string]*Resource  `json:"resources"`
	}{c.Agent, c.Gossip, c.Namespaces, res})
}

// MarshalJSON renders g with sync_interval as a duration string; empty
// fields are omitted.
func (g Gossip) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Bind         string   `json:"bind,omitempty"`
		Join         []string `json:"join,omitempty"`
		SyncInterval string   `json:"sync_interval,omitempty"`
		SecretFile   string   `json:"secret_file,omitempty"`
		OwnerFrom    int      `json:"owner_from,omitempty"`
	}{g.Bind, g.Join, durationOrEmpty(g.SyncInterval), g.SecretFile, g.OwnerFrom})
}

// MarshalJSON renders t as {limit, window, active, cooldown, skippable},
// durations as strings ("1s").
func (t Tier) MarshalJSON() ([]byte, error) {
	return json.Marshal(tierJSON{t.Limit, t.Window.String(), t.Active.String(), t.Cooldown.String(), t.Skippable})
}

type tierJSON struct {
	Limit     int    `json:"limit"`
	Window    string `json:"window"`
	Active    string `json:"active"`
	Cooldown  string `json:"cooldown"`
	Skippable bool   `json:"skippable"`
}

// MarshalJSON renders r in the config-file schema: kind, then the fields
// of the schema in its order: shadow (when true), drift, max_keys, every
// field of r's kind even when zero (for kind pacer, every field its
// strategy reads), any field of another kind that is set (only an invalid
// Resource has one), and the per-domain overrides, each showing its kind's
// fields. The limit fields (hard_limit, global_limit, domain_limit, a
// group's limit), drift, jitter and client_share are the exception: they
// appear exactly when set, so that absent (no limit, the default) and 0
// round-trip.
func (r Resource) MarshalJSON() ([]byte, error) {
	b, err := appendValue(append(make([]byte, 0, 512), `{"kind":`...), string(r.Kind))
	if err != nil {
		return nil, err
	}
	return appendFields(b, &r, schema, func(f *spec) bool {
		return f.v.isSet(&r) || !f.v.optional() && f.belongs(r.Kind) && (r.Kind != KindPacer || f.readBy(r.Strategy))
	})
}

// MarshalJSON renders o alone. Not knowing its resource's kind, it shows
// only the fields that are set, plus tiers when the list is non-nil (an
// empty list is a tier list that rejects every request); a Resource renders
// its overrides with its kind's fields instead.
func (o Override) MarshalJSON() ([]byte, error) {
	v := o.view("")
	return appendFields([]byte{'{'}, v, overrideSchema, func(f *spec) bool {
		return f.v.isSet(v) || f == fieldOf("tiers") && o.Tiers != nil
	})
}

// overrideOf renders an override of a resource of kind k: the fields its
// kind's overrides hold, even when zero (limits exactly when set), and any
// other field that is set.
type overrideOf struct {
	o *Override
	k Kind
}

func (x overrideOf) MarshalJSON() ([]byte, error) {
	if x.o == nil {
		return []byte("null"), nil
	}
	v := x.o.view(x.k)
	return appendFields(append(make([]byte, 0, 128), '{'), v, overrideSchema, func(f *spec) bool {
		return f.v.isSet(v) || !f.v.optional() && f.inOverrides(x.k)
	})
}

// appendFields appends to b, a JSON object's opening, the fields fs of r
// that show selects, in order, and closes the object.
func appendFields(b []byte, r *Resource, fs []*spec, show func(*spec) bool) ([]byte, error) {
	first := len(b) == 1
	for _, f := range fs {
		if !show(f) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, f.key...)
		b = append(b, '"', ':')
		var err error
		if b, err = appendValue(b, f.v.render(r)); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendValue appends v as json.Marshal renders it: counts, flags and
// plain strings directly, the rest through json.Marshal.
func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case *int:
		if x != nil {
			return strconv.AppendInt(b, int64(*x), 10), nil
		}
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		if plainJSON(x) {
			b = append(b, '"')
			b = append(b, x...)
			return append(b, '"'), nil
		}
	}
	j, err := json.Marshal(v)
	return append(b, j...), err
}

// plainJSON reports whether json.Marshal renders s as s in quotes: printable
// ASCII with nothing it escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func durationOrEmpty(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// MarshalJSON renders ns with every switch and cap, even when false or
// left out, so that GET /v1/config shows each namespace's mode in full.
func (ns Namespace) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		IgnoreConfigured  bool   `json:"ignore_configured"`
		AllowUnconfigured bool   `json:"allow_unconfigured"`
		RequestLimits     bool   `json:"request_limits"`
		MaxRequestLimits  int    `json:"max_request_limits"`
		MaxRequestKeys    int    `json:"max_request_keys"`
		MaxRequestWindow  string `json:"max_request_window"`
	}{ns.IgnoreConfigured, ns.AllowUnconfigured, ns.RequestLimits, ns.MaxRequestLimits, ns.MaxRequestKeys, durationOrEmpty(ns.MaxRequestWindow)})
}
