package sock

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// shortDir returns a temp dir whose socket paths fit the platform's limit.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDefaultPath(t *testing.T) {
	defer func(r, d string) { RunDir, TmpDir = r, d }(RunDir, TmpDir)
	RunDir, TmpDir = filepath.Join(t.TempDir(), "absent"), "/tmp"
	mine := fmt.Sprintf("/tmp/obol-%d/obol.sock", os.Getuid())
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "XDG_RUNTIME_DIR set", env: map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, want: "/run/user/1000/obol.sock"},
		{name: "nothing set", env: nil, want: mine},
		{name: "TMPDIR is not read", env: map[string]string{"TMPDIR": "/var/tmp/me"}, want: mine},
		{name: "relative XDG_RUNTIME_DIR is ignored", env: map[string]string{"XDG_RUNTIME_DIR": "run/me"}, want: mine},
		{name: "OBOL_SOCKET is not the default", env: map[string]string{"OBOL_SOCKET": "/x.sock"}, want: mine},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefaultPath(envOf(tc.env)); got != tc.want {
				t.Errorf("DefaultPath = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClientPath(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
		err  string
	}{
		{name: "OBOL_SOCKET wins", env: map[string]string{"OBOL_SOCKET": "/a.sock", "XDG_RUNTIME_DIR": "/run/u"}, want: "/a.sock"},
		{name: "else the default", env: map[string]string{"XDG_RUNTIME_DIR": "/run/u"}, want: "/run/u/obol.sock"},
		{name: "off is an error", env: map[string]string{"OBOL_SOCKET": "off"}, err: "OBOL_SOCKET"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ClientPath(envOf(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ClientPath = %q, %v; want an error naming %s", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ClientPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// stale leaves a socket file at path that nobody answers on, as a killed
// process does.
func stale(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("the stale socket is not there: %v", err)
	}
}

func TestListen(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string) (keep func(t *testing.T))
		mode    fs.FileMode
		err     error  // errors.Is target; nil: Listen succeeds
		errText string // the error's text must contain it
	}{
		{name: "fresh path, mode 0660", mode: 0o660},
		{name: "fresh path, mode 0600", mode: 0o600},
		{name: "stale socket is removed", mode: 0o660, prepare: func(t *testing.T, path string) func(*testing.T) {
			stale(t, path)
			return nil
		}},
		{name: "live socket is refused", mode: 0o660, err: ErrInUse, errText: "answers", prepare: func(t *testing.T, path string) func(*testing.T) {
			live, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { live.Close() })
			return func(t *testing.T) {
				c, err := net.Dial("unix", path)
				if err != nil {
					t.Fatalf("the live socket no longer answers: %v", err)
				}
				c.Close()
			}
		}},
		{name: "regular file is refused", mode: 0o660, err: ErrNotSocket, errText: "regular file", prepare: func(t *testing.T, path string) func(*testing.T) {
			if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) {
				if b, err := os.ReadFile(path); err != nil || string(b) != "keep me" {
					t.Fatalf("the regular file changed: %q %v", b, err)
				}
			}
		}},
		{name: "directory is refused", mode: 0o660, err: ErrNotSocket, errText: "directory", prepare: func(t *testing.T, path string) func(*testing.T) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) {
				if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
					t.Fatalf("the directory changed: %v", err)
				}
			}
		}},
		{name: "mode with more than permission bits", mode: fs.ModeSetuid | 0o660, errText: "permission bits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(shortDir(t), "obol.sock")
			var keep func(*testing.T)
			if tc.prepare != nil {
				keep = tc.prepare(t, path)
			}
			ln, err := Listen(path, tc.mode)
			if tc.err != nil || tc.errText != "" {
				if err == nil {
					ln.Close()
					t.Fatal("Listen succeeded")
				}
				if tc.err != nil && !errors.Is(err, tc.err) {
					t.Errorf("Listen: %v, want %v", err, tc.err)
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.errText) {
					t.Errorf("Listen: %q, want it to name %s and say %q", err, path, tc.errText)
				}
				if keep != nil {
					keep(t)
				}
				return
			}
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
			defer ln.Close()
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != tc.mode {
				t.Errorf("socket mode %v, want a socket with %v", fi.Mode(), tc.mode)
			}
			if ln.Path() != path || ln.Addr().String() != path {
				t.Errorf("Path %q Addr %q, want %q", ln.Path(), ln.Addr(), path)
			}
			// It serves: Dial reaches it.
			go func() {
				c, err := ln.Accept()
				if err == nil {
					io.WriteString(c, "hi")
					c.Close()
				}
			}()
			c, err := Dial(path, 0)
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			b, _ := io.ReadAll(c)
			c.Close()
			if string(b) != "hi" {
				t.Errorf("read %q over the socket", b)
			}
		})
	}
}

