package sim

import (
	"time"

	"golang.org/x/sys/unix"
)

// ThreadTime returns the processor time the calling thread has used: on a
// thread a goroutine is locked to (internal/lowprio.Run), that goroutine's
// work, whatever else the machine is busy with. It falls back to the monotonic clock when the
// kernel does not answer.
func ThreadTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Since(processStart)
	}
	return time.Duration(ts.Nano())
}
