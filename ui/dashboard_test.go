package ui_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/obol-dev/obol/config"
)

// TestDashboard loads each view of the dashboard in headless Chromium
// against a real agent and checks what it shows against the API.
func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser; run without -short")
	}
	b := newBrowser(t)
	a := startAgent(t)

	b.step(t, "live shows a decision made through the socket within 2 s", func(t *testing.T) {
		b.run(t, "open the live view", chromedp.Navigate("about:blank"), chromedp.Navigate(a.base+"/#live"),
			chromedp.WaitVisible(`#live-table tr[data-resource="demo/search"] .total`))
		var before string
		b.run(t, "read the count", chromedp.Text(`tr[data-resource="demo/search"] .total`, &before))
		// 0, or 1 when the step runs again after Chromium went away.
		n, err := strconv.Atoi(before)
		if err != nil || n != 0 && n != 1 {
			t.Fatalf("demo/search shows %q granted before this step's decision, want 0 (1 when the step runs again)", before)
		}
		want := strconv.Itoa(n + 1)
		var d map[string]any
		if st := a.post(t, "/v1/request", map[string]any{"resource": "demo/search", "domain": "browser-test"}, &d); st != 200 || d["granted"] != 1.0 {
			t.Fatalf("POST /v1/request through the socket: %d %v", st, d)
		}
		start := time.Now()
		var shown string
		b.run(t, "wait for the decision on the page",
			chromedp.WaitVisible(`tr[data-resource="demo/search"] .total:not(:empty)`),
			chromedp.Poll(`document.querySelector('tr[data-resource="demo/search"] .total').textContent === "`+want+`"`, nil,
				chromedp.WithPollingTimeout(2*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)),
			chromedp.Text(`tr[data-resource="demo/search"] .total`, &shown))
		t.Logf("the decision showed in %v", time.Since(start).Round(10*time.Millisecond))
		// /v1/top is read every 2 s.
		b.run(t, "wait for the domain in /v1/top",
			chromedp.Poll(`!!document.querySelector('#top-list [data-resource="demo/search"] li[data-domain="browser-test"]')`, nil,
				chromedp.WithPollingTimeout(4*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
		b.run(t, "inspect the domain", chromedp.SetValue(`#inspect-resource`, "demo/search"),
			chromedp.SetValue(`#inspect-domain`, "browser-test"), chromedp.Click(`#inspect-form button`),
			chromedp.WaitVisible(`#inspect-out tr[data-tier="2"] .hits`))
		// The hits fall back to 0 as the window passes; the limits stay.
		var hits1, hits2 string
		b.run(t, "read the hits", chromedp.Text(`#inspect-out tr[data-tier="1"] .hits`, &hits1), chromedp.Text(`#inspect-out tr[data-tier="2"] .hits`, &hits2))
		if !strings.HasSuffix(hits1, " / 5") || !strings.HasSuffix(hits2, " / 50") {
			t.Errorf("the inspector shows hits %q and %q, want the limits of the built-in demo/search (5 and 50)", hits1, hits2)
		}
		if screenshots() {
			traffic(t, a, 4*time.Second) // something to draw in the sparklines
			b.run(t, "inspect the busy domain", chromedp.SetValue(`#inspect-domain`, "tenant-3"), chromedp.Click(`#inspect-form button`),
				chromedp.Sleep(700*time.Millisecond))
		}
		b.run(t, "scroll to the top", scrollTo("header"))
		b.screenshot(t, "live")
		b.run(t, "scroll to the inspector", scrollTo("#inspect-form"))
		b.screenshot(t, "live-inspector")
		if errs := b.consoleErrors(""); len(errs) > 0 {
			t.Errorf("console errors: %q", errs)
		}
	})

	b.step(t, "a pacer's row shows what /metrics says of it", func(t *testing.T) {
		var p map[string]any
		if st := a.post(t, "/v1/observe", map[string]any{"resource": "demo/upstream", "status": 200, "remaining": 4321}, &p); st != 200 || p["remaining"] != 4321.0 {
			t.Fatalf("POST /v1/observe through the socket: %d %v", st, p)
		}
		b.run(t, "open the live view", chromedp.Navigate("about:blank"), chromedp.Navigate(a.base+"/#live"),
			chromedp.WaitVisible(`#live-table tr[data-resource="demo/upstream"] .extra`))
		var shown string
		b.run(t, "wait for the pacer's status",
			chromedp.Poll(`document.querySelector('tr[data-resource="demo/upstream"] .extra').textContent.includes("4,321 left")`, nil,
				chromedp.WithPollingTimeout(3*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)),
			chromedp.Text(`tr[data-resource="demo/upstream"] .extra`, &shown))
		if !strings.HasPrefix(shown, "wait ") {
			t.Errorf("demo/upstream's row shows %q, want its wait, then 4,321 left", shown)
		}
		// Every kind's row says something of its own (the built-in config
		// has one resource of each kind): a kind the page does not know
		// would show an empty cell, as pacers once did.
		var extras map[string]string
		b.run(t, "read every row", chromedp.Evaluate(`Object.fromEntries([...document.querySelectorAll("#live-table tr[data-resource]")].map((tr) => [tr.children[1].textContent, tr.querySelector(".extra").textContent]))`, &extras))
		for kind, prefix := range map[string]string{"tiers": "", "gcra": "", "copies": "", "adaptive": "window ", "pacer": "wait "} {
			if x, ok := extras[kind]; !ok || x == "" || !strings.HasPrefix(x, prefix) {
				t.Errorf("the %s row's last cell is %q (present: %v), want something of its own", kind, x, ok)
			}
		}
		if errs := b.consoleErrors(""); len(errs) > 0 {
			t.Errorf("console errors: %q", errs)
		}
	})

	b.step(t, "cluster loads", func(t *testing.T) {
		b.run(t, "open the cluster view", chromedp.Navigate("about:blank"), chromedp.Navigate(a.base+"/#cluster"),
			chromedp.WaitVisible(`#peer-table tr[data-peer="node-a"]`),
			chromedp.WaitVisible(`#overshoot-table tr[data-resource="demo/search"]`))
		var drift string
		b.run(t, "read the drift", chromedp.Text(`#overshoot-table tr[data-resource="demo/search"] td:nth-of-type(2)`, &drift))
		// The built-in config: drift 0.05 (the default) of tier 1's limit of 5.
		if drift != "0.05 (0.25 hits)" {
			t.Errorf("configured drift of demo/search shown as %q, want 0.05 (0.25 hits)", drift)
		}
		b.screenshot(t, "cluster")
		if errs := b.consoleErrors(""); len(errs) > 0 {
			t.Errorf("console errors: %q", errs)
		}
	})

	var sharedURL, plotted string
	b.step(t, "the Penalties preset plots the rejections where /v1/simulate says", func(t *testing.T) {
		b.run(t, "run the preset", chromedp.Navigate("about:blank"), chromedp.Navigate(a.base+"/#sim"), chromedp.WaitVisible(`#plot-requests`),
			chromedp.Click(`[data-preset="penalties"]`),
			chromedp.Poll(`document.getElementById("sim-tiers").value === "10,1,1,0,40,10,10,50" && window.obolSim.lastReply && window.obolSim.lastRequest.resource.tiers === "10,1,1,0,40,10,10,50" && !!document.querySelector("#plot-requests")`, nil, chromedp.WithPollingTimeout(10*time.Second)))
		var reqJSON string
		var binS string
		b.run(t, "read the request", chromedp.Evaluate(`JSON.stringify(window.obolSim.lastRequest)`, &reqJSON),
			chromedp.AttributeValue(`#plot-requests`, "data-bin-s", &binS, nil), chromedp.Location(&sharedURL))
		var req struct {
			Resource map[string]any `json:"resource"`
			Requests []struct {
				AtMs int64 `json:"at_ms"`
			} `json:"requests"`
		}
		if err := json.Unmarshal([]byte(reqJSON), &req); err != nil {
			t.Fatal(err)
		}
		var sim struct {
			Decisions []struct {
				Granted int `json:"granted"`
			} `json:"decisions"`
		}
		if st := a.post(t, "/v1/simulate", json.RawMessage(reqJSON), &sim); st != 200 || len(sim.Decisions) != len(req.Requests) {
			t.Fatalf("POST /v1/simulate: %d, %d decisions for %d requests", st, len(sim.Decisions), len(req.Requests))
		}
		bin, _ := strconv.Atoi(binS)
		want := map[int]int{}
		total := 0
		for i, d := range sim.Decisions {
			if d.Granted == 0 {
				want[int(req.Requests[i].AtMs/1000)/bin]++
				total++
			}
		}
		if total == 0 {
			t.Fatal("the Penalties preset's traffic is never rejected: the test would prove nothing")
		}
		plotted = bars(t, b)
		got := map[int]int{}
		for _, f := range strings.Fields(plotted) {
			var i, g, r int
			fmt.Sscanf(f, "%d:%d/%d", &i, &g, &r)
			if r > 0 {
				got[i] = r
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("rejections plotted per %d s bin %v, /v1/simulate says %v", bin, got, want)
		}
		t.Logf("%d rejections in %d bins, as /v1/simulate says", total, len(want))
		b.screenshot(t, "simulator-form")
		b.run(t, "scroll to the plots", scrollTo("#sim-summary"))
		b.screenshot(t, "simulator")
		if errs := b.consoleErrors(""); len(errs) > 0 {
			t.Errorf("console errors: %q", errs)
		}
	})

	b.step(t, "a shared URL restores the same plot", func(t *testing.T) {
		if sharedURL == "" || plotted == "" {
			t.Skip("needs the Penalties run")
		}
		if !strings.Contains(sharedURL, "tiers=10%2C1%2C1%2C0%2C40%2C10%2C10%2C50") {
			t.Errorf("the URL %s does not carry the tiers", sharedURL)
		}
		b.run(t, "open the link", chromedp.Navigate("about:blank"), chromedp.Navigate(sharedURL),
			chromedp.WaitVisible(`#plot-requests`))
		if again := bars(t, b); again != plotted {
			t.Errorf("the link plots\n%s\nthe original\n%s", again, plotted)
		}
		b.run(t, "phone width", emulation.SetDeviceMetricsOverride(390, 844, 2, true), chromedp.Sleep(200*time.Millisecond))
		b.screenshot(t, "simulator-phone")
		b.run(t, "scroll to the plots", scrollTo("#plot-requests"))
		b.screenshot(t, "simulator-phone-plot")
		b.run(t, "dark", emulation.SetDeviceMetricsOverride(1280, 800, 1, false),
			emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}),
			chromedp.Navigate("about:blank"), chromedp.Navigate(sharedURL), chromedp.WaitVisible(`#plot-requests`), scrollTo("#sim-summary"))
		b.screenshot(t, "simulator-dark")
		b.run(t, "light", emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}))
		if errs := b.consoleErrors(""); len(errs) > 0 {
			t.Errorf("console errors: %q", errs)
		}
	})

	b.step(t, "the drift tuner shows the figure the endpoint returns", func(t *testing.T) {
		b.run(t, "open the tuner", chromedp.Navigate("about:blank"), chromedp.Navigate(a.base+"/#tuner"),
			chromedp.Poll(`!!(window.obolTuner.lastReply || window.obolTuner.lastError)`, nil, chromedp.WithPollingTimeout(60*time.Second)))
		var status int
		b.run(t, "read the outcome", chromedp.Evaluate(`window.obolTuner.lastError ? window.obolTuner.lastError.status : 200`, &status))
		if status != 200 {
			var msg string
			b.run(t, "read the error", chromedp.Evaluate(`String(window.obolTuner.lastError && window.obolTuner.lastError.message)`, &msg))
			t.Fatalf("the tuner's first simulation failed with status %d: %s", status, msg)
		}
		// The form's load is the whole cluster's; the endpoint takes it per node.
		var perNode float64
		b.run(t, "read the load sent", chromedp.Evaluate(`window.obolTuner.lastRequest.offered_per_s * window.obolTuner.lastRequest.nodes / +document.getElementById("t-offered").value`, &perNode))
		if math.Abs(perNode-1) > 1e-9 {
			t.Errorf("offered_per_s × nodes ÷ the form's load = %v, want 1 (the form's load is the whole cluster's)", perNode)
		}
		// A skewed load: the spread the page sends is one the endpoint takes.
		b.run(t, "simulate one hot node", chromedp.Evaluate(`window.obolTuner.lastReply = null`, nil),
			chromedp.SetValue(`#t-skew`, "hot", chromedp.ByQuery),
			chromedp.Click(`#tuner-form button[type=submit]`, chromedp.ByQuery),
			chromedp.Poll(`!!(window.obolTuner.lastReply || window.obolTuner.lastError)`, nil, chromedp.WithPollingTimeout(60*time.Second)))
		var skew string
		b.run(t, "read the request", chromedp.Evaluate(`window.obolTuner.lastError ? "error: " + window.obolTuner.lastError.message : window.obolTuner.lastRequest.skew`, &skew))
		if skew != "hot" {
			t.Fatalf("the tuner sent skew %q, want \"hot\"", skew)
		}
		var reqJSON, shown string
		b.run(t, "read the figure", chromedp.Evaluate(`JSON.stringify(window.obolTuner.lastRequest)`, &reqJSON),
			chromedp.AttributeValue(`#tuner-table tr[data-figure="worst_window_ratio"] td`, "data-value", &shown, nil))
		var rep map[string]any
		if st := a.post(t, "/v1/simulate/cluster", json.RawMessage(reqJSON), &rep); st != 200 {
			t.Fatalf("POST /v1/simulate/cluster: %d", st)
		}
		got, _ := strconv.ParseFloat(shown, 64)
		if want, ok := rep["worst_window_ratio"].(float64); !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("the page shows worst_window_ratio %v, the endpoint returns %v", shown, rep["worst_window_ratio"])
		}
		b.screenshot(t, "tuner")
		if errs := b.consoleErrors(""); len(errs) > 0 {
			t.Errorf("console errors: %q", errs)
		}
	})
}

