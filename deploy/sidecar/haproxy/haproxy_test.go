// Package haproxy holds the test of the HAProxy example (haproxy.cfg and
// obol.lua beside it): it runs Debian's haproxy with those very files, only
// paths and ports changed, in front of a real agent and upstream.
package haproxy

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

func TestHAProxyLuaCheck(t *testing.T) {
	bin := proxytest.Find("haproxy")
	if bin == "" {
		t.Skip("haproxy is not installed: apt-get install haproxy (Debian's package, built with Lua; .ci/proxies installs it)")
	}
	if out, err := exec.Command(bin, "-vv").CombinedOutput(); err != nil || !strings.Contains(string(out), "Built with Lua") {
		t.Skipf("%s is not built with Lua (haproxy -vv: %v): install Debian's haproxy, which is", bin, err)
	}
	dir := t.TempDir()
	agent, upstream := proxytest.StartBackends(t, dir, "--http", "off")

	lua, err := os.ReadFile("obol.lua")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "obol.lua"), lua, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	port := proxytest.FreePort(t)
	cfg := string(b)
	for _, r := range [][2]string{
		{"lua-load /etc/haproxy/obol.lua", "lua-load " + filepath.Join(dir, "obol.lua")},
		{"setenv OBOL_DST unix@/run/obol/obol.sock", "setenv OBOL_DST unix@" + agent.Socket},
		{"bind :8080", fmt.Sprintf("bind 127.0.0.1:%d", port)},
		{"server app 127.0.0.1:8081", "server app " + upstream.Addr},
	} {
		cfg = proxytest.ReplaceOnce(t, "haproxy.cfg", cfg, r[0], r[1])
	}
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	hap := proxytest.Start(t, "haproxy", bin, "-db", "-f", cfgPath)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c, other := proxytest.ClientFrom("127.0.0.1"), proxytest.ClientFrom("127.0.0.2")
	proxytest.WaitFor(t, 10*time.Second, "haproxy to serve", func() error {
		resp, err := c.Get(base + "/other")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /other answered %d", resp.StatusCode)
		}
		return nil
	}, hap)
	get := func(c *http.Client, path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		return proxytest.Get(t, c, base+path, hdr...)
	}
	logShows := func(what string) {
		t.Helper()
		proxytest.WaitFor(t, 5*time.Second, "haproxy's log to show "+what, func() error {
			if !strings.Contains(hap.Output.String(), what) {
				return fmt.Errorf("not there yet")
			}
			return nil
		}, hap)
	}

	// Per client address.
	for i := range 3 {
		resp, _ := get(c, "/api/a")
		proxytest.WantAllowed(t, fmt.Sprintf("/api/ request %d", i+1), resp, proxytest.SearchPolicy, 2-i)
	}
	resp, body := get(c, "/api/a")
	proxytest.WantLimited(t, "/api/ request 4", resp, proxytest.SearchPolicy, 20)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || !strings.Contains(body, `"retry_after_ms":`) {
		t.Errorf("the 429 carries %q %q, want the agent's decision as JSON", ct, body)
	}
	if got := upstream.Hits("/api/a"); got != 3 {
		t.Fatalf("upstream saw %d requests, want 3", got)
	}
	logShows(`"GET /api/a HTTP/1.1" 429 obol=limited`)
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

	// Not limited: no fields.
	if resp, _ := get(c, "/other"); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
		t.Errorf("/other: status %d, RateLimit %q: want 200 without fields", resp.StatusCode, resp.Header.Get("RateLimit"))
	}

	// A stuck agent: the check times out (4 tries of 100 ms) and the
	// request goes on.
	agent.Pause(t)
	start := time.Now()
	resp, _ = get(c, "/api/a")
	took := time.Since(start)
	agent.Resume(t)
	if resp.StatusCode != http.StatusOK || upstream.Hits("/api/a") != 5 {
		t.Fatalf("agent stuck: status %d, upstream hits %d: want 200 and the request passed", resp.StatusCode, upstream.Hits("/api/a"))
	}
	if took > proxytest.StuckBound { // it gave up on the stuck agent instead of waiting for it
		t.Errorf("agent stuck: the request took %v, want about 4 × 100 ms", took)
	}
	logShows("obol: the check of api/search failed (status 504 from unix@" + agent.Socket + ")")
	t.Logf("agent stuck: request passed in %v", took.Round(time.Millisecond))

	// The agent down: requests pass and the log says why.
	agent.Stop(t)
	resp, _ = get(c, "/api/a")
	if resp.StatusCode != http.StatusOK || upstream.Hits("/api/a") != 6 {
		t.Fatalf("agent down: status %d, upstream hits %d: want 200 and the request passed", resp.StatusCode, upstream.Hits("/api/a"))
	}
	logShows(`"GET /api/a HTTP/1.1" 200 obol=open`)
	logShows("obol: the check of api/search failed (status 503 from unix@" + agent.Socket + ")")

	// The agent back, afresh: limits again.
	agent.Restart(t)
	for i := range 3 {
		resp, _ := get(c, "/api/a")
		proxytest.WantAllowed(t, fmt.Sprintf("agent back, request %d", i+1), resp, proxytest.SearchPolicy, 2-i)
	}
	resp, _ = get(c, "/api/a")
	proxytest.WantLimited(t, "agent back, request 4", resp, proxytest.SearchPolicy, 20)

	plain, checked := proxytest.Measure(t, c, base+"/other", base+"/tenant/bench", 300, "X-Tenant", "bench")
	t.Log(proxytest.Result("haproxy", "check", plain, checked))
}
