package api

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// metrics.go serves GET /metrics in the Prometheus text format, with the
// Prometheus client library: the format's reference implementation, whose
// counters and histograms are lock-free atomics and whose Go collector gives
// the runtime metrics operators already have dashboards for.
//
// Every outcome of every kind is counted, per resource:
//
//   - obol_decisions_total{resource,outcome}: rate decisions (tiers, gcra:
//     /v1/request, /v1/check, each item of /v1/batch): granted, rejected,
//     shadow (rejected by the limit, granted by shadow mode), lenient
//     (granted without a limit), peek (copies 0: nothing asked);
//   - obol_copies_operations_total{resource,op,outcome}: op reserve with
//     outcome granted (all asked), partial (at least min_copies, fewer than
//     asked), rejected, shadow, lenient or peek; op release, transfer and
//     seize with outcome ok;
//   - obol_adaptive_operations_total{resource,op,outcome}: op admit with
//     outcome admitted, rejected, shadow or lenient; op complete with
//     outcome success or backoff (as the caller reported), unknown (a
//     ticket unknown, completed already or expired: a late caller), and
//     expired (tickets the agent expired, outstanding for the timeout: read
//     from the engine at scrape time);
//
// and obol_decision_duration_seconds{resource} (decode, decide and encode
// of one rate decision, on the agent), obol_tracked_keys{resource},
// obol_holds{resource}, obol_adaptive_window{resource},
// obol_adaptive_outstanding{resource}; then obol_sessions, obol_holds_open,
// obol_transfers_staged, obol_max_keys_evicted_total,
// obol_max_keys_overflow_total,
// obol_lenient_unrecorded_total, obol_config_reloads_total{result},
// obol_key_resets_total{resource}, and the
// go_* and process_* collectors. Calls on resources with no config are
// counted under resource="unconfigured", so a client cannot grow the series
// without bound. Errors (a bad request, an unknown hold) are not outcomes
// and are not counted. A resource's series are resolved once per engine
// generation, for the families of its kind, so that the hot path does no
// label lookup.

// unconfiguredLabel is the resource label of every unconfigured resource.
const unconfiguredLabel = "unconfigured"

// latencyBuckets are the decision-duration histogram's bounds, in seconds.
var latencyBuckets = []float64{1e-6, 2.5e-6, 5e-6, 10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 10e-3}

type metrics struct {
	reg         *prometheus.Registry
	decisions   *prometheus.CounterVec
	copiesOps   *prometheus.CounterVec
	adaptiveOps *prometheus.CounterVec
	pacerOps    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	reloads     *prometheus.CounterVec
	resets      *prometheus.CounterVec
}

// adaptiveOpsDesc describes obol_adaptive_operations_total, both the
// series the API counts and the expired ones read from the engine.
var adaptiveOpsDesc = prometheus.NewDesc("obol_adaptive_operations_total", adaptiveOpsHelp, []string{"resource", "op", "outcome"}, nil)

const adaptiveOpsHelp = "Adaptive operations by resource, op and outcome (admit: admitted, rejected, shadow, lenient; complete: success, backoff, unknown, expired)."

// resMetrics are one resource's series, resolved once per engine generation
// so that the hot path does no label lookup. The series of a kind other
// than the resource's are nil (the engine refuses those calls with
// wrong_kind before anything is counted); the unconfigured label has all.
type resMetrics struct {
	// Rate decisions.
	granted, rejected, shadow, lenient, peek prometheus.Counter
	latency                                  prometheus.Observer
	// Copies: reserve by outcome, then release, transfer and seize.
	resGranted, resPartial, resRejected, resShadow, resLenient, resPeek prometheus.Counter
	released, transferred, seized                                       prometheus.Counter
	// Adaptive: admit and complete by outcome.
	admitted, admitRejected, admitShadow, admitLenient prometheus.Counter
	success, backoff, unknownTicket                    prometheus.Counter
	// Pacer: pace and observe by outcome.
	paceNow, paceWaited, paceLenient          prometheus.Counter
	observeOK, observeLimited, observeLenient prometheus.Counter
	// top holds the resource's /v1/top windows; nil for unconfigured
	// resources and kinds without domains.
	top *topSet
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_decisions_total", Help: "Rate decisions by resource and outcome (granted, rejected, shadow, lenient, peek).",
		}, []string{"resource", "outcome"}),
		copiesOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_copies_operations_total", Help: "Copy-limited operations by resource, op and outcome (reserve: granted, partial, rejected, shadow, lenient, peek; release, transfer, seize: ok).",
		}, []string{"resource", "op", "outcome"}),
		adaptiveOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_adaptive_operations_total", Help: adaptiveOpsHelp,
		}, []string{"resource", "op", "outcome"}),
		pacerOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_pacer_operations_total", Help: "Pacer operations by resource, op and outcome (pace: now, waited, lenient; observe: ok, limited (a 429), lenient).",
		}, []string{"resource", "op", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "obol_decision_duration_seconds", Help: "Time the agent spends on one decision: decoding, deciding, encoding.",
			Buckets: latencyBuckets,
		}, []string{"resource"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_config_reloads_total", Help: "Config reloads by result (ok, refused).",
		}, []string{"result"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "obol_key_resets_total", Help: "Keys reset through POST /v1/reset on this agent, by resource (peers' resets are obol_cluster_resets_applied_total).",
		}, []string{"resource"}),
	}
	m.reg.MustRegister(m.decisions, m.copiesOps, adaptiveCollector{s, m.adaptiveOps}, m.pacerOps, m.latency, m.reloads, m.resets,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		usageCollector{s})
	if s.cluster != nil {
		m.reg.MustRegister(clusterCollector{s.cluster})
	}
	return m
}

