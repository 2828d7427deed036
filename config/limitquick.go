package config

import (
	"strconv"
)

// limitquick.go reads the common form of a limit set by a request without
// the document decoder: a flat JSON object of kind and its fields, plain
// strings and integers. The decoder builds a node tree for each (about 17
// µs and 120 allocations a limit); a client that sends a new limit with
// every request would spend that each time. Anything else, and any limit
// that breaks a rule, goes to the decoder, whose messages are the
// contract: quickLimit only ever accepts what ParseLimit accepts, with
// the same result (FuzzQuickLimit holds it to that).

// quickLimit returns the limit data holds when it is in the common form
// and valid; ok is false otherwise, and data is for ParseLimit.
func quickLimit(data []byte) (r *Resource, ok bool) {
	var f struct {
		kind          Kind
		period, tiers []byte
		burst, count  int
		seen          uint8 // 1 kind, 2 burst, 4 count, 8 period, 16 tiers
	}
	i := skipJSONSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipJSONSpace(data, i)
		key, j, ok := plainJSONString(data, i)
		if !ok {
			return nil, false
		}
		i = skipJSONSpace(data, j)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipJSONSpace(data, i+1)
		var bit uint8
		switch string(key) {
		case "kind", "period", "tiers":
			v, j, ok := plainJSONString(data, i)
			if !ok {
				return nil, false
			}
			i = j
			switch string(key) {
			case "kind":
				switch string(v) {
				case string(KindGCRA):
					f.kind = KindGCRA
				case string(KindTiers):
					f.kind = KindTiers
				default:
					return nil, false // the decoder names it
				}
				bit = 1
			case "period":
				f.period, bit = v, 8
			default:
				f.tiers, bit = v, 16
			}
		case "burst", "count":
			v, j, ok := plainJSONInt(data, i)
			if !ok {
				return nil, false
			}
			i = j
			if string(key) == "burst" {
				f.burst, bit = v, 2
			} else {
				f.count, bit = v, 4
			}
		default:
			return nil, false
		}
		if f.seen&bit != 0 {
			return nil, false // a duplicate: the decoder names it
		}
		f.seen |= bit
		i = skipJSONSpace(data, i)
		if i < len(data) && data[i] == ',' {
			i++
			continue
		}
		if i >= len(data) || data[i] != '}' {
			return nil, false
		}
		if skipJSONSpace(data, i+1) != len(data) {
			return nil, false
		}
		break
	}
	r = &Resource{Kind: f.kind}
	switch {
	case r.Kind == KindGCRA && f.seen == 1|2|4|8:
		var msg string
		if r.Period, msg = parseDuration(string(f.period)); msg != "" {
			return nil, false
		}
		r.Burst, r.Count = f.burst, f.count
	case r.Kind == KindTiers && f.seen == 1|16:
		bad := false
		r.Tiers = compactTiers(func(string, string) { bad = true }, "limit.tiers", string(f.tiers))
		if bad {
			return nil, false
		}
	default:
		return nil, false
	}
	var l problemList
	checkResource(&l, "limit", r)
	if len(l.list) > 0 || normalizeLimit(r) != nil {
		return nil, false
	}
	return r, true
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainJSONString reads a JSON string at b[i:] with no escape and no
// control character (else ok is false), and returns its bytes (within b)
// and the index after it.
func plainJSONString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, 0, false // escapes and non-ASCII: the decoder
		}
	}
	return nil, 0, false
}

// plainJSONInt reads a JSON integer at b[i:]: digits, no sign, no leading
// zero, no fraction or exponent, at most nine digits (else ok is false).
func plainJSONInt(b []byte, i int) (v, next int, ok bool) {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == i || j-i > 9 || (b[i] == '0' && j-i > 1) {
		return 0, 0, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, 0, false
	}
	v, err := strconv.Atoi(string(b[i:j]))
	return v, j, err == nil
}
