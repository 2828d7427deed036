package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/sock"
)

// Built-in listener defaults (the socket's: sock.DefaultPath).
const (
	defaultHTTP  = "127.0.0.1:7070"
	defaultDrain = 5 * time.Second
)

// env is the agent's environment. It is read here and nowhere else.
type env struct {
	config     string // OBOL_CONFIG: the config file
	socket     string // OBOL_SOCKET: the Unix socket path
	http       string // OBOL_HTTP: the TCP listen address
	httpPublic string // OBOL_HTTP_PUBLIC: "true" allows a non-loopback OBOL_HTTP
	drain      string // OBOL_DRAIN_TIMEOUT: how long a stop waits for requests in flight
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
		runtimeDir: getenv("XDG_RUNTIME_DIR"),
		nodeName:   getenv("OBOL_NODE_NAME"),
		gossipBind: getenv("OBOL_GOSSIP_BIND"),
		join:       getenv("OBOL_JOIN"),
		secretFile: getenv("OBOL_GOSSIP_SECRET_FILE"),
		label:      getenv("OBOL_GOSSIP_LABEL"),
		sync:       getenv("OBOL_SYNC_INTERVAL"),
	}
}

// flags are the command line's values; an empty string was not given.
type flags struct {
	config        string
	socket        string
	http          string
	httpPublic    bool
	httpPublicSet bool
	drain         string

	nodeName   string
	gossipBind string
	join       string
	secretFile string
	label      string
	sync       string
}

const usage = `Usage: agent [flags]

obol's agent: a rate-limiting sidecar serving the local API on a Unix socket
and a loopback HTTP address. Each flag has an environment variable; a flag
wins over its variable, which wins over the config file's agent: keys, which
win over the built-in defaults.

Flags:
`

// parseFlags parses args. -h prints the usage on stdout and returns
// flag.ErrHelp; a bad flag prints the error and the usage on stderr.
func parseFlags(args []string, stdout, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.StringVar(&f.config, "config", "", "config file, YAML or JSON (env OBOL_CONFIG; none: the built-in demo config)")
	fs.StringVar(&f.socket, "socket", "", "Unix socket path (env OBOL_SOCKET; default $XDG_RUNTIME_DIR/obol.sock, else /tmp/obol.sock)")
	fs.StringVar(&f.http, "http", "", "HTTP listen address, loopback; port 0 picks one (env OBOL_HTTP; default "+defaultHTTP+")")
	fs.BoolVar(&f.httpPublic, "http-public", false, "allow a non-loopback HTTP address (env OBOL_HTTP_PUBLIC)")
	fs.StringVar(&f.drain, "drain-timeout", "", "how long a stop waits for requests in flight, a Go duration (env OBOL_DRAIN_TIMEOUT; default "+defaultDrain.String()+")")
	fs.StringVar(&f.nodeName, "node-name", "", "this node's name in the mesh, unique (env OBOL_NODE_NAME; default the hostname)")
	fs.StringVar(&f.gossipBind, "gossip-bind", "", "gossip host:port, UDP and TCP; port 0 picks one (env OBOL_GOSSIP_BIND; default "+defaultGossipBind+" when --join is given; neither: the agent runs alone)")
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
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "http-public" {
			f.httpPublicSet = true
		}
	})
	return f, nil
}

// configPath returns the config file to load ("" for the built-in default).
func configPath(f flags, e env) string { return firstOf(f.config, e.config) }

// settings are the agent's resolved listener settings.
type settings struct {
	socket     string
	http       string
	httpPublic bool
	drain      time.Duration
	cluster    clusterSettings
}

// resolve merges flags, environment, the config file's agent: keys and the
// defaults, in that order of precedence.
func resolve(f flags, e env, cfg *config.Config) (settings, error) {
	s := settings{
		socket: firstOf(f.socket, e.socket, cfg.Agent.Socket),
		http:   firstOf(f.http, e.http, cfg.Agent.HTTP, defaultHTTP),
	}
	if s.socket == "" {
		s.socket = sock.DefaultPath(func(k string) string {
			if k == "XDG_RUNTIME_DIR" {
				return e.runtimeDir
			}
			return ""
		})
	}
	s.drain = defaultDrain
	if v := firstOf(f.drain, e.drain); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return s, fmt.Errorf("--drain-timeout / OBOL_DRAIN_TIMEOUT: must be a duration ≥ 0 such as 5s, got %q", v)
		}
		s.drain = d
	}
	switch {
	case f.httpPublicSet:
		s.httpPublic = f.httpPublic
	case e.httpPublic != "":
		v, err := strconv.ParseBool(e.httpPublic)
		if err != nil {
			return s, fmt.Errorf("OBOL_HTTP_PUBLIC: must be true or false, got %q", e.httpPublic)
		}
		s.httpPublic = v
	}
	c := &s.cluster
	c.bind = firstOf(f.gossipBind, e.gossipBind, cfg.Gossip.Bind)
	if j := firstOf(f.join, e.join); j != "" {
		c.join = splitJoin(j)
	} else {
		c.join = cfg.Gossip.Join
	}
	c.enabled = c.bind != "" || len(c.join) > 0
	if c.bind == "" {
		c.bind = defaultGossipBind
	}
	if err := checkHostPort("--gossip-bind / OBOL_GOSSIP_BIND", c.bind); err != nil {
		return s, err
	}
	c.name = firstOf(f.nodeName, e.nodeName, e.hostname)
	if c.enabled && c.name == "" {
		return s, fmt.Errorf("--node-name / OBOL_NODE_NAME: required when the host has no name")
	}
	c.secretFile = firstOf(f.secretFile, e.secretFile, cfg.Gossip.SecretFile)
	c.label = firstOf(f.label, e.label, defaultLabel)
	c.sync = cfg.Gossip.SyncInterval
	if v := firstOf(f.sync, e.sync); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("--sync-interval / OBOL_SYNC_INTERVAL: must be a duration > 0 such as 250ms, got %q", v)
		}
		c.sync = d
	}
	if c.sync <= 0 {
		c.sync = defaultSync
	}
	return s, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
