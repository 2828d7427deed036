package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/obol-dev/obol/api"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// commands.go is what each operator command asks the agent and prints
// (command.go runs them).

var statusCommand = &command{
	name:    "status",
	summary: "version, uptime, config in force (version, hash, file), listeners, peers",
	help: `Shows the agent's version and build, how long it has run, the config in
force (its version, the SHA-256 of the normalized config as GET /v1/config
shows it, and the file it came from), its listeners with their open
connections and caps, and its peers. It asks GET /v1/status and GET
/v1/peers; --json prints the first with "peers" added. An agent that
answers but is not ready (starting or stopping) exits 1.`,
	run: runStatus,
}

var topCommand = &command{
	name:    "top",
	args:    []string{"RESOURCE"},
	summary: "the domains with the most rejections (or grants) of RESOURCE in the last minute",
	help: `Lists the domains of RESOURCE with the most rejections (--by granted:
grants) over the last minute, the heaviest first, from GET /v1/top. A
count may be above the true count by at most its ERROR (0 while the
agent had room for every domain). Counts are this agent's own decisions,
not the mesh's; peeks are not counted.`,
	flags: func(fs *flag.FlagSet, o *cmdOptions) {
		fs.StringVar(&o.by, "by", "rejected", "rank by rejected or granted")
		fs.IntVar(&o.n, "n", 20, "how many domains to list (the agent lists at most 100)")
	},
	run: runTop,
}

var peersCommand = &command{
	name:    "peers",
	summary: "this node and the members of its mesh: address, state, last sync",
	help: `Lists this node, then every member of its mesh, from GET /v1/peers: the
name, the gossip address (alone: the agent's own address), the state
(alive, suspect, dead, left), the age of its last sync packet and the
gossip bytes exchanged with it.`,
	run: runPeers,
}

var checkCommand = &command{
	name:    "check",
	args:    []string{"RESOURCE", "DOMAIN"},
	summary: "would a request of RESOURCE for DOMAIN be granted now? a peek: spends nothing",
	help: `Asks GET /v1/check whether a request of RESOURCE (kind tiers or gcra) for
DOMAIN would be granted now, and shows the RateLimit fields and, on a
rejection, when to retry. By default it is a peek (copies 0): it spends
nothing, counts nowhere (not in /metrics' decisions, not in top), and says
whether a request of one would be granted. --copies N asks for N as a real
request does: granted, they are spent. Exits 0 granted, 4 rejected.`,
	flags: func(fs *flag.FlagSet, o *cmdOptions) {
		fs.IntVar(&o.copies, "copies", 0, "copies to ask for: 0, the default, is a peek that spends nothing; N ≥ 1 spends N when granted")
	},
	run: runCheck,
}

var reloadCommand = &command{
	name:    "reload",
	summary: "re-read the config file, as SIGHUP does; a bad one is refused and the old stays",
	help: `Asks POST /v1/config/reload: the agent re-reads its --config file, as on
SIGHUP. A good file is in force at once, counts and holds kept; the
command lists what changed. A bad one is refused, every problem listed,
and the config in force stays (exit 1), as for an agent with no config
file to re-read.`,
	run: runReload,
}

var configCommand = &command{
	name:    "config",
	summary: "the config in force, normalized, as JSON; secret values redacted",
	help: `Prints the config in force, normalized (defaults filled in, compact tiers
expanded), from GET /v1/config: as indented JSON, which the agent reads
back (--check-config FILE); --json adds its version: {"version", "config"}.
The config holds no secret: the gossip key and the bearer token are files,
named by their paths. As a guard, the value of any member named like a
secret (secret, token, password, credential, private or API key) that is
not a path (_file, _path, _dir) is printed as "REDACTED".`,
	run: runConfig,
}

// agentStatus is GET /v1/status's reply (the api package's own type),
// with the peers status adds from GET /v1/peers.
type agentStatus struct {
	api.StatusReply
	Peers []api.PeerReply `json:"peers,omitempty"`
}

// notReadyError: status found the agent answering but not ready.
var errNotReady = errors.New("the agent answers but is not ready: it is starting or stopping (GET /readyz answers 503)")

