package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	timebase "github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/netguard"
	"github.com/obol-dev/obol/local"
)

// Options configure a Server. The zero value is ready to use.
type Options struct {
	// Now is the clock whose reading handlers pass to the engine as the
	// decision instant; nil means time.Now.
	Now func() time.Time
	// Logger receives internal errors (with their request id) and listener
	// events, never one line per request (but the rejections LogRejections
	// asks for); nil means slog.Default().
	Logger *slog.Logger
	// NodeName is this node's name in /v1/peers; "" means the hostname.
	NodeName string
	// LoadConfig re-reads the config for a reload (POST /v1/config/reload,
	// and Reload) and names its source; nil means the agent runs on a config
	// that cannot be re-read, and a reload answers so.
	LoadConfig func() (cfg *config.Config, source string, err error)
	// Cluster shows the mesh in /v1/peers, /v1/state and /metrics; nil
	// means the node runs alone.
	Cluster ClusterView
	// Collectors are more metrics /metrics serves (the Envoy rate limit
	// service's).
	Collectors []prometheus.Collector
	// AuthToken, when set, must be sent as `Authorization: Bearer <token>`
	// on every request through a listener that is not loopback (and, with
	// AuthEverywhere, through every listener), except GET /healthz and
	// /readyz; a request without it is 401 unauthorized.
	AuthToken      []byte
	AuthEverywhere bool
	// Base is the agent's time base when Now is nil: decisions run on it, so
	// that a step of the system clock does not move them (see package internal/clock, Monotonic).
	// nil: a fresh one.
	Base *timebase.Monotonic
	// SimulateTimeLimit bounds the processor time one simulation (POST
	// /v1/simulate or /v1/simulate/cluster) may use, and fifteen times it
	// the time it may take on the clock; 0 means DefaultSimulateTimeLimit.
	// A simulation past either is stopped and answered 413 too_large.
	SimulateTimeLimit time.Duration
	// SimulateInChild runs each simulation in a child process: the
	// program's own executable, started with SimulationChildEnv set, at
	// the lowest priority and with a heap of its own, so that what a
	// simulation allocates is not collected beside the decisions. The
	// program's main must serve it (SimulationChild,
	// ServeSimulationChild). When no child can start, simulations run in
	// the server, as without it (logged once).
	SimulateInChild bool
	// ClusterSimulator runs POST /v1/simulate/cluster's simulations and
	// the sweep's (the agent passes sim/cluster's Endpoint); nil means both
	// answer 404 not_found, and so does the sweep when it is not also a
	// ClusterEstimator.
	ClusterSimulator ClusterSimulator
	// CheckDomainHeader names a request header that GET /v1/check takes
	// the domain from when the request gives neither the query parameter
	// domain nor the header Obol-Domain (which win, in that order): the
	// header's first comma-separated element, trimmed of spaces and tabs,
	// as in X-Forwarded-For, whose first element is the client's address.
	// "" (the default) means no such header.
	CheckDomainHeader string
	// Version and Revision name the agent's build in GET /v1/status: its
	// release and its VCS revision; "" is shown as "unknown".
	Version, Revision string
	// Started is when the agent started, for GET /v1/status's uptime; the
	// zero value means when New was called.
	Started time.Time
	// ConfigSource names where the first config came from (a file's path,
	// or "built-in default"), for GET /v1/status; a reload names its own.
	ConfigSource string
	// LogRejections is the fraction, in [0, 1], of rejections (and shadow
	// grants) logged at level Info as "rejected", with the resource, the
	// domain (not for adaptive), the kind, shadow, and retry_after_ms (rate
	// decisions) or window (adaptive); each is drawn at random. 0 (the
	// zero value) logs none, 1 every one.
	LogRejections float64
}

// Validate returns the problem of o, naming the field, its value and what
// is expected; nil when o is valid. New panics on options that are not.
func (o Options) Validate() error {
	if !(o.LogRejections >= 0 && o.LogRejections <= 1) { // NaN too
		return fmt.Errorf("api: LogRejections: must be a fraction in [0, 1], got %v", o.LogRejections)
	}
	return nil
}

