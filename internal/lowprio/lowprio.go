package lowprio

import (
	"os"
	"runtime"
	"sync"
)

// Run runs f on a thread of its own at the lowest scheduling priority,
// with one more P than before while f runs, and returns when f returns.
// The thread ends with f: no other goroutine ever runs at its priority.
// Where threads have no priority of their own (not Linux) f runs on a
// thread of its own all the same.
//
// A panic in f is carried to the caller and raised again there, so that
// the caller's recover (an HTTP handler's) sees it; on f's own goroutine
// it would end the process.
func Run(f func()) {
	release := ownProc()
	defer release()
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		// Locked and never unlocked: the runtime ends the thread when
		// this goroutine exits.
		runtime.LockOSThread()
		lowerThread()
		f()
	}()
	<-done
	if panicked != nil {
		panic(panicked)
	}
}

// procs counts the Ps ownProc added (extra) to the GOMAXPROCS it found
// (base), under its mutex.
var procs struct {
	sync.Mutex
	base, extra int
}

// ownProc adds one to GOMAXPROCS and returns the function that takes it
// back (once, in any order among several). The last release restores the
// count the first ownProc found, unless something else changed GOMAXPROCS
// meanwhile. Changing GOMAXPROCS stops the world briefly (tens of µs),
// twice per Run.
//
// Setting GOMAXPROCS by number ends the runtime's own updates of it (it
// follows the container's CPU limit while nobody has set it), so the last
// release does not simply set the number back: see restoreBase.
func ownProc() (release func()) {
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
			if runtime.GOMAXPROCS(0) != procs.base+procs.extra+1 {
				return // changed by someone else meanwhile: theirs stands
			}
			if procs.extra > 0 {
				runtime.GOMAXPROCS(procs.base + procs.extra)
				return
			}
			restoreBase(procs.base)
		})
	}
}

// restoreBase puts GOMAXPROCS back to base. Where the environment does not
// fix GOMAXPROCS, the runtime's default is put back first, which keeps it
// following the CPU limit; base is then set by number only if it was not
// the default (a program that set its own count keeps it). If the CPU
// limit changed while the work ran, the default now differs from base and
// base is kept by number: the runtime stops following the limit, as it
// would have had the program set the count itself.
func restoreBase(base int) {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.SetDefaultGOMAXPROCS()
		if runtime.GOMAXPROCS(0) == base {
			return
		}
	}
	runtime.GOMAXPROCS(base)
}