func runStatus(c *cmdRun, _ []string) error {
	var st agentStatus
	raw, err := c.agent.getJSON(c.ctx, "/v1/status", &st)
	var ae *answerError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound && ae.code == "not_found" {
		return statusOfOlder(c)
	}
	if err != nil {
		return err
	}
	var peers struct {
		Peers json.RawMessage `json:"peers"`
	}
	if _, err := c.agent.getJSON(c.ctx, "/v1/peers", &peers); err != nil {
		return err
	}
	if err := json.Unmarshal(peers.Peers, &st.Peers); err != nil {
		return &answerError{status: 200, code: "bad_reply", message: fmt.Sprintf("GET /v1/peers: %v", err)}
	}
	if c.json {
		out, err := withMember(raw, "peers", peers.Peers)
		if err != nil {
			return &answerError{status: 200, code: "bad_reply", message: fmt.Sprintf("GET /v1/status: %v", err)}
		}
		writeJSONLine(c.out, out)
	} else {
		printStatus(c.out, &st)
	}
	if !st.Ready {
		return errNotReady
	}
	return nil
}

// statusOfOlder composes the status of an agent that has no GET
// /v1/status (a release before it) from what it has: /readyz, /v1/config
// (the version and the hash of its config member), /v1/peers (the node's
// name) and /metrics (process_start_time_seconds, for the uptime).
func statusOfOlder(c *cmdRun) error {
	st := agentStatus{StatusReply: api.StatusReply{Version: "unknown", Revision: "unknown", GoVersion: "unknown"}}
	ready, err := c.agent.do(c.ctx, http.MethodGet, "/readyz")
	if err != nil {
		return err
	}
	st.Ready = ready.status == http.StatusOK
	var cfg struct {
		Version int64           `json:"version"`
		Config  json.RawMessage `json:"config"`
	}
	if _, err := c.agent.getJSON(c.ctx, "/v1/config", &cfg); err != nil {
		return err
	}
	sum := sha256.Sum256(cfg.Config)
	st.ConfigVersion, st.ConfigSHA256 = cfg.Version, hex.EncodeToString(sum[:])
	var res struct {
		Resources map[string]json.RawMessage `json:"resources"`
	}
	if json.Unmarshal(cfg.Config, &res) == nil {
		st.Resources = len(res.Resources)
	}
	var peers struct {
		Peers []api.PeerReply `json:"peers"`
	}
	if _, err := c.agent.getJSON(c.ctx, "/v1/peers", &peers); err != nil {
		return err
	}
	st.Peers = peers.Peers
	for _, p := range st.Peers {
		if p.Self {
			st.Node = p.Name
		}
	}
	if m, err := c.agent.call(c.ctx, http.MethodGet, "/metrics"); err == nil {
		if start, ok := seriesValue(m.body, "process_start_time_seconds"); ok {
			started := time.UnixMilli(int64(start * 1000))
			st.StartedAtMs, st.UptimeMs = started.UnixMilli(), max(0, time.Since(started).Milliseconds())
		}
	}
	if c.json {
		b, _ := json.Marshal(st)
		writeJSONLine(c.out, b)
	} else {
		printStatus(c.out, &st)
		fmt.Fprintln(c.out, "(the agent has no GET /v1/status, an earlier release: its version and listeners are unknown)")
	}
	if !st.Ready {
		return errNotReady
	}
	return nil
}

