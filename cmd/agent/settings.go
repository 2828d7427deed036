package main

import (
	"bytes"
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
	"github.com/obol-dev/obol/internal/netguard"
	"github.com/obol-dev/obol/internal/safefile"
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
	stateFile  string // OBOL_STATE_FILE: where the counts are kept across restarts
	stateEvery string // OBOL_STATE_INTERVAL: how often the state file is written
	logLevel   string // OBOL_LOG_LEVEL: debug, info, warn or error
	runtimeDir string // XDG_RUNTIME_DIR: where the default socket goes

	nodeName   string // OBOL_NODE_NAME: this node's name in the mesh
	gossipBind string // OBOL_GOSSIP_BIND: memberlist's host:port
	join       string // OBOL_JOIN: comma-separated seeds
	secretFile string // OBOL_GOSSIP_SECRET_FILE: the gossip key
	label      string // OBOL_GOSSIP_LABEL: the mesh's label
	sync       string // OBOL_SYNC_INTERVAL: the sync tick
	insecure   string // OBOL_GOSSIP_INSECURE: "true" gossips off loopback without a key
	hostname   string // the host's name, the start of the default node name
	nameSuffix string // this process's random suffix of the default node name

	authTokenFile  string // OBOL_AUTH_TOKEN_FILE: the bearer token
	authEverywhere string // OBOL_AUTH_EVERYWHERE: "true" asks for it on every listener
	domainHeader   string // OBOL_CHECK_DOMAIN_HEADER: /v1/check's domain header
	logRejections  string // OBOL_LOG_REJECTIONS: the fraction of rejections logged

	statusHTTP  string // OBOL_STATUS_HTTP: the status listener's address, or off
	watchConfig string // OBOL_WATCH_CONFIG: "false" stops watching the config file

	maxConns     string // OBOL_MAX_CONNS: each listener's cap on open connections
	readTimeout  string // OBOL_READ_TIMEOUT: every listener's read timeout
	writeTimeout string // OBOL_WRITE_TIMEOUT: every listener's write timeout
	idleTimeout  string // OBOL_IDLE_TIMEOUT: every listener's idle timeout

	rls rlsEnv // OBOL_RLS_*: Envoy's rate limit service (rls.go)
	tls tlsEnv // OBOL_TLS_*, OBOL_INSECURE_TOKEN: TLS off loopback (tls.go)
}