// forEngine resolves the series of every configured resource of e, and of
// the unconfigured and requested labels; tops are the resources' /v1/top windows.
func (m *metrics) forEngine(e *local.Engine, tops map[string]*topSet) map[string]*resMetrics {
	out := map[string]*resMetrics{unconfiguredLabel: m.series(unconfiguredLabel, ""), requestedLabel: m.series(requestedLabel, config.KindTiers)}
	if cfg := e.Config(); cfg != nil {
		for name, rc := range cfg.Resources {
			rm := m.series(name, rc.Kind)
			rm.top = tops[name]
			out[name] = rm
		}
	}
	return out
}

// series resolves the series of resource n of kind k ("" for all kinds).
// Every resource has the rate decisions' series, as before kinds had their
// own families.
func (m *metrics) series(n string, k config.Kind) *resMetrics {
	rm := &resMetrics{
		granted:  m.decisions.WithLabelValues(n, "granted"),
		rejected: m.decisions.WithLabelValues(n, "rejected"),
		shadow:   m.decisions.WithLabelValues(n, "shadow"),
		lenient:  m.decisions.WithLabelValues(n, "lenient"),
		peek:     m.decisions.WithLabelValues(n, "peek"),
		latency:  m.latency.WithLabelValues(n),
	}
	if k == "" || k == config.KindCopies {
		c := m.copiesOps
		rm.resGranted = c.WithLabelValues(n, "reserve", "granted")
		rm.resPartial = c.WithLabelValues(n, "reserve", "partial")
		rm.resRejected = c.WithLabelValues(n, "reserve", "rejected")
		rm.resShadow = c.WithLabelValues(n, "reserve", "shadow")
		rm.resLenient = c.WithLabelValues(n, "reserve", "lenient")
		rm.resPeek = c.WithLabelValues(n, "reserve", "peek")
		rm.released = c.WithLabelValues(n, "release", "ok")
		rm.transferred = c.WithLabelValues(n, "transfer", "ok")
		rm.seized = c.WithLabelValues(n, "seize", "ok")
	}
	if k == "" || k == config.KindAdaptive {
		a := m.adaptiveOps
		rm.admitted = a.WithLabelValues(n, "admit", "admitted")
		rm.admitRejected = a.WithLabelValues(n, "admit", "rejected")
		rm.admitShadow = a.WithLabelValues(n, "admit", "shadow")
		rm.admitLenient = a.WithLabelValues(n, "admit", "lenient")
		rm.success = a.WithLabelValues(n, "complete", "success")
		rm.backoff = a.WithLabelValues(n, "complete", "backoff")
		rm.unknownTicket = a.WithLabelValues(n, "complete", "unknown")
	}
	if k == "" || k == config.KindPacer {
		p := m.pacerOps
		rm.paceNow = p.WithLabelValues(n, "pace", "now")
		rm.paceWaited = p.WithLabelValues(n, "pace", "waited")
		rm.paceLenient = p.WithLabelValues(n, "pace", "lenient")
		rm.observeOK = p.WithLabelValues(n, "observe", "ok")
		rm.observeLimited = p.WithLabelValues(n, "observe", "limited")
		rm.observeLenient = p.WithLabelValues(n, "observe", "lenient")
	}
	return rm
}

