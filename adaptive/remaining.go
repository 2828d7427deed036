package adaptive

import (
	"net/http"
	"strconv"
	"strings"
)

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
func Remaining(h http.Header) (int, bool) {
	for _, v := range h.Values("RateLimit") {
		if n, ok := structuredRemaining(v); ok {
			return n, true
		}
	}
	for _, name := range []string{"RateLimit-Remaining", "X-RateLimit-Remaining"} {
		best, found := 0, false
		for _, v := range h.Values(name) {
			for _, part := range strings.Split(v, ",") {
				if n, ok := count(strings.TrimSpace(part)); ok && (!found || n < best) {
					best, found = n, true
				}
			}
		}
		if found {
			return best, true
		}
	}
	return 0, false
}

// structuredRemaining reads one RateLimit field value: the smallest r=
// parameter of its list members, or its remaining= dictionary member.
func structuredRemaining(v string) (int, bool) {
	best, found := 0, false
	for _, member := range splitOutsideQuotes(v, ',') {
		parts := splitOutsideQuotes(member, ';')
		for i, p := range parts {
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

// splitOutsideQuotes splits s at sep, except inside "quoted strings"
// (where \ escapes the next character).
func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
