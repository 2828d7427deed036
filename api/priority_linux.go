package api

import (
	"runtime"
	"syscall"
)

// lowPriorityThread locks the calling goroutine to its OS thread and gives
// that thread the lowest scheduling priority (nice 19). The goroutine must
// exit without unlocking: the runtime then ends the thread, so no other
// goroutine ever runs at that priority. A failure leaves the priority as it
// was (the work is still bounded by its duty cycle and time limit).
func lowPriorityThread() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19)
}
