// Command agent is obol's rate-limiting sidecar: it serves the local API on a
// Unix socket and a loopback HTTP address.
//
//	agent [--config FILE] [--socket PATH|off] [--http ADDR|off] [--http-public] [--log-level LEVEL] [gossip flags]
//	agent --check-config FILE [flags]
//	agent --version
//	agent status|top|peers|check|reload|config [arguments] [flags]
//
// Each flag but --check-config and --version has an environment variable
// (OBOL_CONFIG, OBOL_SOCKET, OBOL_HTTP, OBOL_HTTP_PUBLIC, OBOL_LOG_LEVEL, …),
// all read in settings.go; a flag wins over its variable, which wins over
// the config file's agent: and gossip: keys, which win over the defaults:
// the socket sock.DefaultPath ($XDG_RUNTIME_DIR/obol.sock, else
// /run/obol/obol.sock, else /tmp/obol-UID/obol.sock) and 127.0.0.1:7070. "off" turns a listener off; one must
// stay. Without a config file the agent runs on the built-in demo config.
//
// Bad flags, variables or config print every problem, each naming the flag,
// variable or key and the value, and exit with status 2 before anything is
// bound; --check-config does the same checks and serves nothing (0 and a
// summary when all is well). A listener or gossip port that cannot be bound
// exits with 1. SIGINT or SIGTERM stops the agent gracefully (the socket is
// removed) with status 0. The agent logs JSON lines (log/slog) to stderr at
// --log-level: start and stop, reloads, cluster events; never per request.
// SIGHUP, POST /v1/config/reload and a change of the config file's content
// (watch.go, --watch-config) reload the config. --status-http serves the
// probes and the metrics on an address kubelet and Prometheus reach.
//
// A first argument that is not a flag is an operator command (command.go,
// commands.go): it asks the running agent over its API, on the socket the
// agent's own rule names (or --http), prints the answer (--json for
// scripts) and exits 0 done, 1 the agent answered with an error, 2 bad
// usage, 3 the agent could not be reached, 4 check found a rejection.
// `agent help` lists the commands.
//
// --tls-cert and --tls-key (tls.go) serve TLS on the listeners off
// loopback, with --tls-client-ca for mutual TLS; the files are polled like
// the config file and a bad pair is refused, the one in force kept.
package main
