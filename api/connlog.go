package api

import (
	"github.com/obol-dev/obol/internal/netguard"
	"github.com/prometheus/client_golang/prometheus"
)

// connlog.go: fasthttp's own messages (connection errors) go to a
// netguard.ConnLog, cut, rate-limited and counted; the count is exported
// as obol_http_connection_errors_total.

// registerConnLog adds the counter of l's connection errors to reg.
func registerConnLog(l *netguard.ConnLog, reg *prometheus.Registry) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "obol_http_connection_errors_total",
		Help: "Connection errors of the HTTP listeners (e.g. a client that closed its connection mid-request), logged or not.",
	}, func() float64 { return float64(l.Seen()) }))
}
