// Package caddy holds the test of the Caddy example (the Caddyfile beside
// it): it runs Debian's caddy with that very file, only paths and ports
// changed, in front of a real agent and upstream.
package caddy

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

func TestCaddyForwardAuth(t *testing.T) {
	bin := proxytest.Find("caddy")
	if bin == "" {
		t.Skip("caddy is not installed: apt-get install caddy (Debian's package; .ci/proxies installs it)")
	}
	dir := t.TempDir()
	agent, upstream := proxytest.StartBackends(t, dir, "--http", "off")

	b, err := os.ReadFile("Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	port := proxytest.FreePort(t)
	cfg := string(b)
	cfg = proxytest.ReplaceN(t, "Caddyfile", cfg, "/run/obol/obol.sock", agent.Socket, 4)
	cfg = proxytest.ReplaceOnce(t, "Caddyfile", cfg, "http://:8080 {", fmt.Sprintf("http://127.0.0.1:%d {", port))
	cfg = proxytest.ReplaceOnce(t, "Caddyfile", cfg, "reverse_proxy 127.0.0.1:8081 {", "reverse_proxy "+upstream.Addr+" {")
	cfgPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// Caddy keeps its state under $HOME and the XDG directories: here.
	env := []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir}
	validate := exec.Command(bin, "validate", "--config", cfgPath, "--adapter", "caddyfile")
	validate.Env = append(os.Environ(), env...)
	if out, err := validate.CombinedOutput(); err != nil {
		t.Fatalf("caddy validate: %v\n%s", err, out)
	}
	cad := proxytest.StartEnv(t, "caddy", env, bin, "run", "--config", cfgPath, "--adapter", "caddyfile")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c, other := proxytest.ClientFrom("127.0.0.1"), proxytest.ClientFrom("127.0.0.2")
	proxytest.WaitFor(t, 10*time.Second, "caddy to serve", func() error {
		resp, err := c.Get(base + "/other")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /other answered %d", resp.StatusCode)
		}
		return nil
	}, cad)
	get := func(c *http.Client, path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		return proxytest.Get(t, c, base+path, hdr...)
	}

	// Per client address.
	for i := range 3 {
		resp, _ := get(c, "/api/a")
		proxytest.WantAllowed(t, fmt.Sprintf("/api/ request %d", i+1), resp, proxytest.SearchPolicy, 2-i)
	}
	if h := upstream.LastHeader("/api/a"); h.Get("RateLimit") != "" || h.Get("Obol-Domain") != "" {
		t.Errorf("the upstream got the check's headers: RateLimit %q, Obol-Domain %q", h.Get("RateLimit"), h.Get("Obol-Domain"))
	}
	resp, body := get(c, "/api/a")
	proxytest.WantLimited(t, "/api/ request 4", resp, proxytest.SearchPolicy, 20)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || !strings.Contains(body, `"retry_after_ms":`) {
		t.Errorf("the 429 carries %q %q, want the agent's decision as JSON", ct, body)
	}
	if got := upstream.Hits("/api/a"); got != 3 {
		t.Fatalf("upstream saw %d requests, want 3", got)
	}
	resp, _ = get(other, "/api/a")
	proxytest.WantAllowed(t, "/api/ from 127.0.0.2", resp, proxytest.SearchPolicy, 2)

	// Per X-Tenant header, and per address without it.
	for i := range 2 {
		resp, _ := get(c, "/tenant/x", "X-Tenant", "t1")
		proxytest.WantAllowed(t, "tenant t1", resp, proxytest.TenantPolicy, 1-i)
	}
	resp, _ = get(c, "/tenant/x", "X-Tenant", "t1")
	proxytest.WantLimited(t, "tenant t1 request 3", resp, proxytest.TenantPolicy, 30)
	resp, _ = get(c, "/tenant/x", "X-Tenant", "t2")
	proxytest.WantAllowed(t, "tenant t2", resp, proxytest.TenantPolicy, 1)
	resp, _ = get(c, "/tenant/x")
	proxytest.WantAllowed(t, "no tenant", resp, proxytest.TenantPolicy, 1)

	// A stuck agent: the check times out after 250 ms, the request goes on.
	agent.Pause(t)
	start := time.Now()
	resp, _ = get(c, "/api/a")
	took := time.Since(start)
	agent.Resume(t)
	if resp.StatusCode != http.StatusOK || upstream.Hits("/api/a") != 5 {
		t.Fatalf("agent stuck: status %d, upstream hits %d: want 200 and the request passed", resp.StatusCode, upstream.Hits("/api/a"))
	}
	if took > proxytest.StuckBound { // it gave up on the stuck agent instead of waiting for it
		t.Errorf("agent stuck: the request took %v, want about 250 ms", took)
	}
	t.Logf("agent stuck: request passed in %v", took.Round(time.Millisecond))

	// The agent down: requests pass.
	agent.Stop(t)
	resp, _ = get(c, "/api/a")
	if resp.StatusCode != http.StatusOK || upstream.Hits("/api/a") != 6 || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("agent down: status %d, upstream hits %d, RateLimit %q: want 200, the request passed, no fields",
			resp.StatusCode, upstream.Hits("/api/a"), resp.Header.Get("RateLimit"))
	}

	// The agent back, afresh: limits again.
	agent.Restart(t)
	for i := range 3 {
		resp, _ := get(c, "/api/a")
		proxytest.WantAllowed(t, fmt.Sprintf("agent back, request %d", i+1), resp, proxytest.SearchPolicy, 2-i)
	}
	resp, _ = get(c, "/api/a")
	proxytest.WantLimited(t, "agent back, request 4", resp, proxytest.SearchPolicy, 20)

	plain, checked := proxytest.Measure(t, c, base+"/other", base+"/tenant/bench", 300, "X-Tenant", "bench")
	t.Log(proxytest.Result("caddy", "check", plain, checked))
}
