package sim

import (
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LowPriorityThread locks the calling goroutine to its OS thread and gives
// that thread the lowest scheduling priority (nice 19). The goroutine must
// exit without unlocking: the runtime then ends the thread, so no other
// goroutine ever runs at that priority. A failure leaves the priority as it
// was (the work is still bounded by its Pace).
func LowPriorityThread() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19)
}

// ThreadTime returns the processor time the calling thread has used: after
// LowPriorityThread, the work of the goroutine locked to it, whatever else
// the machine is busy with. It falls back to the monotonic clock when the
// kernel does not answer.
func ThreadTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Since(processStart)
	}
	return time.Duration(ts.Nano())
}