// inc increments c, a series that may be nil (another kind's).
func inc(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}

// series returns the series of resource: its own, or the unconfigured
// label's when it has no config; nil when there are none.
func (g *generation) series(resource string) *resMetrics {
	if rm := g.metrics[resource]; rm != nil {
		return rm
	}
	return g.metrics[unconfiguredLabel]
}

// observe counts one rate decision of resource (whose series are rm, as
// named returns them) for domain (asked copies asked), decided at now by a
// handler that started at start, and its duration since start.
func (g *generation) observe(rm *resMetrics, resource string, domain []byte, asked int, d *local.Decision, now, start time.Time) {
	if rm = g.countIn(rm, resource, domain, asked, d, now); rm != nil {
		rm.latency.Observe(time.Since(start).Seconds())
	}
}

// count counts one rate decision of resource for domain, which asked for
// asked copies and was decided at now: by its outcome, in the resource's
// /v1/top windows and, sampled, in the rejection log. It returns the
// resource's series (nil when there are none), for the caller to observe
// the decision's duration: /v1/batch observes its items' at the end, the
// batch's time shared among them, and so reads the clock twice per batch
// rather than twice per item.
func (g *generation) count(resource string, domain []byte, asked int, d *local.Decision, now time.Time) *resMetrics {
	return g.countIn(g.series(resource), resource, domain, asked, d, now)
}

