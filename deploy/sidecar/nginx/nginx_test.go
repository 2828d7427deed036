// Package nginx holds the tests of the nginx example (nginx.conf and the
// obol/ snippets beside it): they run Debian's nginx with those very files,
// only paths and ports changed, in front of a real agent and upstream.
package nginx

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/proxytest"
)

// agentConfig: api/search allows 3 requests a minute per client address,
// api/tenant 2 a minute per tenant, except the tenant "bench" (the latency
// measurement's), which is never limited in practice.
const agentConfig = `
resources:
  api/search:
    kind: gcra
    burst: 3
    count: 3
    period: 1m
  api/tenant:
    kind: gcra
    burst: 2
    count: 2
    period: 1m
    domains:
      bench: {burst: 1000000, count: 1000000, period: 1s}
`

// stack is nginx in front of the upstream, checking with the agent.
type stack struct {
	dir      string
	base     string // http://127.0.0.1:PORT
	agent    *proxytest.Agent
	nginx    *proxytest.Proc
	upstream *proxytest.Upstream
	client   *http.Client // from 127.0.0.1
}

// startStack starts the agent (on its socket only), the upstream and nginx
// on the shipped config, and waits until nginx serves.
func startStack(t testing.TB) *stack {
	t.Helper()
	bin := proxytest.Find("nginx")
	if bin == "" {
		t.Skip("nginx is not installed: apt-get install nginx (Debian's package; .ci/proxies installs it)")
	}
	if out, err := exec.Command(bin, "-V").CombinedOutput(); err != nil || !strings.Contains(string(out), "--with-http_auth_request_module") {
		t.Skipf("%s has no auth_request module (nginx -V: %v): install Debian's nginx, which has it\n%s", bin, err, out)
	}
	s := &stack{dir: t.TempDir()}
	socket := filepath.Join(s.dir, "obol.sock")
	if len(socket) >= 100 {
		t.Fatalf("socket path %s is too long for a Unix socket: set TMPDIR to a shorter directory", socket)
	}
	cfg := filepath.Join(s.dir, "obol.yaml")
	if err := os.WriteFile(cfg, []byte(agentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	s.agent = proxytest.StartAgent(t, proxytest.BuildAgent(t, s.dir), cfg, socket, "--http", "off")
	s.upstream = proxytest.StartUpstream(t)

	conf := filepath.Join(s.dir, "conf")
	if err := os.MkdirAll(filepath.Join(conf, "obol"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"http.conf", "server.conf", "location.conf"} {
		b, err := os.ReadFile(filepath.Join("obol", name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if name == "http.conf" {
			text = proxytest.ReplaceOnce(t, name, text, "server unix:/run/obol/obol.sock ", "server unix:"+socket+" ")
		}
		if err := os.WriteFile(filepath.Join(conf, "obol", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	port := proxytest.FreePort(t)
	text := string(b)
	top := "worker_processes 1;\ndaemon off;\n"
	if os.Geteuid() == 0 {
		// As root, nginx runs its workers as nobody, who may not reach the
		// agent's socket in this test's private directory.
		top += "user root;\n"
	}
	for _, r := range [][2]string{
		{"worker_processes auto;\n", top},
		{"pid /run/nginx.pid;", "pid " + s.dir + "/nginx.pid;"},
		{"error_log /var/log/nginx/error.log warn;", "error_log " + s.dir + "/error.log warn;"},
		{"access_log /var/log/nginx/access.log obol;", "access_log " + s.dir + "/access.log obol;"},
		{"server 127.0.0.1:8081;", "server " + s.upstream.Addr + ";"},
		{"listen 8080;", fmt.Sprintf("listen 127.0.0.1:%d;", port)},
		{"http {\n", "http {\n" + tempPaths(s.dir)},
		// A location naming a resource the agent does not have: a mistake
		// that must show (a 500), not pass silently.
		{"        location /health {", "        location /typo/ {\n            set $obol_resource api/typo;\n            set $obol_domain $remote_addr;\n            include obol/location.conf;\n            proxy_pass http://app;\n        }\n\n        location /health {"},
	} {
		text = proxytest.ReplaceOnce(t, "nginx.conf", text, r[0], r[1])
	}
	if err := os.WriteFile(filepath.Join(conf, "nginx.conf"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s.nginx = proxytest.Start(t, "nginx", bin, "-p", s.dir+"/", "-c", filepath.Join(conf, "nginx.conf"), "-e", filepath.Join(s.dir, "error.log"))
	s.base = fmt.Sprintf("http://127.0.0.1:%d", port)
	s.client = proxytest.ClientFrom("127.0.0.1")
	proxytest.WaitFor(t, 10*time.Second, "nginx to serve", func() error {
		resp, err := s.client.Get(s.base + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /health answered %d", resp.StatusCode)
		}
		return nil
	}, s.nginx)
	return s
}

// tempPaths keeps nginx's temporary files in dir.
func tempPaths(dir string) string {
	var b strings.Builder
	for _, k := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "    %s_temp_path %s/%s_temp;\n", k, dir, k)
	}
	return b.String()
}

// get sends GET path with the headers (name, value pairs) through nginx.
func (s *stack) get(t testing.TB, c *http.Client, path string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// waitLog waits until the last line of the log file name (in the stack's
// directory) contains each of want: nginx writes its access log after the
// response has gone out, so the client may read the response first.
func (s *stack) waitLog(t testing.TB, name string, want ...string) {
	t.Helper()
	proxytest.WaitFor(t, 5*time.Second, name+" to show "+strings.Join(want, " and "), func() error {
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		last := lines[len(lines)-1]
		for _, w := range want {
			if !strings.Contains(last, w) {
				return fmt.Errorf("its last line is %q", last)
			}
		}
		return nil
	}, s.nginx)
}

// wantAllowed checks that resp is the upstream's 200 with the RateLimit
// fields, RateLimit's r being remaining.
func wantAllowed(t *testing.T, what string, resp *http.Response, policy string, remaining int) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d, want 200", what, resp.StatusCode)
	}
	if got := resp.Header.Values("RateLimit-Policy"); len(got) != 1 || got[0] != policy {
		t.Errorf("%s: RateLimit-Policy %q, want [%q]", what, got, policy)
	}
	if got, want := resp.Header.Values("RateLimit"), fmt.Sprintf(`"gcra";r=%d;t=`, remaining); len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("%s: RateLimit %q, want one starting %q", what, got, want)
	}
	if got := resp.Header.Get("Retry-After"); got != "" {
		t.Errorf("%s: Retry-After %q on an allowed response", what, got)
	}
}

// wantLimited checks that resp is nginx's 429 with Retry-After (whole
// seconds, at most maxWait) and the RateLimit fields.
func wantLimited(t *testing.T, what string, resp *http.Response, policy string, maxWait int) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("%s: status %d, want 429", what, resp.StatusCode)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > maxWait {
		t.Errorf("%s: Retry-After %q, want whole seconds in [1, %d]", what, resp.Header.Get("Retry-After"), maxWait)
	}
	if got := resp.Header.Values("RateLimit-Policy"); len(got) != 1 || got[0] != policy {
		t.Errorf("%s: RateLimit-Policy %q, want [%q]", what, got, policy)
	}
	if got := resp.Header.Values("RateLimit"); len(got) != 1 || !strings.HasPrefix(got[0], `"gcra";r=0;t=`) {
		t.Errorf("%s: RateLimit %q, want one starting \"gcra\";r=0;t=", what, got)
	}
}

const (
	searchPolicy = `"gcra";q=3;w=60`
	tenantPolicy = `"gcra";q=2;w=60`
)

func TestNginxAuthRequest(t *testing.T) {
	s := startStack(t)
	other := proxytest.ClientFrom("127.0.0.2")

	// Per client address: 3 allowed, each reaching the upstream with the
	// RateLimit fields, then 429 and the upstream is not asked.
	for i := range 3 {
		wantAllowed(t, fmt.Sprintf("/api/ request %d", i+1), s.get(t, s.client, "/api/a"), searchPolicy, 2-i)
	}
	if got := s.upstream.Hits("/api/a"); got != 3 {
		t.Fatalf("upstream saw %d requests, want 3", got)
	}
	wantLimited(t, "/api/ request 4", s.get(t, s.client, "/api/a"), searchPolicy, 20)
	if got := s.upstream.Hits("/api/a"); got != 3 {
		t.Fatalf("upstream saw %d requests after a 429, want still 3", got)
	}
	s.waitLog(t, "access.log", `"GET /api/a HTTP/1.1" 429 obol=limited `)
	// Another client address is another domain.
	wantAllowed(t, "/api/ from 127.0.0.2", s.get(t, other, "/api/a"), searchPolicy, 2)

	// Per X-Tenant header: t1 is limited, t2 is not, both from 127.0.0.1.
	for i := range 2 {
		wantAllowed(t, "tenant t1", s.get(t, s.client, "/tenant/x", "X-Tenant", "t1"), tenantPolicy, 1-i)
	}
	wantLimited(t, "tenant t1 request 3", s.get(t, s.client, "/tenant/x", "X-Tenant", "t1"), tenantPolicy, 30)
	wantAllowed(t, "tenant t2", s.get(t, s.client, "/tenant/x", "X-Tenant", "t2"), tenantPolicy, 1)
	if got := s.upstream.LastHeader("/tenant/x").Get("X-Tenant"); got != "t2" {
		t.Errorf("upstream got X-Tenant %q, want t2", got)
	}
	// Without the header, the client address is the domain.
	for i := range 2 {
		wantAllowed(t, "no tenant", s.get(t, s.client, "/tenant/x"), tenantPolicy, 1-i)
	}
	wantLimited(t, "no tenant request 3", s.get(t, s.client, "/tenant/x"), tenantPolicy, 30)
	wantAllowed(t, "no tenant from 127.0.0.2", s.get(t, other, "/tenant/x"), tenantPolicy, 1)
	if got := s.upstream.Hits("/tenant/x"); got != 6 {
		t.Errorf("upstream saw %d /tenant/ requests, want 6 (the allowed ones)", got)
	}

	// A resource the agent does not know is a 500, not a silent pass.
	if resp := s.get(t, s.client, "/typo/"); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("unknown resource: status %d, want 500", resp.StatusCode)
	}
	if s.upstream.Hits("/typo/") != 0 {
		t.Error("a request for an unknown resource reached the upstream")
	}
	s.waitLog(t, "access.log", `"GET /typo/ HTTP/1.1" 500 obol=error `)

	// A stuck agent: the check times out and the request goes through.
	s.agent.Signal(t, syscall.SIGSTOP)
	start := time.Now()
	resp := s.get(t, s.client, "/api/a")
	took := time.Since(start)
	s.agent.Signal(t, syscall.SIGCONT)
	if resp.StatusCode != http.StatusOK || s.upstream.Hits("/api/a") != 5 {
		t.Fatalf("agent stuck: status %d, upstream hits %d: want 200 and the request passed", resp.StatusCode, s.upstream.Hits("/api/a"))
	}
	if resp.Header.Get("RateLimit") != "" {
		t.Errorf("a request let through unchecked carries RateLimit %q", resp.Header.Get("RateLimit"))
	}
	if took > 2*time.Second {
		t.Errorf("agent stuck: the request took %v, want about the check's 250 ms read timeout", took)
	}
	s.waitLog(t, "access.log", `"GET /api/a HTTP/1.1" 200 obol=open `)
	s.waitLog(t, "error.log", "upstream timed out", `subrequest: "/_obol_check"`)
	t.Logf("agent stuck: request passed in %v", took.Round(time.Millisecond))
	// Resumed, it limits again (127.0.0.1 is still over its limit).
	wantLimited(t, "/api/ after the agent resumed", s.get(t, s.client, "/api/a"), searchPolicy, 20)

	// The agent down: every request passes, marked in both logs.
	s.agent.Stop(t)
	for i := range 3 {
		resp := s.get(t, s.client, "/api/a")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("agent down, request %d: status %d, want 200 (fail open)", i+1, resp.StatusCode)
		}
		s.waitLog(t, "access.log", `"GET /api/a HTTP/1.1" 200 obol=open `)
	}
	if got := s.upstream.Hits("/api/a"); got != 8 {
		t.Errorf("agent down: upstream saw %d requests, want 8", got)
	}
	s.waitLog(t, "error.log", "connect() to unix:"+s.agent.Socket+" failed", `subrequest: "/_obol_check"`)

	// The agent back (its counts start afresh): limits again.
	s.agent.Restart(t)
	for i := range 3 {
		wantAllowed(t, fmt.Sprintf("agent back, request %d", i+1), s.get(t, s.client, "/api/a"), searchPolicy, 2-i)
	}
	wantLimited(t, "agent back, request 4", s.get(t, s.client, "/api/a"), searchPolicy, 20)
	if got := s.upstream.Hits("/api/a"); got != 11 {
		t.Errorf("upstream saw %d requests, want 11", got)
	}

	// The added latency, logged (BenchmarkNginxCheck measures it longer).
	plain, checked := measure(t, s, 1000)
	t.Logf("RESULT nginx_p50_us=%.0f nginx_p99_us=%.0f check_p50_us=%.0f check_p99_us=%.0f (1000 sequential requests each, interleaved)",
		us(proxytest.Percentile(plain, 50)), us(proxytest.Percentile(plain, 99)),
		us(proxytest.Percentile(checked, 50)), us(proxytest.Percentile(checked, 99)))
}

// measure sends n pairs of sequential requests through nginx on one kept-
// alive connection: /health proxied without a check, then /tenant/ with the
// check (tenant "bench", always allowed). It returns each side's times.
func measure(t testing.TB, s *stack, n int) (plain, checked []time.Duration) {
	t.Helper()
	one := func(path string, hdr ...string) time.Duration {
		start := time.Now()
		resp := s.get(t, s.client, path, hdr...)
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d", path, resp.StatusCode)
		}
		return d
	}
	for range 100 { // warm up: connections, caches
		one("/health")
		one("/tenant/bench", "X-Tenant", "bench")
	}
	plain, checked = make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		plain[i] = one("/health")
		checked[i] = one("/tenant/bench", "X-Tenant", "bench")
	}
	return plain, checked
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkNginxCheck measures the latency the check adds per request:
// b.N sequential requests through nginx without the check and b.N with it,
// interleaved, in the same run. Run it with a fixed count:
//
//	go test -run '^$' -bench NginxCheck -benchtime 5000x ./deploy/sidecar/nginx/
func BenchmarkNginxCheck(b *testing.B) {
	s := startStack(b)
	b.ResetTimer()
	plain, checked := measure(b, s, b.N)
	b.StopTimer()
	p50, p99 := proxytest.Percentile(plain, 50), proxytest.Percentile(plain, 99)
	c50, c99 := proxytest.Percentile(checked, 50), proxytest.Percentile(checked, 99)
	b.ReportMetric(us(p50), "nginx_p50_us")
	b.ReportMetric(us(p99), "nginx_p99_us")
	b.ReportMetric(us(c50), "check_p50_us")
	b.ReportMetric(us(c99), "check_p99_us")
	b.ReportMetric(us(c50-p50), "added_p50_us")
	b.Logf("RESULT nginx_p50_us=%.0f nginx_p99_us=%.0f check_p50_us=%.0f check_p99_us=%.0f (n=%d each)", us(p50), us(p99), us(c50), us(c99), b.N)
}