// Server serves the agent's HTTP API (docs/api.md) over an engine. The engine sits
// behind an atomic pointer so that a config reload can swap it while requests
// are served. Create one with New (the zero value is not usable); it is safe
// for concurrent use.
type Server struct {
	gen    atomic.Pointer[generation]
	now    func() time.Time
	log    *slog.Logger
	name   string
	router *router
	status *router // the status listener's: statusRoutes

	ready    atomic.Bool
	onReady  func(bool)             // nil, or called after each SetReady: tests wait on it
	address  atomic.Pointer[string] // the listen address shown in /v1/peers
	versions atomic.Int64

	idPrefix string
	reqSeq   atomic.Uint64

	metrics        *metrics
	realClock      bool                // now is base.Now: a handler's own time.Now reading gives the decision instant
	base           *timebase.Monotonic // the time base when realClock
	load           func() (*config.Config, string, error)
	reload         sync.Mutex // one reload at a time
	cluster        ClusterView
	sim            simGuard         // bounds POST /v1/simulate (simulate.go)
	clusterSim     ClusterSimulator // runs POST /v1/simulate/cluster (simcluster.go) and its sweep (simsweep.go); nil: none
	authToken      []byte           // auth.go
	authEverywhere bool
	connLog        *netguard.ConnLog // fasthttp's messages, cut and rate-limited (connlog.go)
	// domainHeader is Options.CheckDomainHeader.
	domainHeader string
	tops         topSets       // the /v1/top windows of the resources in force
	rejected     *rejectionLog // nil when rejections are not logged
	limits       limitCache    // the canonical texts of limits set by requests (limits.go)

	// GET /v1/status (agentstatus.go): the build, the start, where the
	// config in force came from, and the listeners Serve serves.
	version, revision string
	started           time.Time
	source            atomic.Pointer[string]
	listeners         atomic.Pointer[Listeners]
}

// generation is one engine in force and what is derived from it once.
type generation struct {
	engine  *local.Engine
	version int64
	// names interns the configured resource names, so that a request for a
	// configured resource passes the engine a string without allocating
	// one, and finds its series in the same lookup.
	names map[string]named
	// metrics are the per-resource series of this engine's resources;
	// unconfigured is metrics[unconfiguredLabel].
	metrics      map[string]*resMetrics
	unconfigured *resMetrics
	// policies are the RateLimit-Policy fields of its rate resources.
	policies policyTable
	// rejections logs rejections, sampled; nil when off.
	rejections *rejectionLog
}

// named is a configured resource's name and its series.
type named struct {
	name string
	rm   *resMetrics
}

// name returns b as a string, interned when it names a configured resource.
func (g *generation) name(b []byte) string {
	if n, ok := g.names[string(b)]; ok {
		return n.name
	}
	return string(b)
}

// named returns b as a string, as name does, and its series, as series
// does, in one lookup.
func (g *generation) named(b []byte) (string, *resMetrics) {
	if n, ok := g.names[string(b)]; ok {
		return n.name, n.rm
	}
	return string(b), g.unconfigured
}

// New returns a Server over engine e. It is not ready (GET /readyz answers
// 503) until SetReady(true), which Serve calls once its listeners are up.
// It panics when opts do not Validate.
func New(e *local.Engine, opts Options) *Server {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	s := &Server{
		now:     opts.Now,
		log:     opts.Logger,
		name:    opts.NodeName,
		router:  newRouter(routes),
		status:  newRouter(statusRoutes),
		load:    opts.LoadConfig,
		cluster: opts.Cluster,

		domainHeader: opts.CheckDomainHeader,
		version:      opts.Version,
		revision:     opts.Revision,
		started:      opts.Started,
	}
	if s.started.IsZero() {
		s.started = time.Now()
	}
	source := opts.ConfigSource
	s.source.Store(&source)
	s.metrics = newMetrics(s)
	s.metrics.reg.MustRegister(opts.Collectors...)
	s.authToken, s.authEverywhere = append([]byte(nil), opts.AuthToken...), opts.AuthEverywhere
	s.clusterSim = opts.ClusterSimulator
	s.sim.limit = opts.SimulateTimeLimit
	if s.sim.limit <= 0 {
		s.sim.limit = DefaultSimulateTimeLimit
	}
	if s.now == nil {
		s.base = opts.Base
		if s.base == nil {
			s.base = timebase.NewMonotonic()
		}
		s.now, s.realClock = s.base.Now, true
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.sim.child.log = netguard.NewConnLog(s.log, time.Now, "simulation child failed")
	if opts.SimulateInChild {
		if exe, err := childExe(); err == nil {
			s.sim.child.exe = exe
		} else {
			s.childFailedToStart(err)
		}
	}
	s.connLog = netguard.NewConnLog(s.log, time.Now, "http server: connection error")
	registerConnLog(s.connLog, s.metrics.reg)
	if s.name == "" {
		s.name, _ = os.Hostname()
	}
	s.rejected = newRejectionLog(s.log, opts.LogRejections)
	var id [4]byte
	_, _ = rand.Read(id[:])
	s.idPrefix = hex.EncodeToString(id[:])
	empty := ""
	s.address.Store(&empty)
	s.SetEngine(e)
	return s
}

// Engine returns the engine in force.
func (s *Server) Engine() *local.Engine { return s.gen.Load().engine }

// SetEngine puts e in force for the requests that start from now on and
// bumps the config version shown by GET /v1/config (the first engine is
// version 1). The /v1/top windows of the resources e keeps, with their
// kind, carry over.
func (s *Server) SetEngine(e *local.Engine) {
	g := &generation{engine: e, version: s.versions.Add(1), names: map[string]named{},
		metrics:  s.metrics.forEngine(e, s.tops.forConfig(e.Config(), s.now())),
		policies: newPolicyTable(e.Config()), rejections: s.rejected}
	g.unconfigured = g.metrics[unconfiguredLabel]
	if cfg := e.Config(); cfg != nil {
		for name := range cfg.Resources {
			g.names[name] = named{name, g.series(name)}
		}
	}
	s.gen.Store(g)
}

// decisionTime returns the decision instant of a request whose handler
// read time.Now() at start: on the agent's time base, start's place on it
// (one clock reading less per request, and clock readings are not cheap on
// virtual machines), else the injected clock's reading.
func (s *Server) decisionTime(start time.Time) time.Time {
	if s.realClock {
		return s.base.At(start)
	}
	return s.now()
}

// handlerStart returns when fasthttp called ctx's handler: its reading
// of time.Now(), which carries the monotonic reading decisionTime places on
// the time base (one clock reading less per request); time.Now() for a ctx
// no server served (a test calling Handler).
func handlerStart(ctx *fasthttp.RequestCtx) time.Time {
	if t := ctx.Time(); !t.IsZero() {
		return t
	}
	return time.Now()
}

// SetReady sets what GET /readyz reports: 200 when ready, else 503 not_ready.
func (s *Server) SetReady(ready bool) {
	s.ready.Store(ready)
	if s.onReady != nil {
		s.onReady(ready)
	}
}

// Ready reports what GET /readyz reports.
func (s *Server) Ready() bool { return s.ready.Load() }

// Handler serves one request: it is the fasthttp.RequestHandler of the API.
// A panic in a handler is logged and answered 500 internal; the server keeps
// serving.
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	defer s.recoverPanic(ctx)
	authed := s.needsAuth(ctx)
	if authed && !s.authorized(ctx) {
		refuseUnauthorized(ctx)
		return
	}
	if !allowedCaller(ctx, authed) { // origin.go: Host, Origin, Sec-Fetch-Site
		return
	}
	if ctx.Request.Header.ContentLength() == -1 && smuggled(ctx.Request.Header.RawHeaders()) {
		// Both framings: a proxy in front may have read the body by the
		// other one, and the rest of this connection may not be what it
		// sent. Refuse, and close the connection.
		ctx.SetConnectionClose()
		writeError(ctx, fasthttp.StatusBadRequest, codeBadRequest,
			"a request must not carry both Content-Length and Transfer-Encoding; the connection is closed")
		return
	}
	s.router.serve(s, ctx)
}

