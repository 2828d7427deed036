package sim

import (
	"runtime"
	"testing"
	"time"
)

// ThreadTime counts the calling thread's processor time: while the thread
// waits on a channel, another goroutine's 20 ms of work does not move it.
func TestThreadTimeCountsTheThreadOnly(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	done := make(chan struct{})
	before := ThreadTime()
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for start := ThreadTime(); ThreadTime()-start < 20*time.Millisecond; {
		}
	}()
	<-done
	if waited := ThreadTime() - before; waited >= 20*time.Millisecond {
		t.Fatalf("the waiting thread's time moved %v while another worked 20ms", waited)
	}
}
