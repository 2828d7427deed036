package sock

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Name is the file name of the default socket.
const Name = "obol.sock"

// RunDir is the default socket's directory when XDG_RUNTIME_DIR is not set
// (or not absolute) and this directory exists: the system's runtime
// directory for obol, made by the operator, a package or a container volume
// with the permissions it wants.
var RunDir = "/run/obol"

// TmpDir holds the last resort, a directory of the user's own,
// TmpDir/obol-UID, made with mode 0700 (see PrepareDefault): a socket right
// in a shared /tmp could be created first by another user, who would then
// answer the clients or keep the agent from starting.
var TmpDir = "/tmp"

// DefaultRule describes DefaultPath, for help texts.
const DefaultRule = "$XDG_RUNTIME_DIR/obol.sock, else /run/obol/obol.sock when /run/obol exists, else /tmp/obol-UID/obol.sock (a 0700 directory of the user's)"

// Off is the value of OBOL_SOCKET (and of the agent's --socket) that turns
// the socket off.
const Off = "off"

// probeTimeout bounds Listen's check that nobody answers on an existing
// socket file.
const probeTimeout = time.Second

// maxPathLen is the longest socket path the platform takes: sun_path's
// size less the terminating NUL.
var maxPathLen = len(syscall.RawSockaddrUnix{}.Path) - 1

// MaxPathLen returns the longest socket path, in bytes, the platform takes
// (107 on Linux).
func MaxPathLen() int { return maxPathLen }

// Errors Listen returns (wrapped, naming the path) for a path it will not
// take over.
var (
	// ErrInUse: a process answers on the socket already.
	ErrInUse = errors.New("sock: another process answers on the socket")
	// ErrNotSocket: the path exists and is not a socket; it is never
	// removed.
	ErrNotSocket = errors.New("sock: the path exists and is not a socket")
)

// DefaultPath returns the socket path used when none is configured:
// $XDG_RUNTIME_DIR/obol.sock when XDG_RUNTIME_DIR is set to an absolute
// path (a relative one is ignored, as the XDG base directory specification
// asks); else RunDir/obol.sock when RunDir is a directory; else
// TmpDir/obol-UID/obol.sock, in a directory only the user may enter
// (PrepareDefault makes it). Each is a place other users cannot create the
// socket in first. nil getenv means os.Getenv.
func DefaultPath(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, Name)
	}
	if fi, err := os.Stat(RunDir); err == nil && fi.IsDir() {
		return filepath.Join(RunDir, Name)
	}
	return filepath.Join(userTmpDir(), Name)
}

// userTmpDir is TmpDir/obol-UID.
func userTmpDir() string { return filepath.Join(TmpDir, fmt.Sprintf("obol-%d", os.Getuid())) }

// PrepareDefault makes the directory of the default socket path when it is
// the user's own directory under TmpDir: created with mode 0700 if missing,
// and refused, naming the reason, if it is not a directory of this user's
// that nobody else may enter (another user made it first: a socket in it
// could be theirs). Any other path is left alone (its directory is the
// operator's).
func PrepareDefault(path string) error {
	dir := filepath.Dir(path)
	if dir != userTmpDir() {
		return nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("sock: making the socket directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("sock: %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("sock: %s is a %s, not the private directory the default socket goes in; remove it, or give --socket", dir, kind(fi.Mode()))
	case !ok || int(st.Uid) != os.Getuid():
		return fmt.Errorf("sock: %s belongs to another user (uid %d), who could answer in the agent's place; remove it, or give --socket", dir, st.Uid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("sock: %s has mode %v: other users may enter it; chmod 700 it, or give --socket", dir, fi.Mode().Perm())
	}
	return nil
}

// ClientPath returns the socket a client dials when it is given none:
// $OBOL_SOCKET when set, else DefaultPath. OBOL_SOCKET=off (the agent then
// serves no socket) is an error: such a client needs the agent's HTTP
// address. nil getenv means os.Getenv.
func ClientPath(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch p := getenv("OBOL_SOCKET"); p {
	case "":
		return DefaultPath(getenv), nil
	case Off:
		return "", errors.New(`sock: OBOL_SOCKET is "off": the agent serves no Unix socket; give its HTTP address instead`)
	default:
		return p, nil
	}
}

// CheckPath returns an error, naming path, when path cannot name a Unix
// socket: empty, or longer than the platform takes (107 bytes on Linux).
func CheckPath(path string) error {
	switch {
	case path == "":
		return errors.New("sock: empty socket path")
	case len(path) > maxPathLen:
		return fmt.Errorf("sock: socket path %s is %d bytes, want at most %d", path, len(path), maxPathLen)
	}
	return nil
}

// Dial connects to the Unix socket at path. A timeout ≤ 0 means none. The
// error names the path.
func Dial(path string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: max(timeout, 0)}
	return d.Dial("unix", path)
}

// Listener is a Unix socket made by Listen. Close closes it and removes the
// socket file, only if the file at the path is still the one Listen made
// (another agent may have replaced it since). Its methods are safe for
// concurrent use.
type Listener struct {
	ln   *net.UnixListener
	path string
	info fs.FileInfo // the socket file Listen made

	once  sync.Once
	rmErr error
}

var _ net.Listener = (*Listener)(nil)

// Listen creates a Unix socket at path with permission bits mode and
// listens on it. An existing socket file nobody answers on (left by a dead
// process) is removed first. It refuses, naming the path: a path that
// exists and is not a socket (ErrNotSocket), a socket a process answers on
// (ErrInUse), one it cannot probe, and a path longer than the platform
// takes. The socket's directory must exist.
func Listen(path string, mode fs.FileMode) (*Listener, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	if mode&^fs.ModePerm != 0 {
		return nil, fmt.Errorf("sock: mode %v for %s: want permission bits only, such as 0660", mode, path)
	}
	if err := clearStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("sock: listening on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // Close removes the file, only if it is still ours
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("sock: setting mode %v on %s: %w", mode, path, err)
	}
	info, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("sock: %s: %w", path, err)
	}
	return &Listener{ln: ln, path: path, info: info}, nil
}

// clearStale removes the socket file at path if nobody answers on it, and
// refuses anything else that is there.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sock: %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%w: %s is a %s; not removing it (remove it yourself, or choose another path)", ErrNotSocket, path, kind(fi.Mode()))
	}
	conn, err := net.DialTimeout("unix", path, probeTimeout)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%w: %s (an agent already running?); stop it or choose another path", ErrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("sock: %s: cannot tell whether a process answers on it: %w", path, err)
	}
	// Nobody answers: a socket left by a dead process.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sock: removing the stale socket %s: %w", path, err)
	}
	return nil
}

// kind names a file type for an error message.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "file of another kind"
	}
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) { return l.ln.Accept() }

// Addr returns the socket's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Path returns the socket's path.
func (l *Listener) Path() string { return l.path }

// Close stops listening and, the first time, removes the socket file if it
// is still the one Listen made. It returns a failure to remove the file on
// every call; otherwise the listener's own error (net.ErrClosed once closed).
func (l *Listener) Close() error {
	err := l.ln.Close()
	l.once.Do(func() {
		fi, serr := os.Lstat(l.path)
		if serr != nil || !os.SameFile(fi, l.info) {
			return // gone, or another process's socket now
		}
		if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			l.rmErr = fmt.Errorf("sock: removing %s: %w", l.path, rerr)
		}
	})
	if l.rmErr != nil {
		return l.rmErr
	}
	return err
}
