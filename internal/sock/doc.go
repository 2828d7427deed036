// Package sock is the agent's Unix socket: where it is when nobody says,
// how the agent listens on it and how clients reach it.
//
// DefaultPath is the one rule for the default path, shared by the agent, the
// Go client and the load generator so that they cannot disagree:
// $XDG_RUNTIME_DIR/obol.sock when XDG_RUNTIME_DIR is an absolute path, else
// /run/obol/obol.sock when /run/obol exists, else /tmp/obol-UID/obol.sock in
// a 0700 directory of the user's, which PrepareDefault makes and checks
// ($TMPDIR is not read: the agent and its clients often run with different
// temporary directories). A socket right in /tmp could be made first by
// another user. ClientPath puts $OBOL_SOCKET in
// front of it for clients. Listen creates the socket with a given mode after
// removing a stale socket file (a socket nobody answers on); it refuses a
// socket a live process answers on and a path that is not a socket. The
// Listener removes the file on Close only if it is still its own.
//
// This package is internal: it is shared by obol's own packages.
package sock
