//go:build !linux

package api

import "time"

// lowPriorityThread does nothing where threads have no priority of their
// own to lower.
func lowPriorityThread() {}

// threadTime is the monotonic clock where a thread's own processor time is
// not read: a simulation's time limit is then wall-clock time.
func threadTime() time.Duration { return time.Since(processStart) }
