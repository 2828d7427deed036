package api

import (
	"bytes"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/local"
)

// metrics.go serves GET /metrics in the Prometheus text format, with the
// Prometheus client library: the format's reference implementation, whose
// counters and histograms are lock-free atomics and whose Go collector gives
// the runtime metrics operators already have dashboards for.
//
// Per resource: obol_decisions_total{resource,outcome} (granted, rejected,
// shadow, lenient), obol_decision_duration_seconds{resource} (decode, decide
// and encode of one decision, on the agent), obol_tracked_keys{resource},
// obol_holds{resource}; then obol_sessions, obol_holds_open,
// obol_transfers_staged, obol_lenient_max_keys_total,
// obol_lenient_unrecorded_total, obol_config_reloads_total{result}, and the
// go_* and process_* collectors. Requests for resources with no config are
// counted under resource="unconfigured", so a client cannot grow the series
// without bound.

// unconfiguredLabel is the resource label of every unconfigured resource.
const unconfiguredLabel = "unconfigured"

// latencyBuckets are the decision-duration histogram's bounds, in seconds.
var latencyBuckets = []float64{1e-6, 2.5e-6, 5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 10e-3}

type metrics struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	reloads   *prometheus.CounterVec
}

// resMetrics are one resource's series, resolved once per engine generation
// so that the hot path does no label lookup.
type resMetrics struct {
	granted, rejected, shadow, lenient prometheus.Counter
	latency                            prometheus.Observer
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_decisions_total", Help: "Decisions by resource and outcome (granted, rejected, shadow, lenient).",
		}, []string{"resource", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "obol_decision_duration_seconds", Help: "Time the agent spends on one decision: decoding, deciding, encoding.",
			Buckets: latencyBuckets,
		}, []string{"resource"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_config_reloads_total", Help: "Config reloads by result (ok, refused).",
		}, []string{"result"}),
	}
	m.reg.MustRegister(m.decisions, m.latency, m.reloads,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		usageCollector{s})
	if s.cluster != nil {
		m.reg.MustRegister(clusterCollector{s.cluster})
	}
	return m
}

// forEngine resolves the series of every configured resource of e.
func (m *metrics) forEngine(e *local.Engine) map[string]*resMetrics {
	out := map[string]*resMetrics{}
	names := []string{unconfiguredLabel}
	if cfg := e.Config(); cfg != nil {
		for name := range cfg.Resources {
			names = append(names, name)
		}
	}
	for _, n := range names {
		out[n] = &resMetrics{
			granted:  m.decisions.WithLabelValues(n, "granted"),
			rejected: m.decisions.WithLabelValues(n, "rejected"),
			shadow:   m.decisions.WithLabelValues(n, "shadow"),
			lenient:  m.decisions.WithLabelValues(n, "lenient"),
			latency:  m.latency.WithLabelValues(n),
		}
	}
	return out
}

// observe counts one rate decision of resource and its duration since start.
func (g *generation) observe(resource string, d *local.Decision, start time.Time) {
	if rm := g.count(resource, d); rm != nil {
		rm.latency.Observe(time.Since(start).Seconds())
	}
}

// count counts one rate decision of resource by its outcome and returns the
// resource's series (nil when there are none), for the caller to observe
// the decision's duration: /v1/batch observes its items' at the end, the
// batch's time shared among them, and so reads the clock twice per batch
// rather than twice per item.
func (g *generation) count(resource string, d *local.Decision) *resMetrics {
	rm := g.metrics[resource]
	if rm == nil {
		rm = g.metrics[unconfiguredLabel]
		if rm == nil {
			return nil
		}
	}
	switch {
	case d.Shadow:
		rm.shadow.Inc()
	case d.Lenient:
		rm.lenient.Inc()
	case d.Granted > 0:
		rm.granted.Inc()
	default:
		rm.rejected.Inc()
	}
	return rm
}

// usageCollector reads the engine's gauges at scrape time.
type usageCollector struct{ s *Server }

var (
	keysDesc      = prometheus.NewDesc("obol_tracked_keys", "Keys (domains) a rate-limited resource tracks now.", []string{"resource"}, nil)
	holdsDesc     = prometheus.NewDesc("obol_holds", "Copies held or staged of a copy-limited resource.", []string{"resource"}, nil)
	sessionsDesc  = prometheus.NewDesc("obol_sessions", "Open sessions.", nil, nil)
	holdsOpenDesc = prometheus.NewDesc("obol_holds_open", "Holds (reservations) open.", nil, nil)
	transfersDesc = prometheus.NewDesc("obol_transfers_staged", "Transfers staged and not yet seized.", nil, nil)
	fullDesc      = prometheus.NewDesc("obol_lenient_max_keys_total", "Grants made leniently because a resource tracked max_keys keys.", nil, nil)
	unrecDesc     = prometheus.NewDesc("obol_lenient_unrecorded_total", "Grants to unconfigured resources past the number the agent records.", nil, nil)
	windowDesc    = prometheus.NewDesc("obol_adaptive_window", "An adaptive resource's window: the calls it admits at once (as of its last admit, complete or sweep).", []string{"resource"}, nil)
	outstandDesc  = prometheus.NewDesc("obol_adaptive_outstanding", "An adaptive resource's calls admitted and not yet completed.", []string{"resource"}, nil)
)

func (c usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{keysDesc, holdsDesc, sessionsDesc, holdsOpenDesc, transfersDesc, fullDesc, unrecDesc, windowDesc, outstandDesc} {
		ch <- d
	}
}

func (c usageCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.s.Engine()
	for _, u := range e.Usage() {
		switch u.Kind {
		case "copies":
			ch <- prometheus.MustNewConstMetric(holdsDesc, prometheus.GaugeValue, float64(u.Holds), u.Resource)
		case "tiers", "gcra":
			ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(u.Keys), u.Resource)
		case "adaptive":
			if w, out, ok := e.AdaptiveWindow(u.Resource); ok {
				ch <- prometheus.MustNewConstMetric(windowDesc, prometheus.GaugeValue, float64(w), u.Resource)
				ch <- prometheus.MustNewConstMetric(outstandDesc, prometheus.GaugeValue, float64(out), u.Resource)
			}
		}
	}
	sessions, holds, transfers := e.Sessions()
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(sessions))
	ch <- prometheus.MustNewConstMetric(holdsOpenDesc, prometheus.GaugeValue, float64(holds))
	ch <- prometheus.MustNewConstMetric(transfersDesc, prometheus.GaugeValue, float64(transfers))
	st := e.Stats()
	ch <- prometheus.MustNewConstMetric(fullDesc, prometheus.CounterValue, float64(st.LenientFull.Load()))
	ch <- prometheus.MustNewConstMetric(unrecDesc, prometheus.CounterValue, float64(st.LenientUnrecorded.Load()))
}

// GET /metrics → the Prometheus text format.
func (s *Server) metricsPage(ctx *fasthttp.RequestCtx, _ params) {
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		s.fail(ctx, err)
		return
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			s.fail(ctx, err)
			return
		}
	}
	ctx.SetContentType(string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	ctx.SetBody(buf.Bytes())
}
