package ui_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// counters returns the lines of the agent's /metrics (read through the
// socket) that a cross-site request would move: decisions, sessions,
// config reloads.
func (a *agent) counters(t *testing.T) string {
	t.Helper()
	resp, err := a.socket.Get("http://obol/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		for _, p := range []string{"obol_decisions_total", "obol_sessions ", "obol_config_reload"} {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

// hostilePage is a page of another site (another local origin) that drives
// the browser against the agent at base: a text/plain form spending a
// token, no-cors fetches opening a day-long session and reloading the
// config. It tells the test it is done in the title.
const hostilePage = `<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="AGENT/v1/request">
<input name='{"resource":"demo/search","domain":"vic' value='tim"}'>
</form>
<script>
(async () => {
  const sent = new Promise(ok => document.querySelector("iframe").addEventListener("load", ok, {once: true}));
  document.getElementById("f").submit();
  await sent;
  await fetch("AGENT/v1/sessions", {method: "POST", mode: "no-cors", body: '{"ttl_ms": 86400000}'}).catch(() => {});
  await fetch("AGENT/v1/config/reload", {method: "POST", mode: "no-cors"}).catch(() => {});
  await fetch("AGENT/v1/request", {method: "POST", mode: "no-cors", body: new Blob(['{"resource":"demo/search","domain":"victim"}'])}).catch(() => {});
  document.title = "done";
})();
</script></body></html>`

// TestBrowserCrossSiteRefused drives headless Chromium as a user of the
// agent's host would be driven by a page of another site: the page, served
// from another local origin, submits a text/plain form and no-cors
// fetches to the agent's loopback port; then, after a DNS rebinding
// (evil.example resolving to 127.0.0.1, by Chromium's host resolver
// rules), a page of evil.example on the agent's port reads /v1/config and
// /v1/top. Each is refused: the agent's counters do not move, and the
// rebound reads get 403. The dashboard's own request, made from the
// agent's page, is served (the control).
func TestBrowserCrossSiteRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser; run without -short")
	}
	b := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1"))
	a := startAgent(t)
	port := a.base[strings.LastIndexByte(a.base, ':')+1:]

	page := strings.ReplaceAll(hostilePage, "AGENT", a.base)
	hostile := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0") // another port: another origin, the same site
	if err != nil {
		t.Fatal(err)
	}
	hostile.Listener = ln
	hostile.Start()
	t.Cleanup(hostile.Close)

	before := a.counters(t)
	if !strings.Contains(before, "obol_sessions") {
		t.Fatalf("the metrics lack the counters the test compares:\n%s", before)
	}
	b.run(t, "the hostile page's form and fetches", chromedp.Navigate(hostile.URL),
		chromedp.Poll(`document.title === "done"`, nil, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	if after := a.counters(t); after != before {
		t.Errorf("a page of another site moved the agent's counters:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	var statuses []int
	b.run(t, "the rebound page's reads", chromedp.Navigate("http://evil.example:"+port+"/"),
		chromedp.Evaluate(`Promise.all(["/v1/config", "/v1/top?resource=demo/search"].map(p => fetch(p).then(r => r.status)))`, &statuses,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if fmt.Sprint(statuses) != "[403 403]" {
		t.Errorf("after DNS rebinding, /v1/config and /v1/top answered %v, want [403 403]", statuses)
	}
	if after := a.counters(t); after != before {
		t.Errorf("the rebound page moved the agent's counters:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// The control: the agent's own page spends a token.
	var status int
	b.run(t, "the dashboard's own request", chromedp.Navigate(a.base+"/"),
		chromedp.Evaluate(`fetch("/v1/request", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"resource":"demo/search","domain":"victim"}'}).then(r => r.status)`, &status,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status != 200 {
		t.Fatalf("the dashboard's own request: %d, want 200", status)
	}
	if after := a.counters(t); after == before {
		t.Error("the dashboard's own request did not move the decision counter: the comparison above proves nothing")
	}
	b.consoleErrors("") // the refused requests are logged as failed loads: expected here
}
