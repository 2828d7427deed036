package rls

import (
	"testing"
	"time"
)

func TestWindowStartAndReset(t *testing.T) {
	at := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.Unix()
	}
	for _, tc := range []struct {
		now   string
		unit  string
		secs  int64
		start string
		reset int64
	}{
		{"2026-03-02T10:00:00Z", "second", 1, "2026-03-02T10:00:00Z", 1},
		{"2026-03-02T10:00:59Z", "minute", 60, "2026-03-02T10:00:00Z", 1},
		{"2026-03-02T10:01:00Z", "minute", 60, "2026-03-02T10:01:00Z", 60},
		{"2026-03-02T10:59:30Z", "hour", 3600, "2026-03-02T10:00:00Z", 30},
		{"2026-03-02T23:59:59Z", "day", 86400, "2026-03-02T00:00:00Z", 1},
		// Weeks start on Thursdays, as the Unix epoch did.
		{"2026-03-02T10:00:00Z", "week", 604800, "2026-02-26T00:00:00Z", 2*86400 + 14*3600},
		// A month is 30 days from the epoch, a year 365.
		{"2026-03-02T10:00:00Z", "month", 2592000, "2026-02-06T00:00:00Z", 5*86400 + 14*3600},
		{"2026-03-02T10:00:00Z", "year", 31536000, "2025-12-18T00:00:00Z", 290*86400 + 14*3600},
	} {
		now := at(tc.now)
		if got := windowStart(now, tc.secs); got != at(tc.start) {
			t.Errorf("%s at %s: window starts %s, want %s", tc.unit, tc.now, time.Unix(got, 0).UTC().Format(time.RFC3339), tc.start)
		}
		if got := untilReset(now, tc.secs); got != tc.reset {
			t.Errorf("%s at %s: reset in %d s, want %d", tc.unit, tc.now, got, tc.reset)
		}
	}
}

func TestCountTally(t *testing.T) {
	// limit 10, near threshold 8.
	for _, tc := range []struct {
		before, after, hits uint64
		shadow              bool
		want                tally
	}{
		{0, 1, 1, false, tally{total: 1, within: 1}},
		{8, 9, 1, false, tally{total: 1, within: 1, near: 1}},
		{6, 10, 4, false, tally{total: 4, within: 4, near: 2}},
		{9, 12, 3, false, tally{total: 3, over: 2, near: 1}},
		{7, 12, 5, true, tally{total: 5, over: 2, near: 2, shadow: 2}},
		{12, 13, 1, true, tally{total: 1, over: 1, shadow: 1}},
	} {
		if got := count(tc.before, tc.after, tc.hits, 10, nearThreshold(10, 0.8), tc.shadow); got != tc.want {
			t.Errorf("%d→%d (+%d): %+v, want %+v", tc.before, tc.after, tc.hits, got, tc.want)
		}
	}
	if got := nearThreshold(7, 0.8); got != 5 {
		t.Errorf("near threshold of 7: %d, want 5", got)
	}
}