// seriesValue returns the value of an unlabelled series in Prometheus's
// text format.
func seriesValue(text []byte, name string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// withMember returns the JSON object obj with the member name: v added
// last, its other members as they were.
func withMember(obj []byte, name string, v json.RawMessage) ([]byte, error) {
	obj = bytes.TrimSpace(obj)
	if !json.Valid(obj) || len(obj) < 2 || obj[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	inner := bytes.TrimSpace(obj[1 : len(obj)-1])
	out := append([]byte{'{'}, inner...)
	if len(inner) > 0 {
		out = append(out, ',')
	}
	key, _ := json.Marshal(name)
	out = append(append(append(out, key...), ':'), v...)
	return append(out, '}'), nil
}

// printStatus prints st for a person.
func printStatus(w io.Writer, st *agentStatus) {
	build := "obol agent " + printable(st.Version)
	var extra []string
	if st.Revision != "" && st.Revision != "unknown" {
		extra = append(extra, "revision "+printable(st.Revision))
	}
	if st.GoVersion != "" && st.GoVersion != "unknown" {
		extra = append(extra, printable(st.GoVersion))
	}
	if len(extra) > 0 {
		build += " (" + strings.Join(extra, ", ") + ")"
	}
	fmt.Fprintln(w, build)
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-10s %s\n", label, fmt.Sprintf(format, args...))
	}
	line("node", "%s", printable(st.Node))
	if st.Ready {
		line("ready", "yes")
	} else {
		line("ready", "no: starting or stopping")
	}
	if st.StartedAtMs > 0 {
		line("uptime", "%s, since %s", millis(st.UptimeMs), time.UnixMilli(st.StartedAtMs).UTC().Format(time.RFC3339))
	} else {
		line("uptime", "unknown")
	}
	cfg := fmt.Sprintf("version %d, %d resource%s, sha256 %s", st.ConfigVersion, st.Resources, plural1(st.Resources), st.ConfigSHA256)
	if st.ConfigSource != "" {
		cfg += ", from " + printable(st.ConfigSource)
	}
	line("config", "%s", cfg)
	for i, l := range st.Listeners {
		label := ""
		if i == 0 {
			label = "listeners"
		}
		s := printable(l.Name) + " " + printable(l.Address)
		if l.Connections != nil && l.MaxConnections != nil {
			s += fmt.Sprintf(", %d of %d connections", *l.Connections, *l.MaxConnections)
		}
		line(label, "%s", s)
	}
	line("peers", "%s", peerSummary(st.Peers))
}

// peerSummary is "none: the agent runs alone", or how many peers are in
// each state.
func peerSummary(peers []api.PeerReply) string {
	states := map[string]int{}
	var order []string
	n := 0
	for _, p := range peers {
		if p.Self {
			continue
		}
		n++
		if states[p.State] == 0 {
			order = append(order, p.State)
		}
		states[p.State]++
	}
	if n == 0 {
		return "none: the agent runs alone, or has not met its mesh yet"
	}
	var parts []string
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%d %s", states[s], printable(s)))
	}
	return fmt.Sprintf("%d (%s); agent peers lists them", n, strings.Join(parts, ", "))
}

func plural1(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// topReply is GET /v1/top's reply.
type topReply struct {
	Resource string `json:"resource"`
	By       string `json:"by"`
	WindowMs int64  `json:"window_ms"`
	Total    uint64 `json:"total"`
	Domains  []struct {
		Domain     string `json:"domain"`
		Count      uint64 `json:"count"`
		ErrorBound uint64 `json:"error_bound"`
	} `json:"domains"`
}

func runTop(c *cmdRun, args []string) error {
	q := url.Values{"resource": {args[0]}, "by": {c.opts.by}, "n": {strconv.Itoa(c.opts.n)}}
	var top topReply
	raw, err := c.agent.getJSON(c.ctx, "/v1/top?"+q.Encode(), &top)
	if err != nil {
		return err
	}
	if c.json {
		writeJSONLine(c.out, raw)
		return nil
	}
	what := map[string]string{"rejected": "rejections", "granted": "grants"}[top.By]
	if what == "" {
		what = printable(top.By)
	}
	if len(top.Domains) == 0 {
		fmt.Fprintf(c.out, "no %s of %s in the last %s\n", what, printable(top.Resource), millis(top.WindowMs))
		return nil
	}
	fmt.Fprintf(c.out, "%s of %s in the last %s: %d in all\n", what, printable(top.Resource), millis(top.WindowMs), top.Total)
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "COUNT\tERROR\tDOMAIN\n")
	bounded := false
	for _, d := range top.Domains {
		fmt.Fprintf(tw, "%d\t%d\t%s\n", d.Count, d.ErrorBound, printable(d.Domain))
		bounded = bounded || d.ErrorBound > 0
	}
	tw.Flush()
	if bounded {
		fmt.Fprintln(c.out, "(a count is at most ERROR above the true count)")
	}
	return nil
}

