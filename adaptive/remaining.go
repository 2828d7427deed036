package adaptive

import (
	"strconv"
	"strings"
)

// Header is the fields of a reply, as Remaining reads them: net/http's
// Header implements it (Values canonicalizes the name). An interface, so
// that the engine, which links this package, links no network.
type Header interface {
	// Values returns every value of the field name, in order.
	Values(name string) []string
}

// Remaining returns the remaining count a reply's headers report, and
// false when they report none. It reads, in this order:
//
//   - the structured RateLimit field of the IETF draft
//     (`RateLimit: "policy";r=4;t=1`, a list of items): the smallest r of
//     its items, since the tightest policy binds;
//   - the older dictionary form of the same field (`RateLimit: limit=10,
//     remaining=4, reset=1`): its remaining;
//   - RateLimit-Remaining (and X-RateLimit-Remaining): a non-negative
//     integer, or a list of them (the smallest).
//
// Malformed values are skipped, not guessed at.
func Remaining(h Header) (int, bool) {
	for _, v := range h.Values("RateLimit") {
		if n, ok := structuredRemaining(v); ok {
			return n, true
		}
	}
	for _, name := range []string{"RateLimit-Remaining", "X-RateLimit-Remaining"} {
		best, found := 0, false
		for _, v := range h.Values(name) {
			if n, ok := ParseRateLimitRemaining(v); ok && (!found || n < best) {
				best, found = n, true
			}
		}
		if found {
			return best, true
		}
	}
	return 0, false
}

// ParseRateLimit returns the remaining count one RateLimit field value
// reports, as Remaining reads it: the smallest r parameter of the items of
// the IETF draft's structured form (`"default";r=4;t=1`, items separated by
// commas, a quoted name may hold commas and semicolons), or the remaining
// member of the older dictionary form (`limit=10, remaining=4, reset=1`).
// Items whose r is malformed are skipped; ok is false when no item reports
// a count.
func ParseRateLimit(v string) (remaining int, ok bool) { return structuredRemaining(v) }

// ParseRateLimitRemaining returns the count one RateLimit-Remaining (or
// X-RateLimit-Remaining) field value reports: a non-negative decimal
// integer of at most 18 digits, or a comma-separated list of them (the
// smallest); spaces around each are ignored. ok is false when no member is
// such an integer.
func ParseRateLimitRemaining(v string) (remaining int, ok bool) {
	best, found := 0, false
	for _, part := range strings.Split(v, ",") {
		if n, ok := count(strings.TrimSpace(part)); ok && (!found || n < best) {
			best, found = n, true
		}
	}
	return best, found
}

// structuredRemaining reads one RateLimit field value: the smallest r=
// parameter of its list members, or its remaining= dictionary member. It
// does not allocate.
func structuredRemaining(v string) (int, bool) {
	best, found := 0, false
	for rest, more := v, true; more; {
		var member string
		member, rest, more = cutOutsideQuotes(rest, ',')
		for i, prest, pmore := 0, member, true; pmore; i++ {
			var p string
			p, prest, pmore = cutOutsideQuotes(prest, ';')
			k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok {
				continue
			}
			k = strings.TrimSpace(k)
			// r is a parameter of an item (i > 0); remaining is a
			// dictionary key (the member itself, i == 0).
			if (k == "r" && i > 0) || (k == "remaining" && i == 0) {
				if n, ok := count(strings.TrimSpace(val)); ok && (!found || n < best) {
					best, found = n, true
				}
			}
		}
	}
	return best, found
}

// count parses a non-negative decimal integer of at most 18 digits.
func count(s string) (int, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// cutOutsideQuotes slices s around the first sep that is not inside a
// "quoted string" (where \ escapes the next character), returning the
// text before and after it; found is false, and before is s, when there is
// none.
func cutOutsideQuotes(s string, sep byte) (before, after string, found bool) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
