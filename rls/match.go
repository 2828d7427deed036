package rls

import (
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// match.go maps one request descriptor onto the config, as
// envoyproxy/ratelimit's GetLimit does, and writes the descriptor's cache
// key (its counter's name) without allocating:
//
//   - each entry is looked up as "key_value", then, when that is absent,
//     through the level's wildcards ("key_prefix*": the entry's "key_value"
//     starts with "key_prefix"; the first in file order wins), then as
//     "key" alone (any value);
//   - the limit is the one of the node the descriptor's last entry reaches;
//     a descriptor that goes deeper than the config, or stops above a
//     limit, has none;
//   - the counter is "domain_" then "key_value_" per entry, where an entry
//     matched through a share_threshold wildcard writes the wildcard's
//     value ("files*") instead of its own, so that all its values share it.

// match returns the limit of descriptor d of domain and appends its cache
// key to key; nil when it has none (an unknown domain, no match). A
// descriptor carrying its own limit (the request's override) is not looked
// at here.
func (c *Config) match(domain string, d *rlv3.RateLimitDescriptor, key []byte) (*Limit, []byte) {
	dom := c.domains[domain]
	if dom == nil {
		return nil, key
	}
	var tmp [128]byte
	key = append(append(key, domain...), '_')
	prev, m := dom, dom.children
	var found *Limit
	entries := d.GetEntries()
	for i, e := range entries {
		fk := append(append(append(tmp[:0], e.GetKey()...), '_'), e.GetValue()...)
		next := m[string(fk)]
		wild := ""
		if next == nil {
			for _, w := range prev.wildcard {
				if len(fk) >= len(w)-1 && string(fk[:len(w)-1]) == w[:len(w)-1] {
					next, wild = m[w], w
					break
				}
			}
		}
		if next == nil {
			next = m[e.GetKey()]
		}
		value := e.GetValue()
		if wild != "" && next != nil && next.share && next.pattern != "" {
			if k := e.GetKey(); len(wild) > len(k) && wild[:len(k)] == k && wild[len(k)] == '_' {
				value = wild[len(k)+1:]
			} else {
				value = wild
			}
		}
		key = append(append(append(append(key, e.GetKey()...), '_'), value...), '_')
		if next != nil && next.limit != nil && i == len(entries)-1 {
			found = next.limit
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		prev, m = next, next.children
	}
	return found, key
}

// HasDomain reports whether the config has domain.
func (c *Config) HasDomain(domain string) bool { return c.domains[domain] != nil }

// overrideKey appends the cache key of a descriptor carrying its own
// limit: "domain_" then "key_value_" per entry.
func overrideKey(domain string, d *rlv3.RateLimitDescriptor, key []byte) []byte {
	key = append(append(key, domain...), '_')
	for _, e := range d.GetEntries() {
		key = append(append(append(append(key, e.GetKey()...), '_'), e.GetValue()...), '_')
	}
	return key
}
