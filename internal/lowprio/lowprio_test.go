package lowprio

import (
	"runtime"
	"testing"
)

// Run: f runs with one more P, on a thread at nice 19 (Linux), and the
// count comes back after.
func TestRun(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	var during, nice int
	var niceErr error
	Run(func() {
		during = runtime.GOMAXPROCS(0)
		nice, niceErr = threadNice()
	})
	if during != n+1 {
		t.Errorf("GOMAXPROCS %d while f ran, want %d", during, n+1)
	}
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Errorf("GOMAXPROCS %d after, want %d", got, n)
	}
	if runtime.GOOS == "linux" && (niceErr != nil || nice != 19) {
		t.Errorf("f's thread at nice %d (%v), want 19", nice, niceErr)
	}
	// The caller's thread keeps its priority.
	if p, err := threadNice(); err == nil && p == 19 {
		t.Errorf("the caller's thread is at nice 19 too")
	}
}

// ownProc: several at once each take one back, in any order.
func TestOwnProc(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	r1 := ownProc()
	r2 := ownProc()
	if got := runtime.GOMAXPROCS(0); got != n+2 {
		t.Fatalf("GOMAXPROCS %d with two, want %d", got, n+2)
	}
	r1() // out of order
	r1() // a second call changes nothing
	if got := runtime.GOMAXPROCS(0); got != n+1 {
		t.Fatalf("GOMAXPROCS %d after one release, want %d", got, n+1)
	}
	r2()
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Fatalf("GOMAXPROCS %d after both, want %d", got, n)
	}
}

// A panic in f reaches Run's caller, and the P comes back.
func TestRunCarriesPanic(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	got := func() (v any) {
		defer func() { v = recover() }()
		Run(func() { panic("boom") })
		return nil
	}()
	if got != "boom" {
		t.Fatalf("recovered %v in the caller, want boom", got)
	}
	if after := runtime.GOMAXPROCS(0); after != n {
		t.Fatalf("GOMAXPROCS %d after the panic, want %d", after, n)
	}
}

// A count the program set itself comes back by number; a default count
// comes back as the runtime's default. (That the runtime then follows the
// CPU limit again is not observable here without changing the limit.)
func TestRunRestoresDefaultOrCustom(t *testing.T) {
	defer runtime.SetDefaultGOMAXPROCS()
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	custom := def + 3 // never the default
	runtime.GOMAXPROCS(custom)
	Run(func() {})
	if got := runtime.GOMAXPROCS(0); got != custom {
		t.Errorf("GOMAXPROCS %d after Run from a set %d, want %d", got, custom, custom)
	}
	runtime.SetDefaultGOMAXPROCS()
	Run(func() {})
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Errorf("GOMAXPROCS %d after Run from the default, want %d", got, def)
	}
}