// statusHandler serves one request of the status listener: GET /healthz,
// /readyz and /metrics, without the bearer token (they change nothing and
// carry no domain); any other path is 404 not_found.
func (s *Server) statusHandler(ctx *fasthttp.RequestCtx) {
	defer s.recoverPanic(ctx)
	s.status.serve(s, ctx)
}

// smuggled reports whether raw headers (of a request fasthttp framed as
// chunked) also carry a Content-Length.
func smuggled(raw []byte) bool {
	const name = "content-length:"
	for line := range bytes.SplitSeq(raw, []byte("\n")) {
		line = bytes.TrimLeft(line, " \t")
		if len(line) >= len(name) && bytes.EqualFold(line[:len(name)], []byte(name)) {
			return true
		}
	}
	return false
}

// httpServer returns the fasthttp server for s's handler, with the body
// limits, the default timeouts and JSON error replies of the API.
func (s *Server) httpServer() *fasthttp.Server {
	return s.httpServerWith(netguard.Limits{}.WithDefaults())
}

// httpServerWith is httpServer with the timeouts of lim (with defaults):
// ReadTimeout bounds reading a request, headers and body (a client that
// stalls mid-body is cut there), WriteTimeout writing its reply, and
// IdleTimeout the wait for the next request on a kept-alive connection.
func (s *Server) httpServerWith(lim netguard.Limits) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      s.Handler,
		ErrorHandler:                 s.errorHandler,
		HeaderReceived:               s.headerReceived,
		MaxRequestBodySize:           maxSimulateBody,
		ReadTimeout:                  lim.ReadTimeout,
		WriteTimeout:                 lim.WriteTimeout,
		IdleTimeout:                  lim.IdleTimeout,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		Logger:                       s.connLog,
	}
}

// writeJSON writes a 200 JSON reply; body is copied.
func writeJSON(ctx *fasthttp.RequestCtx, body []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentTypeJSON)
	ctx.SetBody(body)
}

// call is the pooled per-request state of the endpoints: the decoded body
// (with the body readers), the reply buffer and the reply's format.
type call struct {
	body wireBody
	out  []byte
	f    format // of the reply (writer)
}

var callPool = sync.Pool{New: func() any { return new(call) }}

func getCall() *call { return callPool.Get().(*call) }

func putCall(c *call) {
	c.body.reset()
	if cap(c.out) > 64<<10 {
		c.out = nil // do not pin a large reply's buffer
	}
	if cap(c.body.unescaped) > 4<<10 {
		c.body.unescaped = nil
	}
	c.out = c.out[:0]
	callPool.Put(c)
}
