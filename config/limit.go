package config

import (
	"strconv"
	"strings"
	"time"
)

// limit.go reads a limit set by a request: the "limit" object of an API
// body, one gcra or tiers definition for a resource the config does not
// define (docs/api.md, "Limits set by the request"). It is validated as
// the config validates a resource, and has a canonical text (LimitKey) that
// names it: the agent counts each definition apart, and peers rebuild it
// from that text (ParseLimitKey) when its counts reach them.

// limitKeys are the fields a limit set by a request may carry, by kind.
var limitKeys = map[Kind][]string{
	KindGCRA:  {"kind", "burst", "count", "period"},
	KindTiers: {"kind", "tiers"},
}

// MaxLimitKey is the longest canonical text of a limit set by a request
// (LimitKey), in bytes: with a resource name and a domain of MaxNameLen
// bytes each, a key's name still fits in one gossip datagram. A tier list
// of a dozen tiers fits; a longer one belongs in the config.
const MaxLimitKey = 384

// ParseLimit reads a limit set by a request, as JSON (or YAML):
// {"kind": "gcra", "burst", "count", "period"} or {"kind": "tiers",
// "tiers"}, with the tiers as the compact string or a list. It is checked
// as a resource of the config is (same messages), with paths starting
// "limit" (`limit.burst: must be ≥ 1, got 0`), and returned normalized.
// Other fields of a resource are refused: a limit set by a request has
// the defaults of drift, max_keys and the rest. Its canonical text,
// LimitKey, is at most MaxLimitKey bytes. Safe for concurrent use.
func ParseLimit(data []byte) (*Resource, error) {
	if r, ok := quickLimit(data); ok {
		return r, nil
	}
	root, p := parseDocument(data)
	if p != nil {
		p.Path = "limit"
		return nil, asError([]Problem{*p})
	}
	d := newDecoder(root, "limit", len(data))
	ps, ok := d.mapping("limit", root, false)
	if root == nil || (ok && len(ps) == 0) {
		d.fail("limit", root, `must be an object with a kind ("gcra" or "tiers") and its fields`)
		return nil, asError(d.merge(nil))
	}
	var l problemList
	if ok { // a key no limit takes is named as such, not as a resource's unknown key
		root = d.deref(root)
		kept := root.Content[:0:0]
		for i := 0; i+1 < len(root.Content); i += 2 {
			k := root.Content[i].Value
			if !contains(limitKeys[KindGCRA], k) && !contains(limitKeys[KindTiers], k) && fieldOf(k) == nil {
				l.add(field("limit", k), "unknown key; a limit takes kind, burst, count, period (gcra) or kind, tiers (tiers)")
				continue
			}
			kept = append(kept, root.Content[i], root.Content[i+1])
		}
		root.Content = kept
		ps, _ = d.mapping("limit", root, false)
	}
	r := d.resource("limit", root)
	switch {
	case !ok:
	case !has(ps, "kind"):
		l.add("limit.kind", `is required: "gcra" (with burst, count, period) or "tiers" (with tiers)`)
	case r.Kind != KindGCRA && r.Kind != KindTiers:
		l.add("limit.kind", `a request may set a limit of kind "gcra" or "tiers", got %q`, string(r.Kind))
	default:
		for _, q := range ps {
			if fieldOf(q.key) != nil && !contains(limitKeys[r.Kind], q.key) {
				l.add(q.path, "a limit set by a request takes only %s; set %s in the config", strings.Join(limitKeys[r.Kind], ", "), q.key)
			}
		}
	}
	if ok && r.Kind.Valid() {
		checkResource(&l, "limit", r)
	}
	if err := asError(d.merge(l.list)); err != nil {
		return nil, err
	}
	if p := normalizeLimit(r); p != nil {
		return nil, asError([]Problem{*p})
	}
	return r, nil
}

