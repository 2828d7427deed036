// Command agent is obol's rate-limiting sidecar: it serves the local API
// (API.md) on a Unix socket and a loopback HTTP address.
//
//	agent [--config FILE] [--socket PATH] [--http ADDR] [--http-public]
//
// Each flag has an environment variable (OBOL_CONFIG, OBOL_SOCKET, OBOL_HTTP,
// OBOL_HTTP_PUBLIC); a flag wins over its variable, which wins over the
// config file's agent: keys, which win over the defaults: the socket
// $XDG_RUNTIME_DIR/obol.sock (else /tmp/obol.sock) and 127.0.0.1:7070.
// Without a config file the agent runs on the built-in demo config. A bad
// config prints every problem and exits with status 2; a listener that
// cannot be bound exits with 1. SIGINT or SIGTERM stops the agent gracefully
// (the socket is removed) with status 0. The agent logs JSON lines (log/slog)
// to stderr at start and stop, never per request.
package main
