package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/sock"
)

// command.go is the binary's operator commands: `agent status`, `top`,
// `peers`, `check`, `reload`, `config` and `help`, for an operator inside
// a container with no shell (kubectl exec -c obol -- obol-agent status).
// Each asks a running agent over its API, on the socket it finds by the
// agent's own rule (socketValue, settings.go) or on its HTTP listener, and
// prints the answer for a person, or as JSON with --json. runOn runs a
// command when the first argument is not a flag; any other command line
// runs the agent. The commands' own code (commands.go) prints; this file
// parses, finds the agent and talks to it.

// Exit statuses of the commands, besides exitUsage (2: bad usage).
const (
	exitAnswered    = 1 // the agent answered with an error (status: it is not ready)
	exitUnreachable = 3 // the agent could not be reached, or its answer was cut off
	exitRejected    = 4 // check: the request would be (or was) rejected
)

// command is one operator command.
type command struct {
	name    string
	args    []string // the names of its arguments, all required
	summary string   // one line, for `agent help`
	help    string   // more, for `agent help NAME` and NAME -h
	// flags registers the command's own flags, besides the common ones.
	flags func(fs *flag.FlagSet, o *cmdOptions)
	run   func(c *cmdRun, args []string) error
}

// commandList returns the commands, in the order help lists them.
func commandList() []*command {
	return []*command{statusCommand, topCommand, peersCommand, checkCommand, resetCommand, reloadCommand, configCommand}
}

// lookupCommand returns the command named name, or nil.
func lookupCommand(name string) *command {
	for _, c := range commandList() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// commandNames is "status, top, peers, check, reload, config".
func commandNames() string {
	var names []string
	for _, c := range commandList() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// cmdOptions are a command's flags: how to reach the agent and how to
// print, then the command's own.
type cmdOptions struct {
	socket, http, config, tokenFile string
	json                            bool
	timeout                         time.Duration

	by     string // top
	n      int    // top
	copies int    // check
}

// defaultTimeout is how long a command waits for the agent's answer.
const defaultTimeout = 5 * time.Second

func (o *cmdOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.socket, "socket", "", "the agent's Unix socket (env OBOL_SOCKET; default the agent's own rule: the config file's agent.socket, else "+sock.DefaultRule+")")
	fs.StringVar(&o.http, "http", "", "ask the agent's HTTP listener, host:port, instead of its socket (env OBOL_HTTP, read when the socket is off)")
	fs.StringVar(&o.config, "config", "", "the agent's config file, read for agent.socket and agent.http when neither flag nor variable gives them (env OBOL_CONFIG)")
	fs.StringVar(&o.tokenFile, "auth-token-file", "", "file holding the agent's bearer token, sent with every request; the socket and loopback ask for it only when the agent runs with --auth-everywhere (env OBOL_AUTH_TOKEN_FILE)")
	fs.BoolVar(&o.json, "json", false, "print JSON for scripts: the agent's reply, or an object made of its replies")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "how long to wait for the agent's answer, a Go duration")
}

// usageError is bad usage of a command: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// commandsUsage is what `agent help` prints.
func commandsUsage() string {
	var b strings.Builder
	b.WriteString(`Usage: agent COMMAND [arguments] [flags]

Commands ask a running agent over its API and print its answer; --json
prints JSON for scripts. Without a command, agent runs the agent
(agent -h lists its flags).

Commands:
`)
	for _, c := range commandList() {
		fmt.Fprintf(&b, "  %-24s %s\n", strings.TrimSpace(c.name+" "+strings.Join(c.args, " ")), c.summary)
	}
	fmt.Fprintf(&b, "  %-24s %s\n", "help [COMMAND]", "this list, or a command's flags")
	b.WriteString(`
The agent is asked on its socket, found as the agent finds it: --socket
PATH, else OBOL_SOCKET, else the config file's agent.socket (--config or
OBOL_CONFIG), else ` + sock.DefaultRule + `.
--http ADDR asks its HTTP listener instead, as does a socket turned off.
--auth-token-file FILE (OBOL_AUTH_TOKEN_FILE) sends the bearer token; the
socket and loopback ask for it only when the agent runs with
--auth-everywhere. A flag may come before or after the arguments; an
argument that starts with "-" goes after "--".

Exit status: 0 done (check: granted); 1 the agent answered with an error
(status: the agent is not ready); 2 bad usage; 3 the agent could not be
reached; 4 check: rejected.
`)
	return b.String()
}

