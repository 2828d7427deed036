package sim

import (
	"runtime"
	"sync"
)

// procs counts the Ps OwnProc added (extra) to the GOMAXPROCS it found
// (base), under its mutex.
var procs struct {
	sync.Mutex
	base, extra int
}

// OwnProc adds one to GOMAXPROCS for a simulation's thread, and returns the
// function that takes it back. Call it before LowPriorityThread, and the
// release when the simulation's goroutine is done.
//
// Why: a goroutine locked to a thread runs only while that thread holds one
// of the runtime's processors (Ps). With GOMAXPROCS 1 (an agent limited to
// one processor, by its container's CPU limit or by taskset) the
// simulation's low-priority thread and the decisions share the one P: each
// time the simulation runs, the P moves to its thread and back, and a
// decision that became ready meanwhile waits for it (the pinned probe's p99
// went from 0.32 to 1.6 ms under three clients posting simulations). With
// a P of its own the simulation's thread competes for the processor only in
// the kernel, which at nice 19 gives it to the decisions' threads first.
//
// The last release restores the count the first OwnProc found, unless
// something else changed GOMAXPROCS meanwhile. Changing GOMAXPROCS stops the world briefly
// (tens of µs), twice per simulation; one simulation runs at a time.
func OwnProc() (release func()) {
	procs.Lock()
	defer procs.Unlock()
	if procs.extra == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.extra++
	runtime.GOMAXPROCS(procs.base + procs.extra)
	var once sync.Once
	return func() {
		once.Do(func() {
			procs.Lock()
			defer procs.Unlock()
			procs.extra--
			if runtime.GOMAXPROCS(0) == procs.base+procs.extra+1 {
				runtime.GOMAXPROCS(procs.base + procs.extra)
			}
		})
	}
}
