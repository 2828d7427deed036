package rls

import (
	"io"
	"net/http"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/obol-dev/obol/internal/netguard"
)

// http.go serves envoyproxy/ratelimit's HTTP endpoints:
//
//   - POST /json (any method, as envoyproxy/ratelimit's): a RateLimitRequest in protobuf's JSON mapping, answered
//     with the RateLimitResponse in the same mapping; status 200, 429 when
//     the overall code is OVER_LIMIT, 400 for a body that does not parse
//     or a request that cannot be decided (no domain, no descriptors),
//     500 with no config loaded;
//   - GET /healthcheck: "OK" with 200 while healthy, 500 once the agent
//     is stopping (SIGTERM) so that load balancers drain it first.

// maxJSONBody bounds a /json body.
const maxJSONBody = 1 << 20

// maxHeaderWait bounds reading a request's headers, within the read
// timeout.
const maxHeaderWait = 10 * time.Second

// HTTPServer returns an http.Server of HTTPHandler bounded by lim (zero
// fields: their defaults): ReadTimeout bounds reading a request, headers
// (at most 10 s of it) and body, so that a client sending its body a byte
// a second is cut there; WriteTimeout bounds the reply; IdleTimeout the
// wait for the next request on a kept-alive connection. lim.MaxConns is
// the listener's: serve it on a listener guarded by netguard.
func (s *Server) HTTPServer(lim netguard.Limits) *http.Server {
	lim = lim.WithDefaults()
	return &http.Server{
		Handler:           s.HTTPHandler(),
		ReadHeaderTimeout: min(maxHeaderWait, lim.ReadTimeout),
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
	}
}

// HTTPHandler returns the handler of /json and /healthcheck.
func (s *Server) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/json", s.serveJSON)
	mux.HandleFunc("/healthcheck", s.serveHealth)
	return mux
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	if !s.Healthy() {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("OK"))
}

func (s *Server) serveJSON(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxJSONBody+1))
	if err != nil || len(body) > maxJSONBody {
		http.Error(w, "body unreadable or over 1 MiB", http.StatusBadRequest)
		return
	}
	var rr rlpb.RateLimitRequest
	if err := protojson.Unmarshal(body, &rr); err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	r := GetReply()
	defer r.Release()
	if err := s.svc.Decide(s.now(), &rr, r); err != nil {
		code := http.StatusBadRequest
		if err == ErrNoConfig {
			code = http.StatusInternalServerError
		}
		http.Error(w, err.Error(), code)
		return
	}
	out, err := protojson.Marshal(r.Response())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Response().GetOverallCode() == rlpb.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	_, _ = w.Write(out)
}
