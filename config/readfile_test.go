package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/obol-dev/obol/internal/safefile"
)

// TestLoadConfigIntoDevicesRefused: Load (and so every read of the config
// file) refuses at once a path leading to a device or a FIFO, or a file
// over MaxFileSize, and reads one through a symlink.
func TestLoadConfigIntoDevicesRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(strings.Repeat("#", MaxFileSize+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("resources:\n  a/g: {kind: gcra, burst: 1, count: 1, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		err  error
	}{
		{"/dev/zero", safefile.ErrNotRegular},
		{fifo, safefile.ErrNotRegular},
		{big, safefile.ErrTooLarge},
		{dir, safefile.ErrNotRegular},
		{link, nil},
	} {
		c, err := Load(tc.path)
		if !errors.Is(err, tc.err) || (tc.err == nil) != (c != nil) {
			t.Errorf("Load(%s): %v, want %v", tc.path, err, tc.err)
		}
	}
}
