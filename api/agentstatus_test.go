package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/netguard"
)

// statusOf decodes a GET /v1/status reply.
func statusOf(t *testing.T, r reply) StatusReply {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("/v1/status: %d %s", r.status, r.body)
	}
	var st StatusReply
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("/v1/status reply: %v: %s", err, r.body)
	}
	return st
}

// configHash is the SHA-256 of GET /v1/config's config member, in hex.
func configHash(t *testing.T, h *harness) string {
	t.Helper()
	var c struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(h.do("GET", "/v1/config", "").body, &c); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c.Config)
	return hex.EncodeToString(sum[:])
}

// TestAgentStatus: GET /v1/status shows the build, the start, the config in
// force (its version, the hash of what GET /v1/config shows, its source),
// readiness, and follows a new engine and a reload.
func TestAgentStatus(t *testing.T) {
	started := time.Now().Add(-90 * time.Second)
	next := `resources: {n/new: {kind: gcra, burst: 1, count: 1, period: 1s}}`
	h := &harness{t: t, clock: &clock{t: t0}, logs: &logBuffer{}}
	h.srv = New(testEngine(t), Options{
		Now: h.clock.now, Logger: slog.New(slog.NewJSONHandler(h.logs, nil)), NodeName: "node-a",
		Version: "v1.2.3", Revision: "abc123", Started: started, ConfigSource: "/etc/obol/obol.yaml",
		LoadConfig: func() (*config.Config, string, error) {
			c, err := config.Parse([]byte(next))
			return c, "/etc/obol/next.yaml", err
		},
	})
	h.serve()

	st := statusOf(t, h.do("GET", "/v1/status", ""))
	want := StatusReply{Version: "v1.2.3", Revision: "abc123", GoVersion: runtime.Version(), Node: "node-a", Ready: true,
		StartedAtMs: started.UnixMilli(), UptimeMs: st.UptimeMs, ConfigVersion: 1, ConfigSHA256: configHash(t, h),
		ConfigSource: "/etc/obol/obol.yaml", Resources: 6, Listeners: []ListenerInfo{}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("status\n%+v\nwant\n%+v", st, want)
	}
	// Uptime is on the monotonic clock, from Started (time.Now's reading,
	// so about 90 s here).
	if st.UptimeMs < 90_000 || st.UptimeMs > 3_600_000 {
		t.Errorf("uptime_ms %d, want about 90000", st.UptimeMs)
	}
	first := st.ConfigSHA256

	res, err := h.srv.Reload()
	if err != nil {
		t.Fatal(err)
	}
	st = statusOf(t, h.do("GET", "/v1/status", ""))
	if st.ConfigVersion != res.Version || st.ConfigVersion != 2 || st.ConfigSource != "/etc/obol/next.yaml" || st.Resources != 1 ||
		st.ConfigSHA256 == first || st.ConfigSHA256 != configHash(t, h) {
		t.Errorf("after a reload: %+v (first hash %s)", st, first)
	}
	// The same config in force again: a new version, the same hash.
	second := st.ConfigSHA256
	if _, err := h.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if st = statusOf(t, h.do("GET", "/v1/status", "")); st.ConfigVersion != 3 || st.ConfigSHA256 != second {
		t.Errorf("reloading the same config: version %d hash %s, want 3 and %s", st.ConfigVersion, st.ConfigSHA256, second)
	}

	h.srv.SetReady(false)
	if st := statusOf(t, h.do("GET", "/v1/status", "")); st.Ready {
		t.Errorf("ready while not ready")
	}
	if r := h.do("GET", "/v1/status", "", hdrAcceptMsgpack); r.status != 200 || r.header.Get("Content-Type") != contentTypeMsgpack {
		t.Errorf("MessagePack: %d %s", r.status, r.header.Get("Content-Type"))
	} else if jv, mv := jsonDecode(t, h.do("GET", "/v1/status", "").body), mpDecode(t, r.body); !reflect.DeepEqual(withoutUptime(jv), withoutUptime(mv)) {
		t.Errorf("MessagePack %v, JSON %v", mv, jv)
	}
	if r := h.post("/v1/status", `{}`); r.status != 405 {
		t.Errorf("POST /v1/status: %d, want 405", r.status)
	}
}

// withoutUptime drops uptime_ms from a decoded status (it moves between
// two calls).
func withoutUptime(v any) any {
	if m, ok := v.(map[string]any); ok {
		delete(m, "uptime_ms")
	}
	return v
}

// TestAgentStatusDefaults: with no build, start or source given, the
// status says unknown, the start is New's, and the source is empty.
func TestAgentStatusDefaults(t *testing.T) {
	before := time.Now()
	h := newHarness(t)
	st := statusOf(t, h.do("GET", "/v1/status", ""))
	if st.Version != "unknown" || st.Revision != "unknown" || st.ConfigSource != "" ||
		st.StartedAtMs < before.UnixMilli() || st.StartedAtMs > time.Now().UnixMilli() {
		t.Errorf("status with no options: %+v", st)
	}
}

// TestAgentStatusListeners: on real listeners, the status lists each with
// its address and, when guarded, its connections and cap: the API's first,
// then the status listener, then any other listener of the same set (the
// rate limit service's); unguarded, the addresses alone. The status
// listener does not serve it.
func TestAgentStatusListeners(t *testing.T) {
	for _, guarded := range []bool{true, false} {
		t.Run(map[bool]string{true: "guarded", false: "unguarded"}[guarded], func(t *testing.T) {
			sock := filepath.Join(shortTempDir(t), "obol.sock")
			var guards *netguard.Set
			if guarded {
				guards = netguard.NewSet(nil)
				rls, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer guards.Guard("rls_http", rls, 7).Close()
			}
			ls, err := Listen(ListenConfig{Socket: sock, HTTP: "127.0.0.1:0", Status: "127.0.0.1:0", Guards: guards,
				Limits: netguard.Limits{MaxConns: 9}})
			if err != nil {
				t.Fatal(err)
			}
			serving(t, ls)

			code, body := get(t, unixClient(sock), "http://obol/v1/status")
			var st StatusReply
			if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
				t.Fatalf("/v1/status: %d %s (%v)", code, body, err)
			}
			var names, addrs []string
			for _, l := range st.Listeners {
				names = append(names, l.Name)
				addrs = append(addrs, l.Address)
				if guarded != (l.Connections != nil && l.MaxConnections != nil) {
					t.Errorf("%s: connections %v, max %v (guarded %v)", l.Name, l.Connections, l.MaxConnections, guarded)
				}
			}
			wantNames := []string{"socket", "http", "status"}
			wantAddrs := []string{sock, ls.HTTPAddr(), ls.StatusAddr()}
			if guarded {
				wantNames = append(wantNames, "rls_http")
				if *st.Listeners[0].MaxConnections != 9 || *st.Listeners[3].MaxConnections != 7 || *st.Listeners[0].Connections < 1 {
					t.Errorf("socket or rls_http figures: %s", body)
				}
				wantAddrs = append(wantAddrs, st.Listeners[3].Address)
			}
			if !reflect.DeepEqual(names, wantNames) || !reflect.DeepEqual(addrs, wantAddrs) {
				t.Errorf("listeners %v at %v, want %v at %v", names, addrs, wantNames, wantAddrs)
			}
			if code, body := statusGet(t, ls.StatusAddr(), "/v1/status"); code != 404 || !strings.Contains(body, "not_found") {
				t.Errorf("/v1/status on the status listener: %d %s, want 404", code, body)
			}
		})
	}
}
