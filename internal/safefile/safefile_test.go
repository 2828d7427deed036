package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// errAny stands for any error (the kernel's, reading /proc, or the cap's).
var errAny = errors.New("any error")

// TestRead reads what a config path may lead to: a regular file and a
// ConfigMap's symlinks are read; a FIFO, a device, a directory and a file
// over the cap are refused at once, naming the path.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(regular, []byte("resources: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A ConfigMap volume: name -> ..data/name, ..data -> a timestamped dir.
	if err := os.MkdirAll(filepath.Join(dir, "..2026_01_01"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "..2026_01_01", "cm.yaml"), []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2026_01_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/cm.yaml", filepath.Join(dir, "cm.yaml")); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, 101), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       string // content; "" when an error is wanted
		err        error
	}{
		{"a regular file", regular, "resources: {}\n", nil},
		{"a symlink chain to a regular file (a ConfigMap)", filepath.Join(dir, "cm.yaml"), "a: 1\n", nil},
		{"a file at the cap", big, "", ErrTooLarge},
		{"a FIFO", fifo, "", ErrNotRegular},
		{"a symlink to /dev/zero", filepath.Join(dir, "zero.yaml"), "", ErrNotRegular},
		{"/dev/zero", "/dev/zero", "", ErrNotRegular},
		{"a directory", dir, "", ErrNotRegular},
		{"/proc/self/pagemap (says 0 bytes, goes on)", "/proc/self/pagemap", "", ErrTooLarge},
		{"no file", filepath.Join(dir, "none.yaml"), "", fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.path == "/proc/self/pagemap" {
				if _, err := os.Stat(tc.path); err != nil {
					t.Skip("no /proc/self/pagemap on this system")
				}
			}
			done := make(chan struct{})
			var b []byte
			var err error
			go func() { defer close(done); b, err = Read(tc.path, 100) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Read blocked") // a deadline on something that must not block
			}
			if tc.err != nil {
				if err == nil || tc.err != errAny && !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				if tc.err != errAny && !strings.Contains(err.Error(), tc.path) {
					t.Errorf("the error %q does not name the path", err)
				}
				return
			}
			if err != nil || string(b) != tc.want {
				t.Fatalf("%q, %v; want %q", b, err, tc.want)
			}
		})
	}
}

func TestExcerpt(t *testing.T) {
	secret := "c2VjcmV0LWtleS1tYXRlcmlhbC1BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="
	for _, tc := range []struct{ in, want string }{
		{"short", `"short"`},
		{"exactly16bytes!!", `"exactly16bytes!!"`},
		{secret, `"c2VjcmV0LWtleS1t"… (60 bytes)`},
		{"line one\nline two", `"line one"… (17 bytes)`},
		{"\x00\x01", `"\x00\x01"`},
		{strings.Repeat("é", 20), `"` + strings.Repeat("é", 8) + `"… (40 bytes)`},
		{"", `""`},
	} {
		if got := Excerpt(tc.in); got != tc.want {
			t.Errorf("Excerpt(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func FuzzExcerpt(f *testing.F) {
	f.Add("hello\nworld")
	f.Fuzz(func(t *testing.T, s string) {
		e := Excerpt(s)
		if len(e) > 4*ExcerptLen+40 || strings.Contains(e, "\n") {
			t.Fatalf("Excerpt(%q) = %q: too long or more than a line", s, e)
		}
	})
}