// countIn is count with resource's series, rm, found by the caller.
func (g *generation) countIn(rm *resMetrics, resource string, domain []byte, asked int, d *local.Decision, now time.Time) *resMetrics {
	if rm == nil {
		return nil
	}
	if asked == 0 {
		rm.peek.Inc()
		return rm
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
	limited := d.Shadow || d.Granted == 0
	if rm.top != nil {
		rm.top.record(now, domain, limited)
	}
	if limited && g.rejections != nil {
		g.rejections.rate(resource, domain, d)
	}
	return rm
}

// countReserve counts one reserve of resource for domain that asked for
// asked copies, and records it in /v1/top and the rejection log.
func (g *generation) countReserve(resource string, domain []byte, asked int, r *local.Reservation, now time.Time) {
	rm := g.series(resource)
	if rm == nil {
		return
	}
	if asked == 0 {
		inc(rm.resPeek)
		return
	}
	switch {
	case r.Shadow:
		inc(rm.resShadow)
	case r.Lenient:
		inc(rm.resLenient)
	case r.Granted >= asked:
		inc(rm.resGranted)
	case r.Granted > 0:
		inc(rm.resPartial)
	default:
		inc(rm.resRejected)
	}
	limited := r.Shadow || r.Granted == 0
	if rm.top != nil {
		rm.top.record(now, domain, limited)
	}
	if limited && g.rejections != nil {
		g.rejections.reserve(resource, domain, r.Shadow)
	}
}

// holdOp is an operation on a hold or transfer, for countHoldOp.
type holdOp uint8

const (
	opRelease holdOp = iota
	opTransfer
	opSeize
)

// countHoldOp counts a release, transfer or seize of a hold of resource.
func (g *generation) countHoldOp(resource string, op holdOp) {
	rm := g.series(resource)
	if rm == nil {
		return
	}
	switch op {
	case opRelease:
		inc(rm.released)
	case opTransfer:
		inc(rm.transferred)
	case opSeize:
		inc(rm.seized)
	}
}

// countAdmit counts one admit of resource.
func (g *generation) countAdmit(resource string, a *local.Admission) {
	rm := g.series(resource)
	if rm == nil {
		return
	}
	switch {
	case a.Shadow:
		inc(rm.admitShadow)
	case a.Lenient:
		inc(rm.admitLenient)
	case a.Admitted:
		inc(rm.admitted)
	default:
		inc(rm.admitRejected)
	}
	if (a.Shadow || !a.Admitted) && g.rejections != nil {
		g.rejections.admit(resource, a)
	}
}

// countComplete counts one complete of ticket: by the outcome reported,
// or as unknown when the engine did not know the ticket (err). The
// resource is the ticket's (the part before its last '#').
func (g *generation) countComplete(ticket []byte, o adaptive.Outcome, err error) {
	resource := ticket
	if i := bytes.LastIndexByte(ticket, '#'); i >= 0 {
		resource = ticket[:i]
	}
	rm := g.series(string(resource))
	if rm == nil {
		return
	}
	switch {
	case err != nil:
		inc(rm.unknownTicket)
	case o == adaptive.Backoff:
		inc(rm.backoff)
	default:
		inc(rm.success)
	}
}

// countPace counts one /v1/pace of resource, answered p.
func (g *generation) countPace(resource string, p *local.Pacing) {
	rm := g.series(resource)
	if rm == nil {
		return
	}
	switch {
	case p.Lenient:
		inc(rm.paceLenient)
	case p.Wait > 0:
		inc(rm.paceWaited)
	default:
		inc(rm.paceNow)
	}
}

// countObserve counts one /v1/observe of resource, of a reply of status,
// answered p.
func (g *generation) countObserve(resource string, status int, p *local.Pacing) {
	rm := g.series(resource)
	if rm == nil {
		return
	}
	switch {
	case p.Lenient:
		inc(rm.observeLenient)
	case status == fasthttp.StatusTooManyRequests:
		inc(rm.observeLimited)
	default:
		inc(rm.observeOK)
	}
}

// adaptiveCollector collects obol_adaptive_operations_total: the series
// the API counts, and the expired tickets of every adaptive resource, read
// from the engine at scrape time (the engine expires them, no call does).
type adaptiveCollector struct {
	s   *Server
	vec *prometheus.CounterVec
}

func (c adaptiveCollector) Describe(ch chan<- *prometheus.Desc) { c.vec.Describe(ch) }

func (c adaptiveCollector) Collect(ch chan<- prometheus.Metric) {
	c.vec.Collect(ch)
	e := c.s.Engine()
	for _, u := range e.Usage() {
		if u.Kind != config.KindAdaptive {
			continue
		}
		if st, ok := e.AdaptiveState(u.Resource); ok {
			ch <- prometheus.MustNewConstMetric(adaptiveOpsDesc, prometheus.CounterValue, float64(st.Expired), u.Resource, "complete", "expired")
		}
	}
}

// usageCollector reads the engine's gauges at scrape time.
type usageCollector struct{ s *Server }

var (
	keysDesc      = prometheus.NewDesc("obol_tracked_keys", "Keys (domains) a rate-limited resource tracks now.", []string{"resource"}, nil)
	holdsDesc     = prometheus.NewDesc("obol_holds", "Copies held or staged of a copy-limited resource.", []string{"resource"}, nil)
	sessionsDesc  = prometheus.NewDesc("obol_sessions", "Open sessions.", nil, nil)
	holdsOpenDesc = prometheus.NewDesc("obol_holds_open", "Holds (reservations) open.", nil, nil)
	transfersDesc = prometheus.NewDesc("obol_transfers_staged", "Transfers staged and not yet seized.", nil, nil)
	ticketsDesc   = prometheus.NewDesc("obol_settle_tickets", "Settle tickets held (POST /v1/request with settle) not settled yet.", nil, nil)
	evictedDesc   = prometheus.NewDesc("obol_max_keys_evicted_total", "Idle keys dropped to make room for a new key at a resource's max_keys.", nil, nil)
	overflowDesc  = prometheus.NewDesc("obol_max_keys_overflow_total", "Decisions and peers' counts of new keys that found no room at max_keys, decided on a shared overflow state (still limited, maybe over-counted).", nil, nil)
	unrecDesc     = prometheus.NewDesc("obol_lenient_unrecorded_total", "Grants to unconfigured resources past the number the agent records.", nil, nil)
	windowDesc    = prometheus.NewDesc("obol_adaptive_window", "An adaptive resource's window: the calls it admits at once (as of its last admit, complete or sweep).", []string{"resource"}, nil)
	outstandDesc  = prometheus.NewDesc("obol_adaptive_outstanding", "An adaptive resource's calls admitted and not yet completed.", []string{"resource"}, nil)
	paceWaitDesc  = prometheus.NewDesc("obol_pacer_wait_seconds", "How long a call a pacer resource paced now would wait (without jitter).", []string{"resource"}, nil)
	paceRateDesc  = prometheus.NewDesc("obol_pacer_rate_per_second", "The rate a pacer resource spaces calls at; absent while it does not space them.", []string{"resource"}, nil)
	paceRemDesc   = prometheus.NewDesc("obol_pacer_remaining", "The last remaining count a pacer resource saw (a 429 counts as 0); absent before the first.", []string{"resource"}, nil)
	reqLimitsDesc = prometheus.NewDesc("obol_request_limits", "Limits set by requests a namespace keeps (its cap: max_request_limits).", []string{"namespace"}, nil)
	reqKeysDesc   = prometheus.NewDesc("obol_request_limit_keys", "Keys the limits set by requests of a namespace track together (its cap: max_request_keys).", []string{"namespace"}, nil)
)

func (c usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{keysDesc, holdsDesc, sessionsDesc, holdsOpenDesc, transfersDesc, ticketsDesc, evictedDesc, overflowDesc, unrecDesc, windowDesc, outstandDesc, paceWaitDesc, paceRateDesc, paceRemDesc, reqLimitsDesc, reqKeysDesc} {
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
		case "pacer":
			if p, ok := e.PacerStatus(c.s.now(), u.Resource); ok {
				ch <- prometheus.MustNewConstMetric(paceWaitDesc, prometheus.GaugeValue, p.Wait.Seconds(), u.Resource)
				if !math.IsInf(p.Rate, 0) && !math.IsNaN(p.Rate) {
					ch <- prometheus.MustNewConstMetric(paceRateDesc, prometheus.GaugeValue, p.Rate, u.Resource)
				}
				if p.Remaining >= 0 {
					ch <- prometheus.MustNewConstMetric(paceRemDesc, prometheus.GaugeValue, float64(p.Remaining), u.Resource)
				}
			}
		}
	}
	for _, u := range e.RequestLimitUsage() {
		ch <- prometheus.MustNewConstMetric(reqLimitsDesc, prometheus.GaugeValue, float64(u.Definitions), u.Namespace)
		ch <- prometheus.MustNewConstMetric(reqKeysDesc, prometheus.GaugeValue, float64(u.Keys), u.Namespace)
	}
	sessions, holds, transfers := e.Sessions()
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(sessions))
	ch <- prometheus.MustNewConstMetric(holdsOpenDesc, prometheus.GaugeValue, float64(holds))
	ch <- prometheus.MustNewConstMetric(transfersDesc, prometheus.GaugeValue, float64(transfers))
	ch <- prometheus.MustNewConstMetric(ticketsDesc, prometheus.GaugeValue, float64(e.Tickets()))
	st := e.Stats()
	ch <- prometheus.MustNewConstMetric(evictedDesc, prometheus.CounterValue, float64(st.Evicted.Load()))
	ch <- prometheus.MustNewConstMetric(overflowDesc, prometheus.CounterValue, float64(st.Overflowed.Load()))
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

