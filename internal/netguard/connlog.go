package netguard

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"
)

// connlog.go is where an HTTP server's own messages go (fasthttp's Logger,
// net/http's ErrorLog): connection errors, such as
// a client that closed its connection in the middle of its headers. fasthttp
// writes such a message with the raw bytes it had read (up to its whole read
// buffer), so a client opening and dropping connections in a loop could fill
// a disk with log lines (130,000 connections wrote 78 MiB in 5 s). Each line
// is cut to connLogMax bytes, at most connLogBurst lines are written at once
// and connLogRate a second after that, and every message, written or not, is
// counted (Seen; the API exports it as obol_http_connection_errors_total).
// The rate limit service's HTTP server (net/http) wrote one line per failed
// TLS handshake the same way: 153,000 lines (17.6 MB) in 20 s of plain
// HTTP sent to its TLS port.

const (
	// connLogMax is the most bytes of one message that reach the log.
	connLogMax = 256
	// connLogRate and connLogBurst bound the lines written: a burst, then
	// one a second.
	connLogRate  = 1
	connLogBurst = 10
)

// ConnLog is an HTTP server's log of connection errors: a fasthttp.Logger,
// and an io.Writer for net/http's ErrorLog (log.New(c, "", 0)). Safe for
// concurrent use.
type ConnLog struct {
	log        *slog.Logger
	msg        string // the line's message
	lim        *rate.Limiter
	now        func() time.Time
	seen       atomic.Uint64 // every message
	suppressed atomic.Uint64 // messages not written (over the rate)
}

var _ fasthttp.Logger = (*ConnLog)(nil)

// NewConnLog returns a ConnLog writing to log, reading the time from now,
// its lines' message msg (e.g. "http server: connection error").
func NewConnLog(log *slog.Logger, now func() time.Time, msg string) *ConnLog {
	return &ConnLog{log: log, msg: msg, now: now, lim: rate.NewLimiter(connLogRate, connLogBurst)}
}

// Seen returns how many messages came, logged or not.
func (l *ConnLog) Seen() uint64 { return l.seen.Load() }

// Write logs p, one message of net/http's ErrorLog.
func (l *ConnLog) Write(p []byte) (int, error) {
	l.Printf("%s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// Printf logs one message, cut and rate-limited.
func (l *ConnLog) Printf(format string, args ...any) {
	l.seen.Add(1)
	if !l.lim.AllowN(l.now(), 1) {
		l.suppressed.Add(1)
		return
	}
	msg := fmt.Sprintf(format, args...)
	if len(msg) > connLogMax {
		cut := connLogMax
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = fmt.Sprintf("%s… (%d bytes cut)", msg[:cut], len(msg)-cut)
	}
	// "error", not "msg": the JSON handler writes the line's own message
	// under "msg", and a second "msg" made the line ambiguous.
	l.log.Warn(l.msg, "error", msg, "suppressed_so_far", l.suppressed.Load())
}
