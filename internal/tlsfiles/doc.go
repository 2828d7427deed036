// Package tlsfiles serves TLS from certificate, key and client CA files
// that are replaced while the agent runs (cert-manager rotates them in a
// Secret volume). A Holder loads the files, checks them, and hands every
// new connection the pair in force through tls.Config.GetConfigForClient,
// so that a reload takes effect on the next handshake without restarting a
// listener; connections already open keep the pair they began with.
//
// A reload that reads a bad pair (unreadable, not PEM, a key that does not
// match the certificate, a certificate expired or not yet valid, a client
// CA file with no certificate) is refused: the pair in force stays, and
// the error names the file and what was wrong. The Holder does no I/O of
// its own between reloads; its caller decides when to reload (the agent
// polls the files' content, as it does its config file).
//
// This package is internal: it is shared by obol's own packages.
package tlsfiles
