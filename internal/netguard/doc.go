// Package netguard bounds the agent's listeners, so that no client of one
// listener can take the process's file descriptors or stop it serving:
//
//   - a cap on the connections a listener keeps open at once: a connection
//     accepted over the cap is closed at once, before anything is read or
//     written (its client sees the connection closed, EOF or a reset), and
//     counted;
//   - an Accept that rides out temporary errors (EMFILE, ENFILE,
//     ECONNABORTED, ENOBUFS, ENOMEM, …): it waits, 5 ms doubling to 1 s
//     as net/http does, and tries again, logging at most once every
//     10 seconds per listener; only a permanent error (the listener was
//     closed, or the system refuses it for good) is returned, and that
//     one stops the agent;
//   - on an HTTP/2 (gRPC) listener (Listener.HTTP2), reads of at most
//     1 KiB each followed by a yield of the processor, and the connection
//     closed once the server has refused MaxRefusedStreams of its streams,
//     the listener's next accept then waiting abusePause;
//   - the read, write and idle timeouts every server of the agent applies
//     (Limits), with their defaults in one place.
//
// A Set holds an agent's guarded listeners and exports their figures as
// Prometheus metrics. This package is internal: it is shared by obol's own
// packages.
package netguard