func readEnv(getenv func(string) string) env {
	return env{
		config:     getenv("OBOL_CONFIG"),
		socket:     getenv("OBOL_SOCKET"),
		http:       getenv("OBOL_HTTP"),
		httpPublic: getenv("OBOL_HTTP_PUBLIC"),
		drain:      getenv("OBOL_DRAIN_TIMEOUT"),
		stateFile:  getenv("OBOL_STATE_FILE"),
		stateEvery: getenv("OBOL_STATE_INTERVAL"),
		logLevel:   getenv("OBOL_LOG_LEVEL"),
		runtimeDir: getenv("XDG_RUNTIME_DIR"),
		nodeName:   getenv("OBOL_NODE_NAME"),
		gossipBind: getenv("OBOL_GOSSIP_BIND"),
		join:       getenv("OBOL_JOIN"),
		secretFile: getenv("OBOL_GOSSIP_SECRET_FILE"),
		label:      getenv("OBOL_GOSSIP_LABEL"),
		sync:       getenv("OBOL_SYNC_INTERVAL"),
		insecure:   getenv("OBOL_GOSSIP_INSECURE"),

		authTokenFile:  getenv("OBOL_AUTH_TOKEN_FILE"),
		authEverywhere: getenv("OBOL_AUTH_EVERYWHERE"),
		domainHeader:   getenv("OBOL_CHECK_DOMAIN_HEADER"),
		logRejections:  getenv("OBOL_LOG_REJECTIONS"),

		statusHTTP:  getenv("OBOL_STATUS_HTTP"),
		watchConfig: getenv("OBOL_WATCH_CONFIG"),
		rls:         readRLSEnv(getenv),
		tls:         readTLSEnv(getenv),

		maxConns:     getenv("OBOL_MAX_CONNS"),
		readTimeout:  getenv("OBOL_READ_TIMEOUT"),
		writeTimeout: getenv("OBOL_WRITE_TIMEOUT"),
		idleTimeout:  getenv("OBOL_IDLE_TIMEOUT"),
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
	stateFile   string
	stateEvery  string

	nodeName   string
	gossipBind string
	join       string
	secretFile string
	label      string
	sync       string
	insecure   bool

	authTokenFile  string
	authEverywhere bool
	domainHeader   string
	logRejections  string

	statusHTTP  string
	watchConfig bool

	maxConns, readTimeout, writeTimeout, idleTimeout string

	rls rlsFlags // Envoy's rate limit service (rls.go)
	tls tlsFlags // TLS off loopback (tls.go)

	set map[string]bool // the flags given
}

const usage = `Usage: agent [flags]
       agent --check-config FILE [flags]
       agent --version
       agent COMMAND [arguments] [flags]

Commands ask a running agent and print its answer (--json for scripts):
status, top, peers, check, reload, config; agent help lists them.

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
	fs.StringVar(&f.socket, "socket", "", "Unix socket path, or off (env OBOL_SOCKET; default "+sock.DefaultRule+")")
	fs.StringVar(&f.http, "http", "", "HTTP listen address, loopback, or off; port 0 picks one (env OBOL_HTTP; default "+defaultHTTP+")")
	fs.BoolVar(&f.httpPublic, "http-public", false, "allow a non-loopback HTTP address (env OBOL_HTTP_PUBLIC)")
	fs.StringVar(&f.drain, "drain-timeout", "", "how long a stop waits for requests in flight, a Go duration (env OBOL_DRAIN_TIMEOUT; default "+defaultDrain.String()+")")
	fs.StringVar(&f.stateFile, "state-file", "", "file the agent keeps its counts in across restarts, its own and those it holds for peers: written every --state-interval and on a clean stop, read at start (env OBOL_STATE_FILE; default none)")
	fs.StringVar(&f.stateEvery, "state-interval", "", "how often the state file is written, a Go duration (env OBOL_STATE_INTERVAL; default "+defaultStateInterval.String()+")")
	fs.StringVar(&f.logLevel, "log-level", "", "least level logged: debug, info, warn or error (env OBOL_LOG_LEVEL; default info)")
	fs.StringVar(&f.nodeName, "node-name", "", "this node's name in the mesh, unique (env OBOL_NODE_NAME; default the hostname and a random suffix per process)")
	fs.StringVar(&f.gossipBind, "gossip-bind", "", "gossip ip:port, UDP and TCP; port 0 picks one (env OBOL_GOSSIP_BIND; default this host's private address, port "+defaultGossipPort+", when --join is given; neither: the agent runs alone)")
	fs.BoolVar(&f.insecure, "gossip-insecure", false, "gossip on an address reachable from other hosts without --gossip-secret-file: only on a network you trust (env OBOL_GOSSIP_INSECURE)")
	fs.StringVar(&f.authTokenFile, "auth-token-file", "", "file holding the bearer token (at least 16 bytes) every request through a non-loopback listener must carry; required with --http-public (env OBOL_AUTH_TOKEN_FILE)")
	fs.BoolVar(&f.authEverywhere, "auth-everywhere", false, "ask for the token on the Unix socket and loopback too (env OBOL_AUTH_EVERYWHERE)")
	fs.StringVar(&f.domainHeader, "check-domain-header", "", "request header /v1/check takes the domain from (its first comma-separated element, as X-Forwarded-For) when neither ?domain= nor Obol-Domain is given (env OBOL_CHECK_DOMAIN_HEADER)")
	fs.StringVar(&f.logRejections, "log-rejections", "", "fraction in [0, 1] of rejections logged, one line each, sampled at random (env OBOL_LOG_REJECTIONS; default 0)")
	fs.StringVar(&f.statusHTTP, "status-http", "", "address of a read-only listener serving GET /healthz, /readyz and /metrics only, without the token, on any address (for kubelet probes and Prometheus), host:port or off (env OBOL_STATUS_HTTP; default off)")
	fs.BoolVar(&f.watchConfig, "watch-config", true, "re-read the --config file when its content changes, as SIGHUP does (env OBOL_WATCH_CONFIG; --watch-config=false turns it off)")
	fs.StringVar(&f.join, "join", "", "peers to join, host:port[,…]; a DNS name joins every address it resolves to (env OBOL_JOIN)")
	fs.StringVar(&f.secretFile, "gossip-secret-file", "", "file holding the gossip key, 16, 24 or 32 bytes in base64 or hex: encrypts and authenticates gossip (env OBOL_GOSSIP_SECRET_FILE)")
	fs.StringVar(&f.label, "gossip-label", "", "the mesh's label: nodes with another label ignore each other (env OBOL_GOSSIP_LABEL; default "+defaultLabel+")")
	fs.StringVar(&f.sync, "sync-interval", "", "how often changed counts are shipped to peers, jittered ±10%, a Go duration (env OBOL_SYNC_INTERVAL; default "+defaultSync.String()+")")
	fs.StringVar(&f.maxConns, "max-conns", "", "most connections each listener keeps open at once (socket, HTTP, status and the rate limit service's); one over it is closed at once (env OBOL_MAX_CONNS; default an eighth of the descriptor limit, 16 to 16384, and at most 256 on a TCP listener)")
	fs.StringVar(&f.readTimeout, "read-timeout", "", "every listener's bound on reading one request, headers and body (on gRPC: a connection's handshake), a Go duration (env OBOL_READ_TIMEOUT; default "+netguard.DefaultReadTimeout.String()+")")
	fs.StringVar(&f.writeTimeout, "write-timeout", "", "every listener's bound on writing one reply, a Go duration (env OBOL_WRITE_TIMEOUT; default "+netguard.DefaultWriteTimeout.String()+")")
	fs.StringVar(&f.idleTimeout, "idle-timeout", "", "how long every listener keeps a connection with no request in flight, a Go duration (env OBOL_IDLE_TIMEOUT; default "+netguard.DefaultIdleTimeout.String()+")")
	f.rls.register(fs)
	f.tls.register(fs)
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
		err := fmt.Errorf("unexpected argument %q", fs.Arg(0))
		if a := fs.Arg(0); a == "help" || lookupCommand(a) != nil {
			err = fmt.Errorf("unexpected argument %q: a command comes first (agent %s [flags])", a, a)
		}
		fmt.Fprintln(stderr, err)
		fs.Usage()
		return f, err
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
	stateFile  value         // where the state file is, "" for none
	stateEvery time.Duration // how often it is written
	cluster    clusterSettings

	authTokenFile  value  // where the bearer token is
	authToken      []byte // read by loadToken
	authEverywhere bool
	domainHeader   string
	logRejections  float64

	status      string // the status listener's address, "" when off
	watchConfig bool   // re-read the config file when it changes

	limits netguard.Limits // every listener's cap and timeouts, with defaults
}

// maxTokenFile is the largest bearer token file read: 64 KiB (a token is
// tens of bytes); the file must be a regular one (safefile.Read).
const maxTokenFile = 64 << 10

// minTokenLen is the shortest bearer token taken: 16 bytes is 128 bits when
// random, as the docs ask (openssl rand -hex 32).
const minTokenLen = 16

// loadToken reads the bearer token file, trimmed of surrounding white
// space. The error names the file and where it was given.
func (s *settings) loadToken() error {
	if s.authTokenFile.v == "" {
		return nil
	}
	b, err := safefile.Read(s.authTokenFile.v, maxTokenFile)
	if err != nil {
		return fmt.Errorf("%v: %w", s.authTokenFile, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < minTokenLen {
		return fmt.Errorf("%v: the token is %d bytes, want at least %d (e.g. openssl rand -hex 32)", s.authTokenFile, len(b), minTokenLen)
	}
	s.authToken = b
	return nil
}

// boolSetting is a boolean flag, else its variable; bad names a variable
// that is not a boolean.
func boolSetting(f flags, name string, flagV bool, envV, envName string, bad func(value, string, ...any)) bool {
	if f.set[name] {
		return flagV
	}
	if envV == "" {
		return false
	}
	v, err := strconv.ParseBool(envV)
	if err != nil {
		bad(value{envV, envName}, "want true or false")
	}
	return v
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

// socketValue returns the Unix socket setting: --socket, else OBOL_SOCKET,
// else the config file's agent.socket; v "" means the default path
// (defaultSocket), off none. The agent listens by this rule and its
// commands (command.go) dial by it.
func socketValue(f flags, e env, cfg *config.Config) value {
	return pick(value{f.socket, "--socket"}, value{e.socket, "OBOL_SOCKET"}, value{cfg.Agent.Socket, "config agent.socket"})
}

// httpValue returns the HTTP listener setting: --http, else OBOL_HTTP,
// else the config file's agent.http, else the default; off means none.
func httpValue(f flags, e env, cfg *config.Config) value {
	return pick(value{f.http, "--http"}, value{e.http, "OBOL_HTTP"}, value{cfg.Agent.HTTP, "config agent.http"}, value{defaultHTTP, "the default --http"})
}

// defaultSocket returns the socket path when none is given: sock.DefaultPath
// with e's XDG_RUNTIME_DIR.
func defaultSocket(e env) string {
	return sock.DefaultPath(func(k string) string {
		if k == "XDG_RUNTIME_DIR" {
			return e.runtimeDir
		}
		return ""
	})
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

	sockV, httpV := socketValue(f, e, cfg), httpValue(f, e, cfg)
	switch {
	case sockV.v == off:
	case sockV.v == "":
		s.socket = defaultSocket(e)
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
	s.authTokenFile = pick(value{f.authTokenFile, "--auth-token-file"}, value{e.authTokenFile, "OBOL_AUTH_TOKEN_FILE"})
	s.authEverywhere = boolSetting(f, "auth-everywhere", f.authEverywhere, e.authEverywhere, "OBOL_AUTH_EVERYWHERE", bad)
	if s.httpPublic && httpV.v != off && s.authTokenFile.v == "" {
		errs = append(errs, fmt.Errorf("%v with --http-public: a listener reachable from the network needs --auth-token-file (OBOL_AUTH_TOKEN_FILE); every request through it must carry the token", httpV))
	}
	if s.authEverywhere && s.authTokenFile.v == "" {
		errs = append(errs, errors.New("--auth-everywhere (OBOL_AUTH_EVERYWHERE): needs --auth-token-file (OBOL_AUTH_TOKEN_FILE)"))
	}
	s.domainHeader = firstOf(f.domainHeader, e.domainHeader)
	if h := s.domainHeader; h != "" && !validHeaderName(h) {
		bad(pick(value{f.domainHeader, "--check-domain-header"}, value{e.domainHeader, "OBOL_CHECK_DOMAIN_HEADER"}), "not a header name (letters, digits and - only)")
	}
	if v := pick(value{f.logRejections, "--log-rejections"}, value{e.logRejections, "OBOL_LOG_REJECTIONS"}); v.v != "" {
		r, err := strconv.ParseFloat(v.v, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			bad(v, "want a fraction in [0, 1], such as 0.01")
		}
		s.logRejections = r
	}
	if httpV.v != off {
		s.http = httpV.v
		if err := checkHTTP(httpV.v, s.httpPublic); err != nil {
			bad(httpV, "%v", err)
		}
	}
	if v := pick(value{f.statusHTTP, "--status-http"}, value{e.statusHTTP, "OBOL_STATUS_HTTP"}); v.v != "" && v.v != off {
		s.status = v.v
		if err := checkStatus(v.v); err != nil {
			bad(v, "%v", err)
		}
	}
	s.watchConfig = true
	switch {
	case f.set["watch-config"]:
		s.watchConfig = f.watchConfig
	case e.watchConfig != "":
		w, err := strconv.ParseBool(e.watchConfig)
		if err != nil {
			bad(value{e.watchConfig, "OBOL_WATCH_CONFIG"}, "want true or false")
		}
		s.watchConfig = w
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
	s.limits = resolveLimits(f, e, bad)
	s.stateFile = pick(value{f.stateFile, "--state-file"}, value{e.stateFile, "OBOL_STATE_FILE"}, value{cfg.Agent.StateFile, "config agent.state_file"})
	s.stateEvery = defaultStateInterval
	if cfg.Agent.StateInterval > 0 {
		s.stateEvery = cfg.Agent.StateInterval
	}
	if v := pick(value{f.stateEvery, "--state-interval"}, value{e.stateEvery, "OBOL_STATE_INTERVAL"}); v.v != "" {
		d, err := time.ParseDuration(v.v)
		if err != nil || d <= 0 {
			bad(v, "want a positive duration such as 5s")
		}
		s.stateEvery = d
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
	if bindV.v == "" && c.enabled {
		// Never every interface by default: this host's private address.
		ip := privateIP()
		if ip == "" {
			errs = append(errs, errors.New("--gossip-bind (OBOL_GOSSIP_BIND): this host has no private address to gossip on by default; give the address, e.g. the pod IP"))
		}
		bindV = value{net.JoinHostPort(ip, defaultGossipPort), "the default --gossip-bind"}
	}
	c.bind = bindV.v
	if c.enabled {
		if err := checkGossipBind(bindV.v); err != nil {
			bad(bindV, "%v", err)
		}
	}
	c.name = firstOf(f.nodeName, e.nodeName)
	if c.name == "" && e.hostname != "" {
		// Unique per process: two agents on one host must not share a
		// name (their counts and holds could not be told apart).
		c.name = e.hostname + "-" + e.nameSuffix
		c.nameGenerated = true
	}
	if c.enabled && c.name == "" {
		errs = append(errs, errors.New("--node-name / OBOL_NODE_NAME: required when the host has no name"))
	}
	secretV := pick(value{f.secretFile, "--gossip-secret-file"}, value{e.secretFile, "OBOL_GOSSIP_SECRET_FILE"}, value{cfg.Gossip.SecretFile, "config gossip.secret_file"})
	c.secretFile, c.secretFrom = secretV.v, secretV.from
	c.insecure = boolSetting(f, "gossip-insecure", f.insecure, e.insecure, "OBOL_GOSSIP_INSECURE", bad)
	if c.enabled && c.secretFile == "" && !c.insecure && !loopbackBind(c.bind) {
		bad(bindV, "gossip reachable from other hosts needs a key: give --gossip-secret-file (OBOL_GOSSIP_SECRET_FILE, config gossip.secret_file), or --gossip-insecure (OBOL_GOSSIP_INSECURE=true) on a network you trust; without a key anyone who reaches the port joins the mesh and can claim every copy")
	}
	labelV := pick(value{f.label, "--gossip-label"}, value{e.label, "OBOL_GOSSIP_LABEL"}, value{defaultLabel, "the default --gossip-label"})
	c.label = labelV.v
	if len(c.label) > memberlist.LabelMaxSize {
		bad(labelV, "%d bytes, want at most %d", len(c.label), memberlist.LabelMaxSize)
	}
	c.sync = cfg.Gossip.SyncInterval
	c.ownerFrom = cfg.Gossip.OwnerFrom // 0: reconcile's default
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

// resolveLimits resolves --max-conns and the listeners' timeouts, with
// their defaults.
func resolveLimits(f flags, e env, bad func(value, string, ...any)) netguard.Limits {
	var l netguard.Limits
	if v := pick(value{f.maxConns, "--max-conns"}, value{e.maxConns, "OBOL_MAX_CONNS"}); v.v != "" {
		n, err := strconv.Atoi(v.v)
		if err != nil || n < 1 {
			bad(v, "want a whole number ≥ 1 such as 1024")
		}
		l.MaxConns = n
	}
	for _, d := range []struct {
		flagV, envV, flagName, envName string
		to                             *time.Duration
	}{
		{f.readTimeout, e.readTimeout, "--read-timeout", "OBOL_READ_TIMEOUT", &l.ReadTimeout},
		{f.writeTimeout, e.writeTimeout, "--write-timeout", "OBOL_WRITE_TIMEOUT", &l.WriteTimeout},
		{f.idleTimeout, e.idleTimeout, "--idle-timeout", "OBOL_IDLE_TIMEOUT", &l.IdleTimeout},
	} {
		if v := pick(value{d.flagV, d.flagName}, value{d.envV, d.envName}); v.v != "" {
			t, err := time.ParseDuration(v.v)
			if err != nil || t <= 0 {
				bad(v, "want a positive duration such as 30s")
			}
			*d.to = t
		}
	}
	return l.WithDefaults()
}

// logLevels are the names --log-level takes.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}
