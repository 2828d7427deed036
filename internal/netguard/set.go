package netguard

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// set.go: an agent's guarded listeners and their metrics.

// Set is an agent's guarded listeners, a prometheus.Collector of their
// figures:
//
//   - obol_listener_connections{listener}: connections open now;
//   - obol_listener_max_connections{listener}: the cap;
//   - obol_listener_refused_connections_total{listener}: connections
//     closed at once for being over the cap;
//   - obol_listener_accept_errors_total{listener}: temporary Accept errors
//     waited out (EMFILE and the like).
//
// Its methods are safe for concurrent use.
type Set struct {
	log *slog.Logger
	// Hook, when set, wraps each listener before it is guarded: a seam
	// for tests that make Accept fail.
	Hook func(name string, ln net.Listener) net.Listener

	mu sync.Mutex
	ls []*Listener
}

// NewSet returns an empty set logging to log (nil: slog.Default()).
func NewSet(log *slog.Logger) *Set {
	if log == nil {
		log = slog.Default()
	}
	return &Set{log: log}
}

// Guard returns ln guarded with a cap of max open connections (0 or less:
// DefaultMaxConns()), of which one client off loopback may hold a quarter
// on a TCP listener (PerSourceOf), named name in the logs and metrics
// (socket, http, status, rls_grpc…). A nil set guards with no metrics.
func (s *Set) Guard(name string, ln net.Listener, max int) *Listener {
	if max <= 0 {
		max = DefaultMaxConnsOf(ln)
	}
	log := slog.Default()
	if s != nil {
		log = s.log
		if s.Hook != nil {
			ln = s.Hook(name, ln)
		}
	}
	l := &Listener{Listener: ln, name: name, max: int64(max), log: log, now: time.Now,
		sleep: sleepOrDone, closed: make(chan struct{})}
	if _, ok := ln.Addr().(*net.TCPAddr); ok {
		l.perSource = PerSourceOf(max)
	}
	if s != nil {
		s.mu.Lock()
		s.ls = append(s.ls, l)
		s.mu.Unlock()
	}
	return l
}

// Listeners returns the set's listeners that are not closed, in the order
// they were guarded; nil for a nil set.
func (s *Set) Listeners() []*Listener {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Listener
	for _, l := range s.ls {
		if !l.Closed() {
			out = append(out, l)
		}
	}
	return out
}

var (
	descOpen    = prometheus.NewDesc("obol_listener_connections", "Connections open now, per listener.", []string{"listener"}, nil)
	descMax     = prometheus.NewDesc("obol_listener_max_connections", "The cap on a listener's open connections.", []string{"listener"}, nil)
	descRefused = prometheus.NewDesc("obol_listener_refused_connections_total", "Connections closed at once for being over the listener's cap.", []string{"listener"}, nil)
	descPaced   = prometheus.NewDesc("obol_listener_paced_accepts_total", "Accepts that waited 1 ms because 64 of the listener's connections were fresh (accepted, their first request not answered yet) or for a fresh connection closed unanswered: a flood of new connections.", []string{"listener"}, nil)
	descErrs    = prometheus.NewDesc("obol_listener_accept_errors_total", "Temporary accept errors (EMFILE, ENFILE, ECONNABORTED…) the listener waited out.", []string{"listener"}, nil)
)

// Describe implements prometheus.Collector.
func (s *Set) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOpen
	ch <- descMax
	ch <- descRefused
	ch <- descPaced
	ch <- descErrs
}

// Collect implements prometheus.Collector. Two listeners of one name (a
// restart of a server) report their sum.
func (s *Set) Collect(ch chan<- prometheus.Metric) {
	type fig struct{ open, max, refused, paced, errs float64 }
	s.mu.Lock()
	figs := map[string]*fig{}
	var names []string
	for _, l := range s.ls {
		f := figs[l.name]
		if f == nil {
			f = &fig{}
			figs[l.name] = f
			names = append(names, l.name)
		}
		f.open += float64(l.Open())
		f.max = float64(l.max)
		f.refused += float64(l.Refused())
		f.paced += float64(l.Paced())
		f.errs += float64(l.AcceptErrors())
	}
	s.mu.Unlock()
	for _, n := range names {
		f := figs[n]
		ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, f.open, n)
		ch <- prometheus.MustNewConstMetric(descMax, prometheus.GaugeValue, f.max, n)
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, f.refused, n)
		ch <- prometheus.MustNewConstMetric(descPaced, prometheus.CounterValue, f.paced, n)
		ch <- prometheus.MustNewConstMetric(descErrs, prometheus.CounterValue, f.errs, n)
	}
}
