//go:build obol_testclock

package main

import (
	"fmt"
	"os"
	"time"

	"github.com/obol-dev/obol/internal/clock"
)

// testclock.go is a seam for the tests that run agent binaries together
// and need their windows where the test puts them: built only with
// -tags obol_testclock (those tests build the agent so), it reads
// OBOL_TEST_CLOCK_SHIFT, a duration, and runs the agent on the wall clock
// moved by it (plus monotonic time, as always). Agents given the same shift
// agree on the time as agents on one wall clock do. A build without the
// tag has no such variable.

func init() {
	testBase = func() (*clock.Monotonic, error) {
		v := os.Getenv("OBOL_TEST_CLOCK_SHIFT")
		if v == "" {
			return nil, nil
		}
		shift, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("OBOL_TEST_CLOCK_SHIFT %q: want a duration such as 12.5s", v)
		}
		start := time.Now()
		since := func(time.Time) time.Duration { return time.Since(start) }
		return clock.NewMonotonicFrom(start.Add(shift).Round(0), since, func() time.Time { return time.Now().Add(shift) }), nil
	}
}
