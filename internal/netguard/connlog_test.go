package netguard

import (
	"bytes"
	"log"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestConnectionErrorLogsCannotFillADisk is the regression test of the
// hardening issue's seventh attack: each connection closed mid-headers logged
// fasthttp's raw buffer (up to 14.7 KB); 130k connections wrote 78 MiB in
// 5 s. Lines are now cut, rate-limited, and counted.
func TestConnectionErrorLogsCannotFillADisk(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	l := NewConnLog(slog.New(slog.NewJSONHandler(&out, nil)), func() time.Time { return now }, "http server: connection error")
	raw := strings.Repeat("GET /v1/request HTTP/1.1\r\nX-Junk: ", 500) // 17 KB, as fasthttp quotes its buffer
	for range 130_000 {
		l.Printf("error when reading request headers: %v. Buffer size=%d, contents: %q", "unexpected EOF", len(raw), raw)
	}
	if n := out.Len(); n > connLogBurst*(connLogMax+200) {
		t.Errorf("130k connection errors wrote %d bytes of log", n)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != connLogBurst {
		t.Errorf("%d lines at one instant, want the burst of %d", len(lines), connLogBurst)
	}
	for _, ln := range lines {
		if len(ln) > connLogMax+200 {
			t.Fatalf("a line of %d bytes: %.300s", len(ln), ln)
		}
	}
	if !strings.Contains(lines[0], "bytes cut") {
		t.Errorf("a cut line does not say so: %s", lines[0])
	}
	// One "msg" per line (the handler's): fasthttp's text goes under "error".
	if n := strings.Count(lines[0], `"msg":`); n != 1 || !strings.Contains(lines[0], `"error":"error when reading request headers`) {
		t.Errorf(`a line with %d "msg" keys, or without fasthttp's text as "error": %.300s`, n, lines[0])
	}
	if l.seen.Load() != 130_000 || l.suppressed.Load() != 130_000-connLogBurst {
		t.Errorf("seen %d, suppressed %d", l.seen.Load(), l.suppressed.Load())
	}
	// A second later, one more line may go out, saying how many were not.
	now = now.Add(time.Second)
	out.Reset()
	l.Printf("error when reading request headers: %s", "x")
	if !strings.Contains(out.String(), `"suppressed_so_far":129990`) {
		t.Errorf("the next line: %s", out.String())
	}
}

// net/http's ErrorLog: one line per failed TLS handshake of the rate
// limit service's HTTP listener, a burst then one a second.
func TestConnLogAsErrorLog(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	l := NewConnLog(slog.New(slog.NewJSONHandler(&out, nil)), func() time.Time { return now }, "rls http server: connection error")
	el := log.New(l, "", 0)
	for range 1000 {
		el.Printf("http: TLS handshake error from 127.0.0.1:5555: client sent an HTTP request to an HTTPS server")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != connLogBurst || l.Seen() != 1000 {
		t.Fatalf("%d lines, %d seen; want %d and 1000", len(lines), l.Seen(), connLogBurst)
	}
	if !strings.Contains(lines[0], `"msg":"rls http server: connection error","error":"http: TLS handshake error`) {
		t.Errorf("line: %s", lines[0])
	}
}