// runCommand runs the command args[0] with the rest of args, and returns
// nil or an exitError carrying its exit status, having printed why.
func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	name := args[0]
	if name == "help" {
		return runHelp(args[1:], stdout, stderr)
	}
	c := lookupCommand(name)
	if c == nil {
		err := fmt.Errorf("unknown command %q: the commands are %s (agent help); the agent's flags start with - (agent -h)", name, commandNames())
		fmt.Fprintf(stderr, "obol: %v\n", err)
		return &exitError{exitUsage, err}
	}
	var o cmdOptions
	fs := flag.NewFlagSet("agent "+name, flag.ContinueOnError)
	o.register(fs)
	if c.flags != nil {
		c.flags(fs, &o)
	}
	out := stderr
	fs.SetOutput(stderr)
	fs.Usage = func() { c.printUsage(out, fs) }
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			out = stdout
		}
	}
	pos, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return &exitError{exitUsage, err} // the flag package printed it, with the usage
	}
	if err := o.check(fs, c, pos); err != nil {
		fmt.Fprintf(stderr, "obol: %v\n", err)
		fmt.Fprintf(stderr, "usage: %s (agent help %s)\n", c.synopsis(), c.name)
		return &exitError{exitUsage, err}
	}
	e := readEnv(getenv)
	a, err := o.agent(e, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "obol: %v\n", err)
		return &exitError{exitUsage, err}
	}
	defer a.http.CloseIdleConnections() // an agent caps the connections of each listener
	run := &cmdRun{ctx: ctx, out: stdout, errw: stderr, json: o.json, opts: o, agent: a}
	err = c.run(run, pos)
	if err == nil {
		return nil
	}
	code := exitAnswered
	var ue *unreachableError
	var rej *rejectedError
	switch {
	case errors.As(err, &ue):
		code = exitUnreachable
		if o.json {
			writeJSONLine(stdout, errorObject("unreachable", err.Error()))
		}
	case errors.As(err, &rej):
		code = exitRejected
	default:
		var ae *answerError
		if o.json && errors.As(err, &ae) {
			if ae.body != nil {
				writeJSONLine(stdout, ae.body)
			} else {
				writeJSONLine(stdout, errorObject("bad_reply", err.Error()))
			}
		}
	}
	if rej == nil {
		fmt.Fprintf(stderr, "obol: %v\n", err)
	}
	return &exitError{code, err}
}

// runHelp prints the commands, or one command's usage.
func runHelp(args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0 || len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "--h"):
		fmt.Fprint(stdout, commandsUsage())
		return nil
	case len(args) == 1 && lookupCommand(args[0]) != nil:
		c := lookupCommand(args[0])
		var o cmdOptions
		fs := flag.NewFlagSet("agent "+c.name, flag.ContinueOnError)
		o.register(fs)
		if c.flags != nil {
			c.flags(fs, &o)
		}
		c.printUsage(stdout, fs)
		return nil
	}
	err := fmt.Errorf("help %s: want no argument, or one of the commands: %s", strings.Join(args, " "), commandNames())
	fmt.Fprintf(stderr, "obol: %v\n", err)
	return &exitError{exitUsage, err}
}

// synopsis is "agent check RESOURCE DOMAIN [flags]".
func (c *command) synopsis() string {
	return strings.Join(append(append([]string{"agent", c.name}, c.args...), "[flags]"), " ")
}

// printUsage prints the command's synopsis, help and flags.
func (c *command) printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n", c.synopsis(), c.help)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nExit status: 0 done (check: granted); 1 the agent answered with an error (status: not ready);\n2 bad usage; 3 the agent could not be reached; 4 check: rejected.\n")
}

// parseInterspersed parses args with fs, flags before, between and after
// the arguments, which it returns; everything after "--" is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// check checks the parsed flags and the arguments of c: the count, an
// empty flag value, the timeout, and the command's own.
func (o *cmdOptions) check(fs *flag.FlagSet, c *command, pos []string) error {
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		if f.Value.String() == "" {
			errs = append(errs, fmt.Errorf(`--%s "": empty; give a value, or leave the flag out`, f.Name))
		}
	})
	switch {
	case len(pos) < len(c.args):
		errs = append(errs, fmt.Errorf("%s: missing %s", c.name, strings.Join(c.args[len(pos):], " and ")))
	case len(pos) > len(c.args):
		want := "no arguments"
		if len(c.args) > 0 {
			want = "the arguments " + strings.Join(c.args, " ")
		}
		errs = append(errs, fmt.Errorf("%s: unexpected argument %q; it takes %s", c.name, pos[len(c.args)], want))
	}
	for i, p := range pos {
		if i < len(c.args) && p == "" {
			errs = append(errs, fmt.Errorf("%s: %s is empty", c.name, c.args[i]))
		}
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %q: want a positive duration such as 5s", o.timeout))
	}
	if o.socket != "" && o.http != "" {
		errs = append(errs, fmt.Errorf("--socket %q and --http %q: give one", o.socket, o.http))
	}
	switch c.name {
	case "top":
		if o.by != "rejected" && o.by != "granted" {
			errs = append(errs, fmt.Errorf("--by %q: want rejected or granted", o.by))
		}
		if o.n < 1 {
			errs = append(errs, fmt.Errorf("-n %d: want a number of domains ≥ 1", o.n))
		}
	case "check":
		if o.copies < 0 {
			errs = append(errs, fmt.Errorf("--copies %d: want 0 (a peek, the default) or more", o.copies))
		}
	}
	return errors.Join(errs...)
}

