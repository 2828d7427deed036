// Package lowprio runs work that must not delay decisions: simulations and
// reloads of large config files. Run gives the work a thread of its own at
// the lowest scheduling priority (nice 19, on Linux) and, while it runs,
// one more of the Go runtime's processors (GOMAXPROCS + 1), so that the
// kernel, not the Go scheduler, shares the machine between it and the
// decisions, and gives the processor to the decisions first.
//
// Why both: a goroutine locked to a thread runs only while that thread
// holds one of the runtime's processors (Ps). With GOMAXPROCS 1 (an agent
// limited to one processor by its container's CPU limit or by taskset) the
// work's thread and the decisions shared the one P: each slice of the work
// moved the P between threads, and a decision that became ready meanwhile
// waited for it. This package is internal: it is shared by obol's own
// packages.
package lowprio
