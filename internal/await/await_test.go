package await

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilWakesOnNotify(t *testing.T) {
	var s Signal
	var n atomic.Int64
	done := make(chan bool)
	go func() { done <- UntilOK(time.Minute, &s, func() bool { return n.Load() == 3 }) }()
	for range 3 {
		n.Add(1)
		s.Notify()
	}
	if !<-done {
		t.Fatal("Until missed the notified change")
	}
}

func TestUntilTimesOut(t *testing.T) {
	var s Signal
	if UntilOK(time.Millisecond, &s, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
	if !UntilOK(0, &s, func() bool { return true }) {
		t.Fatal("a condition that holds at once did not")
	}
}

func TestPoll(t *testing.T) {
	var n atomic.Int64
	if !PollOK(time.Minute, func() bool { return n.Add(1) == 5 }) {
		t.Fatal("Poll gave up on a condition that holds at the fifth check")
	}
	if PollOK(time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
}

func TestLogWait(t *testing.T) {
	var l Log
	go func() {
		fmt.Fprintln(&l, `{"msg":"starting"}`)
		fmt.Fprintln(&l, "not JSON")
		fmt.Fprintln(&l, `{"msg":"started","addr":"127.0.0.1:1"}`)
	}()
	if m := l.WaitJSON(t, time.Minute, "started"); m["addr"] != "127.0.0.1:1" {
		t.Fatalf("line %v", m)
	}
	l.Wait(t, time.Minute, "not JSON")
	if l.JSON("absent") != nil {
		t.Fatal("JSON found a line never written")
	}
}
