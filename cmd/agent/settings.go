package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/sock"
)

// Built-in listener defaults (the socket's: sock.DefaultPath).
const (
	defaultHTTP  = "127.0.0.1:7070"
	defaultDrain = 5 * time.Second
	// off turns a listener off (--socket off, --http off).
	off = config.ListenerOff
)

// env is the agent's environment. It is read here and nowhere else. An
// empty variable is the same as an unset one.
type env struct {
	config     string // OBOL_CONFIG: the config file
	socket     string // OBOL_SOCKET: the Unix socket path, or off
	http       string // OBOL_HTTP: the TCP listen address, or off
	httpPublic string // OBOL_HTTP_PUBLIC: "true" allows a non-loopback OBOL_HTTP
	drain      string // OBOL_DRAIN_TIMEOUT: how long a stop waits for requests in flight
	logLevel   string // OBOL_LOG_LEVEL: debug, info, warn or error
	runtimeDir string // XDG_RUNTIME_DIR: where the default socket goes

	nodeName   string // OBOL_NODE_NAME: this node's name in the mesh
	gossipBind string // OBOL_GOSSIP_BIND: memberlist's host:port
	join       string // OBOL_JOIN: comma-separated seeds
	secretFile string // OBOL_GOSSIP_SECRET_FILE: the gossip key
	label      string // OBOL_GOSSIP_LABEL: the mesh's label
	sync       string // OBOL_SYNC_INTERVAL: the sync tick
	hostname   string // the host's name, the default node name
}

func readEnv(getenv func(string) string) env {
	return env{
		config:     getenv("OBOL_CONFIG"),
		socket:     getenv("OBOL_SOCKET"),
		http:       getenv("OBOL_HTTP"),
		httpPublic: getenv("OBOL_HTTP_PUBLIC"),
		drain:      getenv("OBOL_DRAIN_TIMEOUT"),
		logLevel:   getenv("OBOL_LOG_LEVEL"),
		runtimeDir: getenv("XDG_RUNTIME_DIR"),
		nodeName:   getenv("OBOL_NODE_NAME"),
		gossipBind: getenv("OBOL_GOSSIP_BIND"),
		join:       getenv("OBOL_JOIN"),
		secretFile: getenv("OBOL_GOSSIP_SECRET_FILE"),
		label:      getenv("OBOL_GOSSIP_LABEL"),
		sync:       getenv("OBOL_SYNC_INTERVAL"),
	}
}

// flags are the command line's values; an empty string was not given (a
// flag given an empty value is refused by parseFlags).
type flags struct {
	config      string
	checkConfig string
	version     bool
	socket      string
	http        string
	httpPublic  bool
	drain       string
	logLevel    string

	nodeName   string
	gossipBind string
	join       string
	secretFile string
	label      string
	sync       string

	set map[string]bool // the flags given
}

const usage = `Usage: agent [flags]
       agent --check-config FILE [flags]
       agent --version

obol's agent: a rate-limiting sidecar serving the local API on a Unix socket
and a loopback HTTP address. Each flag but --check-config and --version has
an environment variable; a flag wins over its variable, which wins over the
config file's agent: and gossip: keys, which win over the built-in defaults.
Exit status: 0 after a clean stop (or a good --check-config), 2 for bad
flags, environment or config, 1 when the agent cannot serve.

Flags:
`

