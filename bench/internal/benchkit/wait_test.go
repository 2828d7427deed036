package benchkit

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSleepUntil(t *testing.T) {
	if err := SleepUntil(context.Background(), time.Now().Add(-time.Second)); err != nil {
		t.Fatalf("past instant: %v", err)
	}
	if err := SleepUntil(context.Background(), time.Now().Add(time.Millisecond)); err != nil {
		t.Fatalf("near instant: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := SleepUntil(ctx, time.Now().Add(time.Hour)); err != context.Canceled {
		t.Fatalf("ended context: %v, want context.Canceled", err)
	}
	if err := SleepUntil(ctx, time.Now().Add(-time.Hour)); err != context.Canceled {
		t.Fatalf("ended context, past instant: %v, want context.Canceled", err)
	}
}

func TestPoll(t *testing.T) {
	bg := context.Background()
	calls := 0
	if err := Poll(bg, time.Minute, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("success on the third try: %v after %d", err, calls)
	}
	gone := errors.New("exited")
	calls = 0
	if err := Poll(bg, time.Minute, time.Millisecond, func() error { calls++; return Stop(gone) }); err != gone || calls != 1 {
		t.Fatalf("Stop: %v after %d tries, want %v after 1", err, calls, gone)
	}
	last := errors.New("still down")
	err := Poll(bg, 0, time.Millisecond, func() error { return last })
	var te *TimeoutError
	if !errors.As(err, &te) || te.Last != last || !errors.Is(err, last) {
		t.Fatalf("limit 0: %v, want a TimeoutError of %v", err, last)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := Poll(ctx, time.Minute, time.Millisecond, func() error { t.Fatal("tried"); return nil }); err != context.Canceled {
		t.Fatalf("ended context: %v", err)
	}
	ctx, cancel = context.WithCancel(bg)
	calls = 0
	if err := Poll(ctx, time.Hour, time.Hour, func() error { calls++; cancel(); return last }); err != context.Canceled || calls != 1 {
		t.Fatalf("context ended during the wait: %v after %d tries", err, calls)
	}
}

func TestWaitSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	if err := WaitSocket(context.Background(), path, 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no file: %v", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WaitSocket(context.Background(), path, 0); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("a regular file: %v", err)
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Skip(err)
	}
	defer ln.Close()
	if err := WaitSocket(context.Background(), path, time.Second); err != nil {
		t.Fatalf("a socket: %v", err)
	}
}
