package lowprio

import (
	"os"
	"strconv"
	"syscall"
)

// LowerProcess gives every thread of the process the lowest scheduling
// priority (nice 19). A thread started afterwards inherits the priority
// of the thread that starts it, so, once all have it, the process keeps
// it. It is for a process that only does work that must not delay
// decisions (a simulation child): its garbage collector's threads too then
// yield the processor to the agent's. Failures leave a thread as it was.
func LowerProcess() {
	// A thread started while the list is read is lowered by the next
	// pass; the runtime starts few, so three passes are plenty.
	for range 3 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 19)
			return
		}
		lowered := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			// getpriority returns 20 - nice for a thread (the raw system call).
			if p, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid); err == nil && 20-p == 19 {
				continue
			}
			if syscall.Setpriority(syscall.PRIO_PROCESS, tid, 19) == nil {
				lowered++
			}
		}
		if lowered == 0 {
			return
		}
	}
}