// target is where a command finds the agent.
type target struct {
	network string // "unix" or "tcp"
	dial    string // the socket's path, or host:port
	host    string // the Host of the requests
	from    value  // the setting that named it
}

func (t target) String() string {
	if t.network == "unix" {
		return fmt.Sprintf("the socket %s (%s)", t.dial, t.from.from)
	}
	return fmt.Sprintf("the HTTP listener %s (%s)", t.dial, t.from.from)
}

// agent returns the client of the agent o names: the socket, or the HTTP
// listener, by the agent's own rule (socketValue, httpValue), with the
// bearer token when a token file is given. The config file is read only
// when the socket or the HTTP address could come from it; one that cannot
// be read is reported on stderr and the defaults are tried.
func (o *cmdOptions) agent(e env, stderr io.Writer) (*agentClient, error) {
	t, err := o.target(e, stderr)
	if err != nil {
		return nil, err
	}
	st := settings{authTokenFile: pick(value{o.tokenFile, "--auth-token-file"}, value{e.authTokenFile, "OBOL_AUTH_TOKEN_FILE"})}
	if err := st.loadToken(); err != nil {
		return nil, err
	}
	return newAgentClient(t, st.authToken, o.timeout), nil
}

func (o *cmdOptions) target(e env, stderr io.Writer) (target, error) {
	switch {
	case o.socket == off || o.http == off:
		return target{}, errors.New(`a command asks the agent on its socket (--socket PATH) or its HTTP listener (--http ADDR); "off" names neither`)
	case o.socket != "":
		return unixTarget(value{o.socket, "--socket"})
	case o.http != "":
		return tcpTarget(value{o.http, "--http"})
	}
	f := flags{config: o.config}
	cfg := &config.Config{}
	if cv := configPath(f, e); cv.v != "" && (e.socket == "" || e.socket == off && e.http == "") {
		if c, err := (&configFile{path: cv.v}).load(); err != nil {
			fmt.Fprintf(stderr, "obol: %v: cannot read agent.socket and agent.http from it (%v); trying the defaults\n", cv, err)
		} else {
			cfg = c
		}
	}
	if sv := socketValue(f, e, cfg); sv.v != off {
		if sv.v == "" {
			sv = value{defaultSocket(e), "the default socket"}
		}
		return unixTarget(sv)
	}
	hv := httpValue(f, e, cfg)
	if hv.v == off {
		return target{}, fmt.Errorf("%v and %v: the agent serves neither a socket nor HTTP; give --socket PATH or --http ADDR", socketValue(f, e, cfg), hv)
	}
	return tcpTarget(hv)
}

// unixTarget returns the socket v names.
func unixTarget(v value) (target, error) {
	if err := sock.CheckPath(v.v); err != nil {
		return target{}, fmt.Errorf("%v: %w", v, err)
	}
	return target{network: "unix", dial: v.v, host: "localhost", from: v}, nil
}

// tcpTarget returns the HTTP listener v names: host:port with a port the
// agent listens on (not 0, which it picks as it starts); an empty host is
// this host.
func tcpTarget(v value) (target, error) {
	host, port, err := net.SplitHostPort(v.v)
	if err != nil {
		return target{}, fmt.Errorf("%v: want host:port such as 127.0.0.1:7070", v)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return target{}, fmt.Errorf("%v: port %q: want the port the agent listens on, 1–65535 (for port 0 the agent picks one as it starts: give the \"http\" of its start line)", v, port)
	}
	if host == "" {
		host = "localhost"
	}
	return target{network: "tcp", dial: v.v, host: net.JoinHostPort(host, port), from: v}, nil
}

// agentClient speaks HTTP to the agent, on its socket or TCP listener.
type agentClient struct {
	t     target
	token []byte
	http  *http.Client
}

// maxReply bounds a reply read: the config of a large file fits many times.
const maxReply = 64 << 20

func newAgentClient(t target, token []byte, timeout time.Duration) *agentClient {
	var d net.Dialer
	tr := &http.Transport{ // no proxy: the agent is local
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, t.network, t.dial)
		},
		DisableCompression: true,
	}
	return &agentClient{t: t, token: token, http: &http.Client{Transport: tr, Timeout: timeout}}
}