// normalizeLimit normalizes r, a valid limit, and returns the problem of
// a canonical form over MaxLimitKey bytes, or nil: the end of both
// readers of a limit (ParseLimit, quickLimit).
func normalizeLimit(r *Resource) *Problem {
	r.Normalize()
	var buf [MaxLimitKey]byte
	if k := appendLimitKey(buf[:0], r); len(k) > MaxLimitKey {
		return &Problem{Path: "limit", Message: "its canonical form " + strconv.Quote(string(k[:60])+"…") + " is " + strconv.Itoa(len(k)) +
			" bytes, over the " + strconv.Itoa(MaxLimitKey) + " a request may set; put this limit in the config"}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// LimitKey returns the canonical text of r, a limit ParseLimit returned:
// two limits that decide alike have the same text. gcra:
// "gcra:BURST/COUNT/PERIOD"; tiers: "tiers:" and, per tier,
// "LIMIT/WINDOW/ACTIVE/COOLDOWN" (with "/s" when skippable) joined by
// commas, durations in Go's notation ("1m30s"). ParseLimitKey reads it
// back.
func LimitKey(r *Resource) string {
	var buf [MaxLimitKey]byte
	return string(appendLimitKey(buf[:0], r))
}

// appendLimitKey appends LimitKey(r) to b.
func appendLimitKey(b []byte, r *Resource) []byte {
	switch r.Kind {
	case KindGCRA:
		b = append(b, "gcra:"...)
		b = strconv.AppendInt(b, int64(r.Burst), 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(r.Count), 10)
		b = append(b, '/')
		b = append(b, r.Period.String()...)
	case KindTiers:
		b = append(b, "tiers:"...)
		for i, t := range r.Tiers {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(t.Limit), 10)
			for _, d := range [...]time.Duration{t.Window, t.Active, t.Cooldown} {
				b = append(b, '/')
				b = append(b, d.String()...)
			}
			if t.Skippable {
				b = append(b, "/s"...)
			}
		}
	}
	return b
}

// StateLife is how long a key of r, a rate limit, keeps state after its
// last hit, at most: for gcra the burst offset, burst × period / count
// (a spent bucket refills in it); for tiers the longest of any tier's
// window and its active plus cooldown. A namespace caps it for limits set
// by requests (Namespace.MaxRequestWindow): a key that never resets would
// hold its definition's place, and a tiers key's memory grows with the
// hits its window holds. It saturates at 2^62 ns (146 years).
func (r *Resource) StateLife() time.Duration {
	var life float64
	switch r.Kind {
	case KindGCRA:
		if r.Count > 0 {
			life = float64(r.Period) / float64(r.Count) * float64(r.Burst)
		}
	case KindTiers:
		for _, t := range r.Tiers {
			life = max(life, float64(t.Window), float64(t.Active)+float64(t.Cooldown))
		}
	}
	return time.Duration(min(life, 1<<62))
}

// ParseLimitKey reads the canonical text of a limit (LimitKey) back into
// the limit, checked and normalized as ParseLimit does: a peer's counts
// of a limit set by a request name it so. Safe for concurrent use.
func ParseLimitKey(key string) (*Resource, error) {
	bad := func(msg string) (*Resource, error) {
		return nil, asError([]Problem{{Path: "limit", Message: msg + " in " + strconv.Quote(key)}})
	}
	if len(key) > MaxLimitKey {
		return bad("over " + strconv.Itoa(MaxLimitKey) + " bytes")
	}
	kind, body, _ := strings.Cut(key, ":")
	r := &Resource{Kind: Kind(kind)}
	switch r.Kind {
	case KindGCRA:
		f := strings.Split(body, "/")
		if len(f) != 3 {
			return bad("want gcra:BURST/COUNT/PERIOD")
		}
		var err1, err2, err3 error
		r.Burst, err1 = strconv.Atoi(f[0])
		r.Count, err2 = strconv.Atoi(f[1])
		r.Period, err3 = time.ParseDuration(f[2])
		if err1 != nil || err2 != nil || err3 != nil {
			return bad("want gcra:BURST/COUNT/PERIOD, integers and a duration")
		}
	case KindTiers:
		if body == "" {
			break
		}
		for _, ts := range strings.Split(body, ",") {
			f := strings.Split(ts, "/")
			if len(f) != 4 && (len(f) != 5 || f[4] != "s") {
				return bad("want tiers:LIMIT/WINDOW/ACTIVE/COOLDOWN[/s],…")
			}
			var t Tier
			var errs [4]error
			t.Limit, errs[0] = strconv.Atoi(f[0])
			t.Window, errs[1] = time.ParseDuration(f[1])
			t.Active, errs[2] = time.ParseDuration(f[2])
			t.Cooldown, errs[3] = time.ParseDuration(f[3])
			for _, err := range errs {
				if err != nil {
					return bad("want tiers:LIMIT/WINDOW/ACTIVE/COOLDOWN[/s],…, an integer and durations")
				}
			}
			t.Skippable = len(f) == 5
			r.Tiers = append(r.Tiers, t)
		}
		if len(r.Tiers) > MaxTiers {
			return bad("more than " + strconv.Itoa(MaxTiers) + " tiers")
		}
	default:
		return bad(`want "gcra:" or "tiers:"`)
	}
	var l problemList
	checkResource(&l, "limit", r)
	if err := asError(l.list); err != nil {
		return nil, err
	}
	r.Normalize()
	if LimitKey(r) != key {
		return bad("not in canonical form (" + strconv.Quote(LimitKey(r)) + ")")
	}
	return r, nil
}