// TestDashboardSweep runs the drift tuner's sweep in headless Chromium
// against a real agent and checks every plotted point against
// /v1/simulate/cluster. It has a browser and an agent of its own: the
// browser's time bound is not shared with TestDashboard's steps, whose
// default-sized tuner runs take most of it on a loaded machine under the
// race detector.
func TestDashboardSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser; run without -short")
	}
	b := newBrowser(t)
	a := startAgent(t)

	b.step(t, "the drift sweep plots the figures the endpoint returns at each drift", func(t *testing.T) {
		// A small cluster for a short time: 11 runs (10 drifts and
		// tick-only) of about 400 events each. Offered three times the
		// limit, tick-only shipping and the largest drift over-admit;
		// the small drifts do not. The form is filled in before the
		// tuner is shown, so that the run the view starts with is this
		// small one, not the default.
		b.run(t, "open the page", chromedp.Navigate("about:blank"), chromedp.Navigate(a.base+"/#live"), chromedp.WaitVisible(`#tab-tuner`))
		form := map[string]string{"t-nodes": "3", "t-sync": "250", "t-drift": "0.04", "t-delay": "2", "t-loss": "0",
			"t-limit": "50", "t-window": "1", "t-offered": "150", "t-duration": "2", "t-target": "2", "t-name": "api/search", "t-skew": "even"}
		acts := []chromedp.Action{}
		for id, v := range form {
			acts = append(acts, chromedp.SetValue("#"+id, v, chromedp.ByQuery))
		}
		acts = append(acts, chromedp.Click(`#tab-tuner`, chromedp.ByQuery), chromedp.WaitVisible(`#t-sweep`))
		b.run(t, "open the tuner", acts...)
		// A step run again after Chromium went away may find the last
		// attempt's sweep still running on the agent (one simulation at a
		// time: 429): the page's sweep is then asked again once it ends.
		var failed string
		for try := 0; ; try++ {
			b.run(t, "sweep", chromedp.Evaluate(`window.obolTuner.lastSweep = null; window.obolTuner.lastSweepError = null`, nil),
				chromedp.Click(`#t-sweep`, chromedp.ByQuery),
				chromedp.Poll(`!!(window.obolTuner.lastSweep || window.obolTuner.lastSweepError)`, nil, chromedp.WithPollingTimeout(60*time.Second)))
			b.run(t, "read the outcome", chromedp.Evaluate(`window.obolTuner.lastSweepError ? window.obolTuner.lastSweepError.status + " " + window.obolTuner.lastSweepError.message : ""`, &failed))
			if !strings.HasPrefix(failed, "429 ") || try == 30 {
				break
			}
			time.Sleep(time.Second) // no event says the agent's last simulation ended: its 429 says to retry
		}
		if failed != "" {
			t.Fatalf("the sweep failed: %s", failed)
		}
		plotted := sweepPlot(t, b)
		var req map[string]any
		if err := json.Unmarshal([]byte(plotted.Request), &req); err != nil {
			t.Fatal(err)
		}
		if req["target_overshoot"] != 0.02 || req["drift"] != 0.04 || req["nodes"] != 3.0 {
			t.Errorf("the page sent target_overshoot %v, drift %v, nodes %v; want the form's 0.02, 0.04 and 3", req["target_overshoot"], req["drift"], req["nodes"])
		}
		delete(req, "target_overshoot")
		// Every plotted point is what /v1/simulate/cluster returns for the
		// same body at that drift; the default drifts and the form's are
		// all there.
		worst := plotted.Figures["worst_window_ratio"]
		var drifts []string
		figs := map[string]map[string]any{}
		for _, pt := range worst.Points {
			drifts = append(drifts, pt[0])
			d, err := strconv.ParseFloat(pt[0], 64)
			if err != nil {
				t.Fatalf("a point's data-drift %q: %v", pt[0], err)
			}
			req["drift"] = d
			var rep map[string]any
			if st := a.post(t, "/v1/simulate/cluster", req, &rep); st != 200 {
				t.Fatalf("POST /v1/simulate/cluster at drift %v: %d", d, st)
			}
			figs[pt[0]] = rep
		}
		if got := strings.Join(drifts, " "); got != "0.005 0.01 0.02 0.03 0.04 0.05 0.075 0.1 0.15 0.2" {
			t.Fatalf("plotted drifts %s, want the default list and the form's 0.04", got)
		}
		for key, f := range plotted.Figures {
			if len(f.Points) != len(drifts) {
				t.Errorf("%s: %d points plotted, want %d", key, len(f.Points), len(drifts))
			}
			for _, pt := range f.Points {
				got, err := strconv.ParseFloat(pt[1], 64)
				if want, ok := figs[pt[0]][key].(float64); err != nil || !ok || got != want {
					t.Errorf("%s at drift %s: plotted %q, /v1/simulate/cluster returns %v", key, pt[0], pt[1], figs[pt[0]][key])
				}
			}
			got, err := strconv.ParseFloat(f.Tick, 64)
			if want, ok := figs["0.04"]["tick_only"].(map[string]any)[key].(float64); err != nil || !ok || got != want {
				t.Errorf("%s, tick-only: plotted %q, /v1/simulate/cluster returns %v", key, f.Tick, figs["0.04"]["tick_only"])
			}
		}
		if len(plotted.Figures) != 3 {
			t.Errorf("plots of %d figures, want worst_window_ratio, false_denials and bytes_per_node_s", len(plotted.Figures))
		}
		// The cheapest drift within the target: the endpoint's rule over
		// /v1/simulate/cluster's figures, the same on every plot and the
		// same as the sweep's own answer.
		want := cheapestDrift(drifts, figs, 0.02)
		if want == "" || want == drifts[len(drifts)-1] {
			t.Fatalf("the cheapest drift within 2%% is %q: the case should have one, and not the largest", want)
		}
		checkCheapest(t, plotted, want)
		if plotted.Server != want {
			t.Errorf("the sweep's cheapest is %q, /v1/simulate/cluster's figures say %s", plotted.Server, want)
		}
		b.run(t, "scroll to the sweep", scrollTo("#sweep-summary"))
		b.screenshot(t, "tuner-sweep")
		// Export YAML: the resource with that drift, in the config's format.
		var text string
		b.run(t, "export", chromedp.Click(`#t-export`, chromedp.ByQuery), chromedp.WaitVisible(`#tuner-yaml`), chromedp.Text(`#tuner-yaml`, &text))
		cfg, err := config.Parse([]byte(text))
		if err != nil {
			t.Fatalf("the exported YAML does not load: %v\n%s", err, text)
		}
		res := cfg.Resources["api/search"]
		if res == nil || res.Drift == nil || strconv.FormatFloat(*res.Drift, 'g', -1, 64) != want || res.Kind != config.KindTiers || len(res.Tiers) != 1 || res.Tiers[0].Limit != 50 {
			t.Errorf("the exported YAML is not api/search, tiers 50 per second, drift %s:\n%s", want, text)
		}
		// A looser target moves the mark without another sweep.
		b.run(t, "loosen the target", chromedp.Evaluate(`(() => { const i = document.getElementById("t-target"); i.value = "10"; i.dispatchEvent(new Event("input")); })()`, nil))
		checkCheapest(t, sweepPlot(t, b), cheapestDrift(drifts, figs, 0.10))
		if errs := b.consoleErrors(""); len(errs) > 0 {
			t.Errorf("console errors: %q", errs)
		}
	})
}

