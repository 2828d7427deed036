package sim

import (
	"runtime"
	"testing"
)

func TestOwnProc(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	release := OwnProc()
	if got := runtime.GOMAXPROCS(0); got != n+1 {
		t.Fatalf("GOMAXPROCS %d during the simulation, want %d", got, n+1)
	}
	release()
	release() // a second call changes nothing
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Fatalf("GOMAXPROCS %d after the release, want %d", got, n)
	}
	// Two at once (the cluster simulator and /v1/simulate are one at a
	// time, but the rule must hold if they were not): each release takes
	// one back, in any order.
	r1 := OwnProc()
	r2 := OwnProc()
	if got := runtime.GOMAXPROCS(0); got != n+2 {
		t.Fatalf("GOMAXPROCS %d with two simulations, want %d", got, n+2)
	}
	r1() // out of order
	r2()
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Fatalf("GOMAXPROCS %d after two releases, want %d", got, n)
	}
}
