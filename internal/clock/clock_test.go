package clock

import (
	"context"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeSleepWakesOnAdvance(t *testing.T) {
	f := NewFake(t0)
	done := make(chan error, 1)
	go func() { done <- f.Sleep(context.Background(), 3*time.Second) }()
	if err := f.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(2 * time.Second)
	select {
	case <-done:
		t.Fatal("woke 1s early")
	default:
	}
	if got := f.Waiters(); got != 1 {
		t.Fatalf("waiters = %d, want 1", got)
	}
	f.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v", err)
	}
	if got := f.Now(); !got.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("Now = %v", got)
	}
}

func TestFakeSleepCancelled(t *testing.T) {
	f := NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Sleep(ctx, time.Hour) }()
	_ = f.BlockUntil(context.Background(), 1)
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if got := f.Waiters(); got != 0 {
		t.Fatalf("waiters = %d after cancel, want 0", got)
	}
}

func TestFakeAfterOrderAndNext(t *testing.T) {
	f := NewFake(t0)
	a := f.After(2 * time.Second)
	b := f.After(time.Second)
	if n, ok := f.Next(); !ok || !n.Equal(t0.Add(time.Second)) {
		t.Fatalf("Next = %v %v", n, ok)
	}
	f.Advance(5 * time.Second)
	if got := <-b; !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("b fired at %v", got)
	}
	<-a
	if _, ok := f.Next(); ok {
		t.Fatal("Next reports a waiter after all fired")
	}
	if got := <-f.After(0); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("After(0) = %v", got)
	}
	f.Set(t0) // earlier: ignored
	if !f.Now().Equal(t0.Add(5 * time.Second)) {
		t.Fatal("Set moved the clock back")
	}
}

func TestRealSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (Real{}).Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on a done ctx = %v", err)
	}
	if err := (Real{}).Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
}
