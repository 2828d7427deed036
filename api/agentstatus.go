package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/valyala/fasthttp"
)

// agentstatus.go serves GET /v1/status: what an operator asks of an agent
// first, and what no other endpoint says: the build it runs, since when,
// which config is in force (its version, a hash of it and where it came
// from), on which listeners it serves, and whether it is ready. It is
// read-only and off the hot path (the hash marshals the config in force on
// each call, as GET /v1/config does).

// StatusReply is the reply of GET /v1/status.
type StatusReply struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"go_version"`
	Node      string `json:"node"`
	Ready     bool   `json:"ready"`
	// StartedAtMs is the start, Unix milliseconds; UptimeMs the time since,
	// on the monotonic clock (a step of the system clock does not move it).
	StartedAtMs int64 `json:"started_at_ms"`
	UptimeMs    int64 `json:"uptime_ms"`
	// ConfigVersion is GET /v1/config's version; ConfigSHA256 the SHA-256,
	// in hex, of its config member (the normalized config, so agents whose
	// files differ only in layout have the same hash); ConfigSource the
	// file it was read from, or "built-in default".
	ConfigVersion int64          `json:"config_version"`
	ConfigSHA256  string         `json:"config_sha256"`
	ConfigSource  string         `json:"config_source"`
	Resources     int            `json:"resources"`
	Listeners     []ListenerInfo `json:"listeners"`
}

// ListenerInfo is one listener of GET /v1/status. Connections and
// MaxConnections are absent when the listener is not guarded (an agent
// embedded without a netguard.Set).
type ListenerInfo struct {
	Name           string `json:"name"`
	Address        string `json:"address"`
	Connections    *int   `json:"connections,omitempty"`
	MaxConnections *int   `json:"max_connections,omitempty"`
}

// listenerOrder ranks the listeners' names for the reply: the API's first,
// then the status listener, then the rate limit service's.
var listenerOrder = []string{"socket", "http", "status", "rls_socket", "rls_grpc", "rls_http"}

// GET /v1/status → StatusReply.
func (s *Server) agentStatus(ctx *fasthttp.RequestCtx, _ params) {
	g := s.gen.Load()
	cfg, err := json.Marshal(g.engine.Config())
	if err != nil {
		s.fail(ctx, fmt.Errorf("rendering the config: %w", err))
		return
	}
	sum := sha256.Sum256(cfg)
	reply := StatusReply{
		Version: orUnknown(s.version), Revision: orUnknown(s.revision), GoVersion: runtime.Version(),
		Node: s.name, Ready: s.Ready(),
		StartedAtMs: s.started.UnixMilli(), UptimeMs: max(0, time.Since(s.started).Milliseconds()),
		ConfigVersion: g.version, ConfigSHA256: hex.EncodeToString(sum[:]), ConfigSource: *s.source.Load(),
		Listeners: s.listeners.Load().describe(),
	}
	if c := g.engine.Config(); c != nil {
		reply.Resources = len(c.Resources)
	}
	s.replyJSON(ctx, reply)
}

// describe returns l's listeners for GET /v1/status: every open listener of
// its netguard.Set (the rate limit service's among them, when the agent
// guards them with the same set), else its own; none for a nil l (Serve
// has not started).
func (l *Listeners) describe() []ListenerInfo {
	out := []ListenerInfo{}
	if l == nil {
		return out
	}
	for _, gl := range l.guards.Listeners() {
		open, max := gl.Open(), gl.Max()
		out = append(out, ListenerInfo{Name: gl.Name(), Address: gl.Addr().String(), Connections: &open, MaxConnections: &max})
	}
	if len(out) == 0 {
		for _, li := range []ListenerInfo{{"socket", l.SocketPath(), nil, nil}, {"http", l.HTTPAddr(), nil, nil}, {"status", l.StatusAddr(), nil, nil}} {
			if li.Address != "" {
				out = append(out, li)
			}
		}
	}
	rank := func(name string) int {
		if i := slices.Index(listenerOrder, name); i >= 0 {
			return i
		}
		return len(listenerOrder)
	}
	slices.SortStableFunc(out, func(a, b ListenerInfo) int { return rank(a.Name) - rank(b.Name) })
	return out
}

// orUnknown returns s, or "unknown" when it is empty.
func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