// rejectionLog writes one slog line per rejection, sampled: each rejection
// (or shadow grant, which the limit would have rejected) is logged with
// probability p (Options.LogRejections), independently. Safe for concurrent
// use.
type rejectionLog struct {
	log *slog.Logger
	// all is p = 1; otherwise a rejection is logged when a uniform random
	// uint64 is below threshold = p·2⁶⁴.
	all       bool
	threshold uint64
}

// newRejectionLog returns the log of rejections at rate p, nil when p is 0
// (off). p must be in [0, 1] (Options.Validate).
func newRejectionLog(log *slog.Logger, p float64) *rejectionLog {
	if !(p > 0) {
		return nil
	}
	if p >= 1 {
		return &rejectionLog{log: log, all: true}
	}
	return &rejectionLog{log: log, threshold: uint64(p * (1 << 64))}
}

func (l *rejectionLog) sample() bool { return l.all || rand.Uint64() < l.threshold }

// rate logs a rejected (or shadow) rate decision, when sampled.
func (l *rejectionLog) rate(resource string, domain []byte, d *local.Decision) {
	if !l.sample() {
		return
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "rejected",
		slog.String("resource", shownName(resource)), slog.String("domain", string(domain)), slog.String("kind", string(d.Kind)),
		slog.Int64("retry_after_ms", retryMs(d.RetryAfter)), slog.Bool("shadow", d.Shadow))
}

// reserve logs a rejected (or shadow) reserve, when sampled; a reserve has
// no retry time.
func (l *rejectionLog) reserve(resource string, domain []byte, shadow bool) {
	if !l.sample() {
		return
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "rejected",
		slog.String("resource", resource), slog.String("domain", string(domain)), slog.String("kind", string(config.KindCopies)),
		slog.Bool("shadow", shadow))
}

// admit logs a rejected (or shadow) admit, when sampled; an admit has no
// domain and no retry time, but a window.
func (l *rejectionLog) admit(resource string, a *local.Admission) {
	if !l.sample() {
		return
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "rejected",
		slog.String("resource", resource), slog.String("kind", string(config.KindAdaptive)),
		slog.Int("window", a.Window), slog.Bool("shadow", a.Shadow))
}
