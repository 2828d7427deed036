package lowprio

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// LowerProcess, in a process of its own (it cannot be undone): every
// thread is at nice 19 after it, and so is a thread started later.
func TestLowerProcess(t *testing.T) {
	if os.Getenv("LOWPRIO_TEST_CHILD") == "1" {
		lowerProcessChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLowerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "LOWPRIO_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func lowerProcessChild(t *testing.T) {
	var wg sync.WaitGroup
	hold := make(chan struct{})
	for range 4 { // threads that exist before the call
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			<-hold
		}()
	}
	LowerProcess()
	var later int
	var laterErr error
	wg.Add(1)
	go func() { // one started after, on a thread of its own
		defer wg.Done()
		runtime.LockOSThread()
		later, laterErr = threadNice()
		<-hold
	}()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		p, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
		if err != nil {
			continue // the thread ended meanwhile
		}
		if nice := 20 - p; nice != 19 {
			t.Errorf("thread %d at nice %d, want 19", tid, nice)
		}
	}
	close(hold)
	wg.Wait()
	if laterErr != nil || later != 19 {
		t.Errorf("a thread started after: nice %d (%v), want 19", later, laterErr)
	}
}
