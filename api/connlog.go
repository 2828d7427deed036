package api

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"
)

// connlog.go is where fasthttp's own messages go: connection errors, such as
// a client that closed its connection in the middle of its headers. fasthttp
// writes such a message with the raw bytes it had read (up to its whole read
// buffer), so a client opening and dropping connections in a loop could fill
// a disk with log lines (130,000 connections wrote 78 MiB in 5 s). Each line
// is cut to connLogMax bytes, at most connLogBurst lines are written at once
// and connLogRate a second after that, and every message, written or not, is
// counted (obol_http_connection_errors_total).

const (
	// connLogMax is the most bytes of one message that reach the log.
	connLogMax = 256
	// connLogRate and connLogBurst bound the lines written: a burst, then
	// one a second.
	connLogRate  = 1
	connLogBurst = 10
)

// connLogger is the fasthttp.Logger of the server. Safe for concurrent use.
type connLogger struct {
	log        *slog.Logger
	lim        *rate.Limiter
	now        func() time.Time
	seen       atomic.Uint64 // every message
	suppressed atomic.Uint64 // messages not written (over the rate)
}

var _ fasthttp.Logger = (*connLogger)(nil)

func newConnLogger(log *slog.Logger, now func() time.Time) *connLogger {
	return &connLogger{log: log, now: now, lim: rate.NewLimiter(connLogRate, connLogBurst)}
}

// register adds the counter of connection errors to reg.
func (l *connLogger) register(reg *prometheus.Registry) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "obol_http_connection_errors_total",
		Help: "Connection errors of the HTTP listeners (e.g. a client that closed its connection mid-request), logged or not.",
	}, func() float64 { return float64(l.seen.Load()) }))
}

// Printf logs one fasthttp message, cut and rate-limited.
func (l *connLogger) Printf(format string, args ...any) {
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
	l.log.Warn("http server: connection error", "error", msg, "suppressed_so_far", l.suppressed.Load())
}