func TestListenPathTooLong(t *testing.T) {
	path := "/" + strings.Repeat("x", maxPathLen)
	if _, err := Listen(path, 0o660); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("Listen on a %d-byte path: %v", len(path), err)
	}
}

func TestListenEmptyPath(t *testing.T) {
	if _, err := Listen("", 0o660); err == nil {
		t.Fatal("Listen on an empty path succeeded")
	}
}

func TestCloseRemovesOnlyItsOwnFile(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "obol.sock")
	ln, err := Listen(path, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Close left the socket file: %v", err)
	}
	if err := ln.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v, want net.ErrClosed", err)
	}

	// A listener whose file was replaced (another agent took the path over)
	// leaves the new file alone.
	old, err := Listen(path, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	other, err := Listen(path, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(path, 0)
	if err != nil {
		t.Fatalf("the newer socket was removed by the older listener's Close: %v", err)
	}
	c.Close()
}

func TestDialNobody(t *testing.T) {
	path := filepath.Join(shortDir(t), "none.sock")
	_, err := Dial(path, 0)
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("Dial with no socket: %v, want ENOENT naming %s", err, path)
	}
	stale(t, path)
	if _, err := Dial(path, 0); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial on a stale socket: %v, want ECONNREFUSED", err)
	}
}

// TestDefaultPathRunDir: with no XDG_RUNTIME_DIR, an existing /run/obol wins
// over the per-user directory under /tmp.
func TestDefaultPathRunDir(t *testing.T) {
	defer func(r string) { RunDir = r }(RunDir)
	RunDir = t.TempDir()
	if got := DefaultPath(envOf(nil)); got != filepath.Join(RunDir, "obol.sock") {
		t.Errorf("DefaultPath = %q", got)
	}
}

// TestPrepareDefaultRefusesASquattedDirectory is a regression test of the
// hardening issue's ninth item: the default socket in a shared /tmp could be
// created first by another user. The default is now a 0700 directory of the
// user's own; one that is not a directory, is open to others, or (as root
// can check) belongs to someone else is refused.
func TestPrepareDefaultRefusesASquattedDirectory(t *testing.T) {
	defer func(d string) { TmpDir = d }(TmpDir)
	TmpDir = shortDir(t)
	path := filepath.Join(userTmpDir(), Name)
	if err := PrepareDefault(path); err != nil {
		t.Fatalf("fresh: %v", err)
	}
	if fi, err := os.Stat(userTmpDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("made %v %v, want mode 0700", fi.Mode(), err)
	}
	if err := PrepareDefault(path); err != nil {
		t.Errorf("again: %v", err)
	}
	os.Chmod(userTmpDir(), 0o777)
	if err := PrepareDefault(path); err == nil || !strings.Contains(err.Error(), "other users may enter it") {
		t.Errorf("open to others: %v", err)
	}
	os.Remove(userTmpDir())
	os.WriteFile(userTmpDir(), nil, 0o600)
	if err := PrepareDefault(path); err == nil || !strings.Contains(err.Error(), "regular file") {
		t.Errorf("a file in its place: %v", err)
	}
	os.Remove(userTmpDir())
	if os.Getuid() == 0 {
		os.Mkdir(userTmpDir(), 0o700)
		os.Chown(userTmpDir(), 4242, 4242)
		if err := PrepareDefault(path); err == nil || !strings.Contains(err.Error(), "belongs to another user (uid 4242)") {
			t.Errorf("another user's: %v", err)
		}
	}
	// Other paths are the operator's business.
	if err := PrepareDefault("/somewhere/else/obol.sock"); err != nil {
		t.Errorf("another path: %v", err)
	}
}
