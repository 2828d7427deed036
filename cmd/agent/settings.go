package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/obol-dev/obol/config"
)

// Built-in listener defaults (API.md).
const (
	defaultHTTP       = "127.0.0.1:7070"
	defaultDrain      = 5 * time.Second
	defaultSocketName = "obol.sock"
	fallbackSocketDir = "/tmp"
)

// env is the agent's environment. It is read here and nowhere else.
type env struct {
	config     string // OBOL_CONFIG: the config file
	socket     string // OBOL_SOCKET: the Unix socket path
	http       string // OBOL_HTTP: the TCP listen address
	httpPublic string // OBOL_HTTP_PUBLIC: "true" allows a non-loopback OBOL_HTTP
	drain      string // OBOL_DRAIN_TIMEOUT: how long a stop waits for requests in flight
	runtimeDir string // XDG_RUNTIME_DIR: where the default socket goes
}

func readEnv(getenv func(string) string) env {
	return env{
		config:     getenv("OBOL_CONFIG"),
		socket:     getenv("OBOL_SOCKET"),
		http:       getenv("OBOL_HTTP"),
		httpPublic: getenv("OBOL_HTTP_PUBLIC"),
		drain:      getenv("OBOL_DRAIN_TIMEOUT"),
		runtimeDir: getenv("XDG_RUNTIME_DIR"),
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
}

// resolve merges flags, environment, the config file's agent: keys and the
// defaults, in that order of precedence.
func resolve(f flags, e env, cfg *config.Config) (settings, error) {
	s := settings{
		socket: firstOf(f.socket, e.socket, cfg.Agent.Socket),
		http:   firstOf(f.http, e.http, cfg.Agent.HTTP, defaultHTTP),
	}
	if s.socket == "" {
		dir := e.runtimeDir
		if dir == "" {
			dir = fallbackSocketDir
		}
		s.socket = filepath.Join(dir, defaultSocketName)
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