func runPeers(c *cmdRun, _ []string) error {
	var peers struct {
		Peers []api.PeerReply `json:"peers"`
	}
	raw, err := c.agent.getJSON(c.ctx, "/v1/peers", &peers)
	if err != nil {
		return err
	}
	if c.json {
		writeJSONLine(c.out, raw)
		return nil
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "NAME\tADDRESS\tSTATE\tLAST SYNC\tBYTES IN\tBYTES OUT\n")
	for _, p := range peers.Peers {
		name, sync := printable(p.Name), millis(p.LastSyncAgeMs)+" ago"
		switch {
		case p.Self:
			name, sync = name+" (this node)", "-"
		case p.LastSyncAgeMs < 0:
			sync = "never"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", name, printable(p.Address), printable(p.State), sync, p.BytesIn, p.BytesOut)
	}
	return tw.Flush()
}

// checkResult is what check prints with --json.
type checkResult struct {
	Resource string `json:"resource"`
	Domain   string `json:"domain"`
	Copies   int    `json:"copies"`
	Peek     bool   `json:"peek"`
	Granted  bool   `json:"granted"`
	Status   int    `json:"status"`
	// RetryAfterS is the Retry-After of a rejection, whole seconds; absent
	// when granted, or when no wait would do.
	RetryAfterS     *int64          `json:"retry_after_s,omitempty"`
	RateLimitPolicy string          `json:"ratelimit_policy,omitempty"`
	RateLimit       string          `json:"ratelimit,omitempty"`
	Decision        json.RawMessage `json:"decision,omitempty"` // a rejection's body
}

// rejectedError: check's answer was a rejection (exit 4), already printed.
type rejectedError struct{ resource, domain string }

func (e *rejectedError) Error() string {
	return fmt.Sprintf("%s for %s: rejected", e.resource, e.domain)
}

func runCheck(c *cmdRun, args []string) error {
	res, dom := args[0], args[1]
	q := url.Values{"resource": {res}, "domain": {dom}, "copies": {strconv.Itoa(c.opts.copies)}}
	ans, err := c.agent.call(c.ctx, http.MethodGet, "/v1/check?"+q.Encode(), http.StatusNoContent, http.StatusTooManyRequests)
	if err != nil {
		return err
	}
	r := checkResult{Resource: res, Domain: dom, Copies: c.opts.copies, Peek: c.opts.copies == 0,
		Granted: ans.status == http.StatusNoContent, Status: ans.status,
		RateLimitPolicy: ans.header.Get("RateLimit-Policy"), RateLimit: ans.header.Get("RateLimit")}
	if s := ans.header.Get("Retry-After"); s != "" && !r.Granted {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			r.RetryAfterS = &n
		}
	}
	if !r.Granted && json.Valid(ans.body) && len(bytes.TrimSpace(ans.body)) > 0 {
		r.Decision = bytes.TrimSpace(ans.body)
	}
	if c.json {
		b, _ := json.Marshal(r)
		writeJSONLine(c.out, b)
	} else {
		printCheck(c.out, &r)
	}
	if !r.Granted {
		return &rejectedError{res, dom}
	}
	return nil
}

// printCheck prints a check's result for a person.
func printCheck(w io.Writer, r *checkResult) {
	what := fmt.Sprintf("%s for %s", printable(r.Resource), printable(r.Domain))
	switch {
	case r.Granted && r.Peek:
		fmt.Fprintf(w, "granted: %s (a peek: a request of one would be granted now; nothing was spent)\n", what)
	case r.Granted:
		fmt.Fprintf(w, "granted: %d of %s (spent)\n", r.Copies, what)
	default:
		retry := "no wait will let it through"
		if r.RetryAfterS != nil {
			retry = fmt.Sprintf("retry after %ds", *r.RetryAfterS)
		}
		if r.Peek {
			fmt.Fprintf(w, "rejected: %s, %s (a peek: a request of one would be rejected now)\n", what, retry)
		} else {
			fmt.Fprintf(w, "rejected: %d of %s, %s\n", r.Copies, what, retry)
		}
	}
	if r.RateLimitPolicy != "" {
		fmt.Fprintf(w, "RateLimit-Policy: %s\n", printable(r.RateLimitPolicy))
	}
	if r.RateLimit != "" {
		fmt.Fprintf(w, "RateLimit: %s\n", printable(r.RateLimit))
	}
}