// parseFlags parses args. -h prints the usage on stdout and returns
// flag.ErrHelp; a bad flag prints the error and the usage on stderr. A
// string flag given an empty value is an error naming it, printed on
// stderr, as is --check-config with --config.
func parseFlags(args []string, stdout, stderr io.Writer) (flags, error) {
	f := flags{set: map[string]bool{}}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.StringVar(&f.config, "config", "", "config file, YAML or JSON (env OBOL_CONFIG; none: the built-in demo config)")
	fs.StringVar(&f.checkConfig, "check-config", "", "check this config file, with the other flags and the environment, print every problem (exit 2) or a summary (exit 0), and serve nothing")
	fs.BoolVar(&f.version, "version", false, "print the version and build of this binary and exit")
	fs.StringVar(&f.socket, "socket", "", "Unix socket path, or off (env OBOL_SOCKET; default $XDG_RUNTIME_DIR/obol.sock, else /tmp/obol.sock)")
	fs.StringVar(&f.http, "http", "", "HTTP listen address, loopback, or off; port 0 picks one (env OBOL_HTTP; default "+defaultHTTP+")")
	fs.BoolVar(&f.httpPublic, "http-public", false, "allow a non-loopback HTTP address (env OBOL_HTTP_PUBLIC)")
	fs.StringVar(&f.drain, "drain-timeout", "", "how long a stop waits for requests in flight, a Go duration (env OBOL_DRAIN_TIMEOUT; default "+defaultDrain.String()+")")
	fs.StringVar(&f.logLevel, "log-level", "", "least level logged: debug, info, warn or error (env OBOL_LOG_LEVEL; default info)")
	fs.StringVar(&f.nodeName, "node-name", "", "this node's name in the mesh, unique (env OBOL_NODE_NAME; default the hostname)")
	fs.StringVar(&f.gossipBind, "gossip-bind", "", "gossip ip:port, UDP and TCP; port 0 picks one (env OBOL_GOSSIP_BIND; default "+defaultGossipBind+" when --join is given; neither: the agent runs alone)")
	fs.StringVar(&f.join, "join", "", "peers to join, host:port[,…]; a DNS name joins every address it resolves to (env OBOL_JOIN)")
	fs.StringVar(&f.secretFile, "gossip-secret-file", "", "file holding the gossip key, 16, 24 or 32 bytes in base64 or hex: encrypts and authenticates gossip (env OBOL_GOSSIP_SECRET_FILE)")
	fs.StringVar(&f.label, "gossip-label", "", "the mesh's label: nodes with another label ignore each other (env OBOL_GOSSIP_LABEL; default "+defaultLabel+")")
	fs.StringVar(&f.sync, "sync-interval", "", "how often changed counts are shipped to peers, jittered ±10%, a Go duration (env OBOL_SYNC_INTERVAL; default "+defaultSync.String()+")")
	out := stderr
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fs.SetOutput(out)
		fs.PrintDefaults()
	}
	fs.SetOutput(stderr)
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			out = stdout
		}
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var errs []error
	fs.Visit(func(fl *flag.Flag) {
		f.set[fl.Name] = true
		if fl.Value.String() != "" {
			return
		}
		switch fl.Name {
		case "socket":
			errs = append(errs, errors.New(`--socket "": empty; give a path, or off to turn the Unix socket off`))
		case "http":
			errs = append(errs, errors.New(`--http "": empty; give host:port, or off to turn the HTTP listener off`))
		default:
			errs = append(errs, fmt.Errorf(`--%s "": empty; give a value, or leave the flag out`, fl.Name))
		}
	})
	if f.set["check-config"] && f.set["config"] {
		errs = append(errs, errors.New("--check-config and --config: give one (--check-config FILE checks FILE)"))
	}
	for _, err := range errs {
		fmt.Fprintf(stderr, "obol: %v\n", err)
	}
	return f, errors.Join(errs...)
}

// configPath returns the config file to load and where it was given (v ""
// for the built-in default).
func configPath(f flags, e env) value {
	return pick(value{f.checkConfig, "--check-config"}, value{f.config, "--config"}, value{e.config, "OBOL_CONFIG"})
}

// settings are the agent's resolved settings.
type settings struct {
	socket     string // "" when off
	http       string // "" when off
	httpPublic bool
	httpFrom   value // where http came from, for messages
	drain      time.Duration
	logLevel   slog.Level
	cluster    clusterSettings
}

// value is a setting's value and where it came from: a flag (--http), a
// variable (OBOL_HTTP), a config key (config agent.http) or the default.
type value struct{ v, from string }

// String names the value and its source for an error message.
func (v value) String() string { return fmt.Sprintf("%s %q", v.from, v.v) }

// pick returns the first value that is set, or the zero value.
func pick(vs ...value) value {
	for _, v := range vs {
		if v.v != "" {
			return v
		}
	}
	return value{}
}

