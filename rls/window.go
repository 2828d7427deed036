package rls

// window.go is the fixed window's pure rules, envoyproxy/ratelimit's:
// no clock, no lock, no I/O. A window of a unit of U seconds starts at
// ⌊now/U⌋·U (Unix seconds, so a week starts on a Thursday, a month is
// 30 days and a year 365, as theirs), its counter grows by every
// request's hits, granted or not, and a request is over the limit when the
// count after its hits exceeds requests_per_unit.

// windowStart returns the start of the window of a unit of secs seconds
// holding the instant nowSec (Unix seconds).
func windowStart(nowSec, secs int64) int64 { return floorDiv(nowSec, secs) * secs }

// untilReset returns duration_until_reset in seconds: the rest of the
// window, from 1 (its last second) to secs (its first).
func untilReset(nowSec, secs int64) int64 { return secs - (nowSec - windowStart(nowSec, secs)) }

// verdict is one descriptor's outcome under a fixed window.
type verdict struct {
	over      bool
	remaining uint32 // limit − after when not over, else 0
}

// judge decides a descriptor whose count went from before to after under
// a limit of limit requests.
func judge(after uint64, limit uint32) verdict {
	if after > uint64(limit) {
		return verdict{over: true}
	}
	return verdict{remaining: uint32(uint64(limit) - after)}
}

// nearThreshold is the count past which hits are near the limit: ⌊limit ×
// ratio⌋, computed in float32 as envoyproxy/ratelimit does.
func nearThreshold(limit uint32, ratio float32) uint64 {
	return uint64(float32(limit) * ratio)
}

// tally is what one decision adds to its limit's counters.
type tally struct {
	total, over, near, within, shadow uint64
}

// count returns the tally of hits hits that took a counter from before to
// after under limit and near (envoyproxy/ratelimit's accounting: of a
// request that crosses the limit, the hits past it are over, those between
// the near threshold and the limit near).
func count(before, after, hits uint64, limit uint32, near uint64, shadow bool) tally {
	t := tally{total: hits}
	lim := uint64(limit)
	if after > lim {
		if before >= lim {
			t.over = hits
		} else {
			t.over = after - lim
			t.near = lim - max(near, before)
		}
		if shadow {
			if before >= lim {
				t.shadow = hits
			} else {
				t.shadow = after - lim
			}
		}
		return t
	}
	t.within = hits
	if after > near {
		if before >= near {
			t.near = hits
		} else {
			t.near = after - near
		}
	}
	return t
}
