// This file has one job: a log that tests wait on (Log).

package await

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// Log is an io.Writer that keeps what is written to it (a logger's or a
// child process's output) and signals every Write: a test waits for a line
// to appear rather than polling for it. The zero value is ready to use.
// Safe for concurrent use.
type Log struct {
	Signal
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p and notifies the waiters.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	n, err := l.b.Write(p)
	l.mu.Unlock()
	l.Notify()
	return n, err
}

// String returns everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Wait returns once the log contains sub, failing t (and showing the log)
// when d passes first.
func (l *Log) Wait(t testing.TB, d time.Duration, sub string) {
	t.Helper()
	if !UntilOK(d, &l.Signal, func() bool { return strings.Contains(l.String(), sub) }) {
		t.Fatalf("timed out after %v waiting for %q in the log:\n%s", d, sub, l)
	}
}

// WaitJSON returns the first JSON line of the log (a slog JSON handler's)
// whose "msg" is msg, waiting for it; it fails t (and shows the log) when d
// passes first.
func (l *Log) WaitJSON(t testing.TB, d time.Duration, msg string) map[string]any {
	t.Helper()
	var line map[string]any
	if !UntilOK(d, &l.Signal, func() bool { line = l.JSON(msg); return line != nil }) {
		t.Fatalf("timed out after %v waiting for the log line %q:\n%s", d, msg, l)
	}
	return line
}

// JSON returns the first JSON line of the log whose "msg" is msg, or nil.
func (l *Log) JSON(msg string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}