// resolve merges flags, environment, the config file's agent: and gossip:
// keys and the defaults, in that order of precedence, and checks the
// result. Its error joins every problem, each naming the flag, variable or
// key at fault, the value and the form expected.
func resolve(f flags, e env, cfg *config.Config) (settings, error) {
	var s settings
	var errs []error
	bad := func(v value, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%v: "+format, append([]any{v}, args...)...))
	}

	sockV := pick(value{f.socket, "--socket"}, value{e.socket, "OBOL_SOCKET"}, value{cfg.Agent.Socket, "config agent.socket"})
	httpV := pick(value{f.http, "--http"}, value{e.http, "OBOL_HTTP"}, value{cfg.Agent.HTTP, "config agent.http"}, value{defaultHTTP, "the default --http"})
	switch {
	case sockV.v == off:
	case sockV.v == "":
		s.socket = sock.DefaultPath(func(k string) string {
			if k == "XDG_RUNTIME_DIR" {
				return e.runtimeDir
			}
			return ""
		})
	default:
		s.socket = sockV.v
		if n := len(sockV.v); n > sock.MaxPathLen() {
			bad(sockV, "%d bytes, want at most %d (the longest Unix socket path the system takes)", n, sock.MaxPathLen())
		}
	}

	switch {
	case f.set["http-public"]:
		s.httpPublic = f.httpPublic
	case e.httpPublic != "":
		v, err := strconv.ParseBool(e.httpPublic)
		if err != nil {
			bad(value{e.httpPublic, "OBOL_HTTP_PUBLIC"}, "want true or false")
		}
		s.httpPublic = v
	}
	s.httpFrom = httpV
	if httpV.v != off {
		s.http = httpV.v
		if err := checkHTTP(httpV.v, s.httpPublic); err != nil {
			bad(httpV, "%v", err)
		}
	}
	if sockV.v == off && httpV.v == off {
		errs = append(errs, fmt.Errorf("%v and %v: at least one listener is needed", sockV, httpV))
	}

	s.drain = defaultDrain
	if v := pick(value{f.drain, "--drain-timeout"}, value{e.drain, "OBOL_DRAIN_TIMEOUT"}); v.v != "" {
		d, err := time.ParseDuration(v.v)
		if err != nil || d < 0 {
			bad(v, "want a duration ≥ 0 such as 5s")
		}
		s.drain = d
	}
	s.logLevel = slog.LevelInfo
	if v := pick(value{f.logLevel, "--log-level"}, value{e.logLevel, "OBOL_LOG_LEVEL"}); v.v != "" {
		l, ok := logLevels[strings.ToLower(v.v)]
		if !ok {
			bad(v, "want debug, info, warn or error")
		}
		s.logLevel = l
	}

	c := &s.cluster
	bindV := pick(value{f.gossipBind, "--gossip-bind"}, value{e.gossipBind, "OBOL_GOSSIP_BIND"}, value{cfg.Gossip.Bind, "config gossip.bind"})
	if j := firstOf(f.join, e.join); j != "" {
		c.join = splitJoin(j)
	} else {
		c.join = cfg.Gossip.Join
	}
	c.enabled = bindV.v != "" || len(c.join) > 0
	if bindV.v == "" {
		bindV = value{defaultGossipBind, "the default --gossip-bind"}
	}
	c.bind = bindV.v
	if err := checkGossipBind(bindV.v); err != nil {
		bad(bindV, "%v", err)
	}
	c.name = firstOf(f.nodeName, e.nodeName, e.hostname)
	if c.enabled && c.name == "" {
		errs = append(errs, errors.New("--node-name / OBOL_NODE_NAME: required when the host has no name"))
	}
	secretV := pick(value{f.secretFile, "--gossip-secret-file"}, value{e.secretFile, "OBOL_GOSSIP_SECRET_FILE"}, value{cfg.Gossip.SecretFile, "config gossip.secret_file"})
	c.secretFile, c.secretFrom = secretV.v, secretV.from
	labelV := pick(value{f.label, "--gossip-label"}, value{e.label, "OBOL_GOSSIP_LABEL"}, value{defaultLabel, "the default --gossip-label"})
	c.label = labelV.v
	if len(c.label) > memberlist.LabelMaxSize {
		bad(labelV, "%d bytes, want at most %d", len(c.label), memberlist.LabelMaxSize)
	}
	c.sync = cfg.Gossip.SyncInterval
	if v := pick(value{f.sync, "--sync-interval"}, value{e.sync, "OBOL_SYNC_INTERVAL"}); v.v != "" {
		d, err := time.ParseDuration(v.v)
		if err != nil || d <= 0 {
			bad(v, "want a duration > 0 such as 250ms")
		}
		c.sync = d
	}
	if c.sync <= 0 {
		c.sync = defaultSync
	}
	return s, errors.Join(errs...)
}

// logLevels are the names --log-level takes.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// checkHTTP checks an HTTP listen address: host:port with a numeric port,
// and, unless public, a loopback host: an IP literal must be loopback and
// the host must not be empty (every interface). A name other than
// localhost is left to checkHTTPName, which resolves it.
func checkHTTP(addr string, public bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port such as 127.0.0.1:7070, or off")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want a number in 0–65535 (0 picks a free port)", port)
	}
	if public {
		return nil
	}
	if host == "" {
		return errors.New("an empty host is every interface, not a loopback address; give 127.0.0.1, or add --http-public (OBOL_HTTP_PUBLIC=true)")
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() {
		return errors.New("not a loopback address; serving on it needs --http-public (OBOL_HTTP_PUBLIC=true)")
	}
	return nil
}

// checkHTTPName resolves the host of s.http when it is a name other than
// localhost and the address must be loopback, and refuses one that
// resolves to another address or not at all.
func checkHTTPName(s settings, lookup func(host string) ([]net.IP, error)) error {
	if s.http == "" || s.httpPublic {
		return nil
	}
	host, _, err := net.SplitHostPort(s.http)
	if err != nil || host == "" || host == "localhost" || net.ParseIP(host) != nil {
		return nil // checked by checkHTTP
	}
	ips, err := lookup(host)
	if err != nil {
		return fmt.Errorf("%v: cannot resolve %s: %w", s.httpFrom, host, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("%v: %s resolves to %s, not a loopback address; serving on it needs --http-public (OBOL_HTTP_PUBLIC=true)", s.httpFrom, host, ip)
		}
	}
	return nil
}

// checkGossipBind checks a gossip bind address: ip:port, the host an IP
// literal (or empty: every interface), the port a number.
func checkGossipBind(addr string) error {
	const want = "want ip:port such as 0.0.0.0:7946 (an IP address, not a name; port 0 picks one)"
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New(want)
	}
	if host != "" && net.ParseIP(host) == nil {
		return fmt.Errorf("host %q is not an IP address; %s", host, want)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number in 0–65535; %s", port, want)
	}
	return nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