// answer is one reply of the agent.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// unreachableError: the agent could not be reached, or its reply was cut
// off.
type unreachableError struct {
	t   target
	err error
}

func (e *unreachableError) Error() string {
	err := e.err
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var hint string
	var ne net.Error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		hint = "; nothing is there: is the agent running, and is this its socket? (--socket PATH or OBOL_SOCKET)"
	case errors.Is(err, syscall.ECONNREFUSED):
		hint = "; nothing answers there: is the agent running?"
	case errors.Is(err, fs.ErrPermission):
		hint = "; run the command as the agent's user or a member of its group (the socket is mode 0660)"
	case errors.As(err, &ne) && ne.Timeout():
		hint = "; no answer in time (--timeout)"
	}
	return fmt.Sprintf("cannot reach the agent on %v: %v%s", e.t, err, hint)
}

func (e *unreachableError) Unwrap() error { return e.err }

// answerError: the agent answered with an error (or with what is not the
// reply expected).
type answerError struct {
	status  int
	code    string
	message string
	body    []byte // the agent's error object, nil when it sent none
}

func (e *answerError) Error() string {
	msg := fmt.Sprintf("the agent answered %d %s: %s", e.status, e.code, e.message)
	if e.status == http.StatusUnauthorized {
		msg += " (give its token file: --auth-token-file FILE or OBOL_AUTH_TOKEN_FILE)"
	}
	return msg
}

// do sends a request with no body and returns the reply, or an
// unreachableError.
func (a *agentClient) do(ctx context.Context, method, path string) (answer, error) {
	return a.send(ctx, method, path, nil)
}

// send sends a request with a JSON body (none when nil) and returns the
// reply, or an unreachableError.
func (a *agentClient) send(ctx context.Context, method, path string, body []byte) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+a.t.host+path, rd)
	if err != nil {
		return answer{}, fmt.Errorf("a request for %s: %w", path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if len(a.token) > 0 {
		req.Header.Set("Authorization", "Bearer "+string(a.token))
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return answer{}, &unreachableError{a.t, err}
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	if err != nil {
		return answer{}, &unreachableError{a.t, err}
	}
	if len(got) > maxReply {
		return answer{}, &answerError{status: resp.StatusCode, code: "too_large", message: fmt.Sprintf("%s %s: the reply is over %d MiB", method, path, maxReply>>20)}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: got}, nil
}

// call sends a request and returns the body of a reply with one of the
// statuses ok (200 when none), else an answerError.
func (a *agentClient) call(ctx context.Context, method, path string, ok ...int) (answer, error) {
	ans, err := a.do(ctx, method, path)
	if err != nil {
		return ans, err
	}
	if len(ok) == 0 {
		ok = []int{http.StatusOK}
	}
	if slices.Contains(ok, ans.status) {
		return ans, nil
	}
	return ans, errorOf(method, path, ans)
}

// errorOf returns the answerError of a reply: the agent's error object, or
// the start of whatever it sent.
func errorOf(method, path string, ans answer) *answerError {
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(ans.body, &e) == nil && e.Error != nil {
		return &answerError{status: ans.status, code: e.Error.Code, message: e.Error.Message, body: ans.body}
	}
	snippet := string(ans.body)
	if len(snippet) > 200 {
		snippet = snippet[:200] + "…"
	}
	return &answerError{status: ans.status, code: "bad_reply", message: fmt.Sprintf("%s %s: not the reply expected: %q", method, path, snippet)}
}

// getJSON GETs path (200) and decodes the reply into v; it returns the
// reply's bytes too.
func (a *agentClient) getJSON(ctx context.Context, path string, v any) ([]byte, error) {
	ans, err := a.call(ctx, http.MethodGet, path)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(ans.body, v); err != nil {
		return nil, &answerError{status: ans.status, code: "bad_reply", message: fmt.Sprintf("GET %s: the reply is not the JSON expected: %v", path, err)}
	}
	return ans.body, nil
}

// cmdRun is a command running.
type cmdRun struct {
	ctx   context.Context
	out   io.Writer // stdout
	errw  io.Writer // stderr
	json  bool
	opts  cmdOptions
	agent *agentClient
}

// errorObject renders {"error": {"code", "message"}}, the API's form.
func errorObject(code, msg string) []byte {
	b, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": msg}})
	return b
}

// writeJSONLine writes a JSON document and a newline.
func writeJSONLine(w io.Writer, b []byte) {
	w.Write(bytes.TrimSpace(b))
	io.WriteString(w, "\n")
}

// printable returns s as a terminal may show it: as it is when every rune
// is printable, else quoted. Domains and names are the clients' strings,
// and may hold escape sequences.
func printable(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// millis renders a count of milliseconds as a duration a person reads:
// whole seconds from a minute up, tenths of a second from a second.
func millis(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.String()
}