// sweepPlotted is what the drift sweep's plots show.
type sweepPlotted struct {
	Figures map[string]struct {
		Points   [][2]string // [data-drift, data-value], in the order drawn
		Tick     string      // the tick-only point's data-value
		Cheapest []string    // the data-drift of the points marked cheapest
	}
	Request string // the body the page sent, JSON
	Server  string // the sweep's cheapest drift, "" for none
}

// sweepPlot reads the sweep's plots from the page.
func sweepPlot(t *testing.T, b *browser) sweepPlotted {
	t.Helper()
	var js string
	b.run(t, "read the plots", chromedp.Evaluate(`JSON.stringify({
		Figures: Object.fromEntries([...document.querySelectorAll("#sweep-plots svg[data-figure]")].map((s) => [s.dataset.figure, {
			Points: [...s.querySelectorAll("circle[data-drift]")].map((c) => [c.dataset.drift, c.dataset.value]),
			Tick: s.querySelector("[data-tick-only]").dataset.value,
			Cheapest: [...s.querySelectorAll("[data-cheapest]")].map((c) => c.dataset.drift)}])),
		Request: JSON.stringify(window.obolTuner.lastSweepRequest),
		Server: window.obolTuner.lastSweep.cheapest ? String(window.obolTuner.lastSweep.cheapest.drift) : ""})`, &js))
	var p sweepPlotted
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatalf("the plots: %v: %s", err, js)
	}
	return p
}

