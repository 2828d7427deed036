package k8stest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// dashboardFile is the Grafana dashboard users import.
var dashboardFile = filepath.Join("..", "sidecar", "grafana", "obol.json")

// dashboard is the part of Grafana's dashboard model the checks read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// promWords are the PromQL functions, aggregations and keywords the
// dashboard may use; every other identifier in a query is a metric.
var promWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "topk": true, "bottomk": true,
	"rate": true, "irate": true, "increase": true, "delta": true, "deriv": true,
	"histogram_quantile": true, "clamp_min": true, "clamp_max": true, "max_over_time": true, "min_over_time": true,
	"avg_over_time": true, "abs": true, "vector": true, "scalar": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	grafanaVar   = regexp.MustCompile(`\$(\w+)`)
	labelValues  = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\s*\)$`)
)

// metricsOf returns the metric names a PromQL query reads: what is left
// once strings, label matchers, ranges, groupings, numbers and the known
// functions and keywords are taken out.
func metricsOf(expr string) []string {
	s := promString.ReplaceAllString(expr, " ")
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	var out []string
	for _, id := range promIdent.FindAllString(s, -1) {
		if !promWords[id] {
			out = append(out, id)
		}
	}
	return out
}

// families are the metric families of a scrape, name → type.
type families map[string]string

// has reports whether a query may name metric: a family, or a histogram's
// or summary's _bucket, _sum or _count series.
func (f families) has(metric string) bool {
	if _, ok := f[metric]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(metric, suffix); ok && (f[base] == "histogram" || f[base] == "summary" && suffix != "_bucket") {
			return true
		}
	}
	return false
}

// parseFamilies reads the # TYPE lines of a scrape in the text format,
// keeping only families that have at least one sample.
func parseFamilies(text string) families {
	f := families{}
	types := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name, typ, ok := strings.Cut(rest, " "); ok {
				types[name] = typ
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line+" ", "{ ")]
		for base, typ := range types {
			if name == base || strings.HasPrefix(name, base+"_") && typ != "counter" && typ != "gauge" {
				f[base] = typ
			}
		}
		if _, ok := types[name]; ok {
			f[name] = types[name]
		}
	}
	return f
}

// checkDashboard returns every problem of the dashboard d against the
// families a scrape exported.
func checkDashboard(d dashboard, fams families) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if d.Title == "" || d.UID == "" {
		bad("the dashboard has no title or uid")
	}
	vars := map[string]bool{"__rate_interval": true, "__range": true, "__interval": true}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		lv := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
		if lv == nil {
			bad("variable %s: query %v is not label_values(metric, label)", v.Name, q["query"])
			continue
		}
		for _, m := range metricsOf(lv[1]) {
			if !fams.has(m) {
				bad("variable %s: %s is not a metric the agent exports", v.Name, m)
			}
		}
	}
	if !vars["datasource"] {
		bad("no datasource variable: the dashboard would be tied to one Prometheus")
	}
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			bad("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			bad("panel %q: gridPos %+v off the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			bad("panel %q: its datasource is not the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			bad("panel %q: no query", p.Title)
		}
		for _, tg := range p.Targets {
			ms := metricsOf(tg.Expr)
			if len(ms) == 0 {
				bad("panel %q, query %s: names no metric: %s", p.Title, tg.RefID, tg.Expr)
			}
			for _, m := range ms {
				if !fams.has(m) {
					bad("panel %q, query %s: %s is not a metric the agent exports", p.Title, tg.RefID, m)
				}
				used[strings.TrimSuffix(m, "_bucket")] = true
			}
			for _, v := range grafanaVar.FindAllStringSubmatch(tg.Expr, -1) {
				if !vars[v[1]] {
					bad("panel %q, query %s: $%s is not a variable of the dashboard", p.Title, tg.RefID, v[1])
				}
			}
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") || strings.Count(tg.Expr, "{") != strings.Count(tg.Expr, "}") {
				bad("panel %q, query %s: unbalanced brackets: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
	}
	for _, m := range []string{"obol_decisions_total", "obol_decision_duration_seconds", "obol_tracked_keys", "obol_holds",
		"obol_gossip_bytes_total", "obol_gossip_packets_total", "obol_cluster_merge_lag_seconds", "obol_cluster_live_nodes", "obol_config_reloads_total"} {
		if !used[m] {
			bad("no panel shows %s", m)
		}
	}
	return errs
}

// TestDashboard checks the Grafana dashboard against what a real pair of
// agents in a mesh exports: every query names metrics that exist (after
// decisions, a merge and a reload, so that every family has samples),
// every variable it uses is defined, and the families the dashboard is for
// all have a panel.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if len(d.Panels) == 0 {
		t.Fatalf("%s: no panels", dashboardFile)
	}
	fams := scrapeMesh(t)
	for _, e := range checkDashboard(d, fams) {
		t.Error(e)
	}
}

// TestDashboardChecksFail: the checks catch a misspelt metric, a metric
// the agent does not export, an undefined variable and a missing family.
func TestDashboardChecksFail(t *testing.T) {
	fams := families{"obol_decisions_total": "counter", "obol_decision_duration_seconds": "histogram"}
	if got := metricsOf(`histogram_quantile(0.99, sum by (le) (rate(obol_decision_duration_seconds_bucket{job=~"$job", x="a b"}[$__rate_interval]))) / on(instance) up`); !slices.Equal(got, []string{"obol_decision_duration_seconds_bucket", "up"}) {
		t.Errorf("metricsOf = %q", got)
	}
	mk := func(expr string) dashboard {
		var d dashboard
		d.Title, d.UID = "t", "u"
		d.Templating.List = append(d.Templating.List, struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		}{Name: "datasource", Type: "datasource"})
		p := panel{ID: 1, Type: "timeseries", Title: "p"}
		p.GridPos.W, p.GridPos.H = 12, 8
		p.Datasource = &struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		}{"prometheus", "${datasource}"}
		p.Targets = append(p.Targets, struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		}{"A", expr})
		d.Panels = []panel{p}
		return d
	}
	d := mk(`rate(obol_decisions_total[5m])`)
	for _, q := range []string{`label_values(obol_decision_total, job)`, `query_result(obol_decisions_total)`} {
		d.Templating.List = append(d.Templating.List, struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		}{Name: "job", Type: "query", Query: map[string]any{"query": q}})
	}
	errs := checkDashboard(d, fams)
	for _, want := range []string{"variable job: obol_decision_total is not a metric", "is not label_values(metric, label)"} {
		if !strings.Contains(fmt.Sprint(errs), want) {
			t.Errorf("variables: no error says %q; got %v", want, errs)
		}
	}
	for expr, want := range map[string]string{
		`rate(obol_decision_total[5m])`:                    "obol_decision_total is not a metric",
		`sum(up{job="obol"})`:                              "up is not a metric",
		`rate(obol_decisions_total{job=~"$job"}[5m])`:      "$job is not a variable",
		`sum(rate(obol_decisions_total[5m])`:               "unbalanced",
		`rate(obol_decisions_total[5m])`:                   "no panel shows obol_holds",
		`histogram_quantile(0.9, obol_decisions_bucket)`:   "obol_decisions_bucket is not a metric",
		`obol_decision_duration_seconds_count + vector(1)`: "no panel shows obol_tracked_keys",
	} {
		errs := checkDashboard(mk(expr), fams)
		found := false
		for _, e := range errs {
			found = found || strings.Contains(e.Error(), want)
		}
		if !found {
			t.Errorf("%s: no error says %q; got %v", expr, want, errs)
		}
	}
}

// meshConfig has a resource of each kind the dashboard shows.
const meshConfig = `resources:
  api/requests: {kind: gcra, burst: 20, count: 10, period: 1s}
  jobs/exports: {kind: copies, domain_limit: 2, global_limit: 10}
  auth/login: {kind: adaptive, min_window: 5, max_window: 50}
`

// startAgent runs the agent with args and returns it once it has logged
// that it started, with the fields of its start lines (the gossip line's
// and the listeners').
func startAgent(t *testing.T, bin string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	fields := map[string]any{}
	started := make(chan error, 1)
	go func() {
		var all bytes.Buffer
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		sent := false
		for sc.Scan() {
			all.Write(sc.Bytes())
			all.WriteByte('\n')
			for _, l := range logLines(sc.Bytes()) {
				if sent {
					continue
				}
				switch l["msg"] {
				case "obol agent gossip started":
					fields["gossip"] = l["gossip"]
				case "obol agent started":
					fields["http"], fields["status_http"] = l["http"], l["status_http"]
					sent = true
					started <- nil
				}
			}
		}
		if !sent {
			started <- fmt.Errorf("the agent exited before it started:\n%s", all.String())
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not start in 20s")
	}
	return fields
}

// scrapeMesh runs two agents in a mesh on loopback, makes every family the
// dashboard reads appear (decisions, an admit, a merge of the peer's
// counts, a reload), and returns the families both export.
func scrapeMesh(t *testing.T) families {
	t.Helper()
	bin := agentBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(meshConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--config", cfg, "--socket", "off", "--http", "127.0.0.1:0", "--status-http", "127.0.0.1:0", "--gossip-bind", "127.0.0.1:0", "--sync-interval", "50ms"}
	a := startAgent(t, bin, append(common, "--node-name", "a")...)
	b := startAgent(t, bin, append(common, "--node-name", "b", "--join", fmt.Sprint(a["gossip"]))...)
	c := &http.Client{Timeout: 5 * time.Second}
	post := func(addr any, path, body string) {
		t.Helper()
		resp, err := c.Post(fmt.Sprintf("http://%v%s", addr, path), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s %s: %d %s", path, body, resp.StatusCode, out)
		}
	}
	scrape := func(addr any) string {
		t.Helper()
		resp, err := c.Get(fmt.Sprintf("http://%v/metrics", addr))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return string(out)
	}
	for range 25 {
		post(a["http"], "/v1/request", `{"resource":"api/requests","domain":"tenant-1"}`)
	}
	post(a["http"], "/v1/admit", `{"resource":"auth/login"}`)
	post(b["http"], "/v1/config/reload", ``)
	// b merges a's counts within a few sync ticks.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	merged := regexp.MustCompile(`(?m)^obol_cluster_merge_lag_seconds_count [1-9]`)
	for !merged.MatchString(scrape(b["status_http"])) {
		select {
		case <-ctx.Done():
			t.Fatalf("b never merged a's counts:\n%s", scrape(b["status_http"]))
		case <-time.After(20 * time.Millisecond):
		}
	}
	fams := parseFamilies(scrape(a["status_http"]))
	for k, v := range parseFamilies(scrape(b["status_http"])) {
		fams[k] = v
	}
	return fams
}
