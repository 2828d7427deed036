// Package nginx holds the tests of the nginx example (nginx.conf, app.conf
// and the obol/ snippets beside it): they run Debian's nginx with those very files,
// only paths and ports changed, in front of a real agent and upstream.
package nginx

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/proxytest"
)

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
	s.agent, s.upstream = proxytest.StartBackends(t, s.dir, "--http", "off")
	socket := s.agent.Socket

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
	port := proxytest.FreePort(t)
	// The example's workers run as www-data, who cannot reach this test's
	// private directory: as root they run as root here; as another user,
	// nginx runs them as that user and the line goes.
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	for _, f := range []struct {
		name string
		r    [][2]string
	}{
		{"nginx.conf", [][2]string{
			{"user www-data;\n", user},
			{"worker_processes auto;\n", "worker_processes 1;\ndaemon off;\n"},
			{"pid /run/nginx.pid;", "pid " + s.dir + "/nginx.pid;"},
			{"error_log /var/log/nginx/error.log warn;", "error_log " + s.dir + "/error.log warn;"},
			{"http {\n", "http {\n" + tempPaths(s.dir)},
		}},
		{"app.conf", [][2]string{
			{"server 127.0.0.1:8081;", "server " + s.upstream.Addr + ";"},
			{"listen 8080;", fmt.Sprintf("listen 127.0.0.1:%d;", port)},
			{"access_log /var/log/nginx/access.log obol;", "access_log " + s.dir + "/access.log obol;"},
			// A location naming a resource the agent does not have: a
			// mistake that must show (a 500), not pass silently.
			{"    location /health {", "    location /typo/ {\n        set $obol_resource api/typo;\n        set $obol_domain $remote_addr;\n        include obol/location.conf;\n        proxy_pass http://app;\n    }\n\n    location /health {"},
		}},
	} {
		b, err := os.ReadFile(f.name)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, r := range f.r {
			text = proxytest.ReplaceOnce(t, f.name, text, r[0], r[1])
		}
		if err := os.WriteFile(filepath.Join(conf, f.name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
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
	resp, _ := proxytest.Get(t, c, s.base+path, hdr...)
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

func TestNginxAuthRequest(t *testing.T) {
	s := startStack(t)
	other := proxytest.ClientFrom("127.0.0.2")

	// Per client address: 3 allowed, each reaching the upstream with the
	// RateLimit fields, then 429 and the upstream is not asked.
	for i := range 3 {
		proxytest.WantAllowed(t, fmt.Sprintf("/api/ request %d", i+1), s.get(t, s.client, "/api/a"), proxytest.SearchPolicy, 2-i)
	}
	if got := s.upstream.Hits("/api/a"); got != 3 {
		t.Fatalf("upstream saw %d requests, want 3", got)
	}
	proxytest.WantLimited(t, "/api/ request 4", s.get(t, s.client, "/api/a"), proxytest.SearchPolicy, 20)
	if got := s.upstream.Hits("/api/a"); got != 3 {
		t.Fatalf("upstream saw %d requests after a 429, want still 3", got)
	}
	s.waitLog(t, "access.log", `"GET /api/a HTTP/1.1" 429 obol=limited `)
	// Another client address is another domain.
	proxytest.WantAllowed(t, "/api/ from 127.0.0.2", s.get(t, other, "/api/a"), proxytest.SearchPolicy, 2)

	// Per X-Tenant header: t1 is limited, t2 is not, both from 127.0.0.1.
	for i := range 2 {
		proxytest.WantAllowed(t, "tenant t1", s.get(t, s.client, "/tenant/x", "X-Tenant", "t1"), proxytest.TenantPolicy, 1-i)
	}
	proxytest.WantLimited(t, "tenant t1 request 3", s.get(t, s.client, "/tenant/x", "X-Tenant", "t1"), proxytest.TenantPolicy, 30)
	proxytest.WantAllowed(t, "tenant t2", s.get(t, s.client, "/tenant/x", "X-Tenant", "t2"), proxytest.TenantPolicy, 1)
	if got := s.upstream.LastHeader("/tenant/x").Get("X-Tenant"); got != "t2" {
		t.Errorf("upstream got X-Tenant %q, want t2", got)
	}
	// Without the header, the client address is the domain.
	for i := range 2 {
		proxytest.WantAllowed(t, "no tenant", s.get(t, s.client, "/tenant/x"), proxytest.TenantPolicy, 1-i)
	}
	proxytest.WantLimited(t, "no tenant request 3", s.get(t, s.client, "/tenant/x"), proxytest.TenantPolicy, 30)
	proxytest.WantAllowed(t, "no tenant from 127.0.0.2", s.get(t, other, "/tenant/x"), proxytest.TenantPolicy, 1)
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
	s.agent.Pause(t)
	start := time.Now()
	resp := s.get(t, s.client, "/api/a")
	took := time.Since(start)
	s.agent.Resume(t)
	if resp.StatusCode != http.StatusOK || s.upstream.Hits("/api/a") != 5 {
		t.Fatalf("agent stuck: status %d, upstream hits %d: want 200 and the request passed", resp.StatusCode, s.upstream.Hits("/api/a"))
	}
	if resp.Header.Get("RateLimit") != "" {
		t.Errorf("a request let through unchecked carries RateLimit %q", resp.Header.Get("RateLimit"))
	}
	if took > proxytest.StuckBound { // it gave up on the stuck agent instead of waiting for it
		t.Errorf("agent stuck: the request took %v, want about the check's 250 ms read timeout", took)
	}
	s.waitLog(t, "access.log", `"GET /api/a HTTP/1.1" 200 obol=open `)
	s.waitLog(t, "error.log", "upstream timed out", `subrequest: "/_obol_check"`)
	t.Logf("agent stuck: request passed in %v", took.Round(time.Millisecond))
	// Resumed, it limits again (127.0.0.1 is still over its limit).
	proxytest.WantLimited(t, "/api/ after the agent resumed", s.get(t, s.client, "/api/a"), proxytest.SearchPolicy, 20)

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
		proxytest.WantAllowed(t, fmt.Sprintf("agent back, request %d", i+1), s.get(t, s.client, "/api/a"), proxytest.SearchPolicy, 2-i)
	}
	proxytest.WantLimited(t, "agent back, request 4", s.get(t, s.client, "/api/a"), proxytest.SearchPolicy, 20)
	if got := s.upstream.Hits("/api/a"); got != 11 {
		t.Errorf("upstream saw %d requests, want 11", got)
	}

	// The added latency, logged (BenchmarkNginxCheck measures it longer).
	plain, checked := proxytest.Measure(t, s.client, s.base+"/health", s.base+"/tenant/bench", 1000, "X-Tenant", "bench")
	t.Log(proxytest.Result("nginx", "check", plain, checked))
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkNginxCheck measures the latency the check adds per request:
// b.N sequential requests through nginx without the check (/health) and b.N
// with it (/tenant/, allowed), interleaved, in the same run. Run it with a
// fixed count:
//
//	go test -run '^$' -bench NginxCheck -benchtime 5000x ./deploy/sidecar/nginx/
func BenchmarkNginxCheck(b *testing.B) {
	s := startStack(b)
	b.ResetTimer()
	plain, checked := proxytest.Measure(b, s.client, s.base+"/health", s.base+"/tenant/bench", b.N, "X-Tenant", "bench")
	b.StopTimer()
	p50, p99 := proxytest.Percentile(plain, 50), proxytest.Percentile(plain, 99)
	c50, c99 := proxytest.Percentile(checked, 50), proxytest.Percentile(checked, 99)
	b.ReportMetric(us(p50), "nginx_p50_us")
	b.ReportMetric(us(p99), "nginx_p99_us")
	b.ReportMetric(us(c50), "check_p50_us")
	b.ReportMetric(us(c99), "check_p99_us")
	b.ReportMetric(us(c50-p50), "added_p50_us")
	b.Log(proxytest.Result("nginx", "check", plain, checked))
}
