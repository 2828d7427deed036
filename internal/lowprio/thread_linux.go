package lowprio

import "syscall"

// lowerThread gives the calling thread the lowest scheduling priority
// (nice 19). A failure leaves the priority as it was.
func lowerThread() {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19)
}

// threadNice returns the calling thread's nice value.
func threadNice() (int, error) {
	// getpriority returns 20 - nice for a thread (the raw system call).
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	return 20 - p, err
}