func runReload(c *cmdRun, _ []string) error {
	ans, err := c.agent.call(c.ctx, http.MethodPost, "/v1/config/reload")
	if err != nil {
		return err
	}
	var r api.ReloadResult
	if err := json.Unmarshal(ans.body, &r); err != nil {
		return &answerError{status: ans.status, code: "bad_reply", message: fmt.Sprintf("POST /v1/config/reload: %v", err)}
	}
	if c.json {
		writeJSONLine(c.out, ans.body)
		return nil
	}
	fmt.Fprintf(c.out, "reloaded %s: config version %d\n", printable(r.Source), r.Version)
	for _, l := range []struct {
		label string
		names []string
	}{{"added", r.Added}, {"removed", r.Removed}, {"changed", r.Changed}, {"kind changed", r.KindChanged}} {
		if len(l.names) > 0 {
			names := make([]string, len(l.names))
			for i, n := range l.names {
				names[i] = printable(n)
			}
			fmt.Fprintf(c.out, "  %-13s %s\n", l.label+":", strings.Join(names, ", "))
		}
	}
	fmt.Fprintf(c.out, "  %-13s %d resource%s\n", "unchanged:", r.Unchanged, plural1(r.Unchanged))
	if r.Released > 0 {
		fmt.Fprintf(c.out, "  %-13s %d cop%s (of resources removed or of another kind now)\n", "released:", r.Released, map[bool]string{true: "y", false: "ies"}[r.Released == 1])
	}
	return nil
}

func runConfig(c *cmdRun, _ []string) error {
	ans, err := c.agent.call(c.ctx, http.MethodGet, "/v1/config")
	if err != nil {
		return err
	}
	out, n, err := redactJSON(ans.body)
	if err != nil {
		return &answerError{status: ans.status, code: "bad_reply", message: fmt.Sprintf("GET /v1/config: %v", err)}
	}
	if n > 0 {
		fmt.Fprintf(c.errw, "obol: %d secret value%s redacted\n", n, plural1(n))
	}
	if c.json {
		writeJSONLine(c.out, out)
		return nil
	}
	var r struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Config) == 0 {
		return &answerError{status: ans.status, code: "bad_reply", message: "GET /v1/config: no config in the reply"}
	}
	var b bytes.Buffer
	if err := json.Indent(&b, r.Config, "", "  "); err != nil {
		return &answerError{status: ans.status, code: "bad_reply", message: fmt.Sprintf("GET /v1/config: %v", err)}
	}
	b.WriteByte('\n')
	_, err = c.out.Write(b.Bytes())
	return err
}

// secretWords name a member whose string value is a secret; pathSuffixes
// name one whose value is where a secret is, not the secret.
var (
	secretWords  = []string{"secret", "token", "password", "passwd", "credential", "private_key", "api_key", "apikey"}
	pathSuffixes = []string{"_file", "_path", "_dir"}
)

// secretName reports whether a member named k holds a secret value.
func secretName(k string) bool {
	k = strings.ToLower(k)
	for _, s := range pathSuffixes {
		if strings.HasSuffix(k, s) {
			return false
		}
	}
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// redacted replaces a secret value.
const redacted = "REDACTED"

// redactJSON returns the JSON document in with the string values of
// secret-named members (secretName), and the strings of arrays under
// them, replaced by "REDACTED", and how many it replaced. Members keep
// their order; numbers are kept as written.
func redactJSON(in []byte) ([]byte, int, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var out bytes.Buffer
	n := 0
	str := func(s string) {
		b, _ := json.Marshal(s)
		out.Write(b)
	}
	var value func(secret bool) error
	value = func(secret bool) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				out.WriteByte('{')
				for i := 0; dec.More(); i++ {
					if i > 0 {
						out.WriteByte(',')
					}
					kt, err := dec.Token()
					if err != nil {
						return err
					}
					k, _ := kt.(string)
					str(k)
					out.WriteByte(':')
					if err := value(secretName(k)); err != nil {
						return err
					}
				}
				out.WriteByte('}')
			case '[':
				out.WriteByte('[')
				for i := 0; dec.More(); i++ {
					if i > 0 {
						out.WriteByte(',')
					}
					if err := value(secret); err != nil {
						return err
					}
				}
				out.WriteByte(']')
			}
			if _, err := dec.Token(); err != nil { // the closing delimiter
				return err
			}
		case string:
			if secret && v != "" {
				v = redacted
				n++
			}
			str(v)
		case json.Number:
			out.WriteString(v.String())
		case bool:
			out.WriteString(strconv.FormatBool(v))
		case nil:
			out.WriteString("null")
		}
		return nil
	}
	if err := value(false); err != nil {
		return nil, 0, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, errors.New("not one JSON document")
	}
	return out.Bytes(), n, nil
}
