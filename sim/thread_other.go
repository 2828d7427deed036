//go:build !linux

package sim

import "time"

// ThreadTime is the monotonic clock where a thread's own processor time is
// not read: a simulation's time limit is then wall-clock time.
func ThreadTime() time.Duration { return time.Since(processStart) }