// cheapestDrift is the endpoint's rule over figs (/v1/simulate/cluster's
// replies by drift; drifts ascending): of the drifts whose worst window is
// within 1 + target times the limit, the one with the fewest bytes per
// node, a tie going to the larger; "" for none.
func cheapestDrift(drifts []string, figs map[string]map[string]any, target float64) string {
	best, bestBytes := "", 0.0
	for _, d := range drifts {
		w, by := figs[d]["worst_window_ratio"].(float64), figs[d]["bytes_per_node_s"].(float64)
		if w <= 1+target+1e-9 && (best == "" || by <= bestBytes) {
			best, bestBytes = d, by
		}
	}
	return best
}

// checkCheapest checks that every plot marks want, and only it, cheapest.
func checkCheapest(t *testing.T, p sweepPlotted, want string) {
	t.Helper()
	for key, f := range p.Figures {
		if len(f.Cheapest) != 1 || f.Cheapest[0] != want {
			t.Errorf("%s: marked cheapest %v, want drift %s", key, f.Cheapest, want)
		}
	}
}

// bars returns the request plot's bins as "i:granted/rejected" fields.
func bars(t *testing.T, b *browser) string {
	t.Helper()
	var s string
	b.run(t, "read the plot", chromedp.Evaluate(`[...document.querySelectorAll("#plot-requests g[data-bin]")].map(g => g.dataset.bin + ":" + g.dataset.granted + "/" + g.dataset.rejected).join(" ")`, &s))
	return s
}

// traffic makes decisions through the socket for d, a few domains at
// different rates, some of them over their limit. The browser samples the
// agent's figures on its own timers, in real time: the traffic is spread
// over real time on purpose, in rounds 50 ms apart.
func traffic(t *testing.T, a *agent, d time.Duration) {
	t.Helper()
	round := time.NewTicker(50 * time.Millisecond)
	defer round.Stop()
	end := time.After(d)
	for i := 0; ; i++ {
		for j, n := range []int{1, 3, 9} { // requests per 50 ms for tenant-1, -2, -3
			for k := 0; k < n && (i%4 == 0 || j > 0); k++ {
				a.post(t, "/v1/request", map[string]any{"resource": "demo/search", "domain": fmt.Sprintf("tenant-%d", j+1)}, nil)
			}
		}
		a.post(t, "/v1/request", map[string]any{"resource": "demo/export", "domain": "batch-job"}, nil)
		select {
		case <-round.C:
		case <-end:
			return
		}
	}
}

// scrollTo scrolls the element sel names to the top of the viewport.
func scrollTo(sel string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).scrollIntoView({block: "start"})`, sel), nil)
}
