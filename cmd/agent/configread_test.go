package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/rls"
)

// runWithin runs the agent with args and returns its exit code and
// stderr; it fails if run has not returned after 20 s (a deadline on
// something that must not block, not a timing).
func runWithin(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), args, noEnv, &out, &errs) }()
	select {
	case err := <-done:
		return exitCode(err), out.String(), errs.String()
	case <-time.After(20 * time.Second):
		t.Fatalf("run %v did not return: blocked on its config", args)
		return 0, "", ""
	}
}

// TestConfigFileIntoDevicesRefused: --config (and --check-config) leading
// to a device, a FIFO or a file over the cap is refused at once, naming
// what it is; a symlink to a regular file (a ConfigMap's) is read.
func TestConfigFileIntoDevicesRefused(t *testing.T) {
	dir := tempDir(t)
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#\n"), config.MaxFileSize/2+1), 0o600); err != nil {
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
		name, path string
		code       int
		say        string
	}{
		{"/dev/zero", "/dev/zero", 2, "a character device"},
		{"a symlink to /dev/zero", zero, 2, "a character device"},
		{"a FIFO", fifo, 2, "a FIFO"},
		{"a file over the cap", big, 2, "over the cap of 4194304"},
		{"a symlink to a regular file", link, 0, "is valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runWithin(t, "--check-config", tc.path)
			if code != tc.code {
				t.Fatalf("--check-config: exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if tc.code != 0 && !strings.Contains(stderr, tc.say) {
				t.Errorf("--check-config: stderr does not say %q:\n%s", tc.say, stderr)
			}
			if tc.code != 0 {
				code, _, stderr = runWithin(t, "--config", tc.path, "--socket", "off", "--http", "127.0.0.1:0")
				if code != 2 || !strings.Contains(stderr, tc.say) {
					t.Errorf("--config: exit %d, want 2 saying %q; stderr:\n%s", code, tc.say, stderr)
				}
			}
		})
	}
}

// TestConfigReloadFromFIFODoesNotHang: the config file replaced by a FIFO,
// POST /v1/config/reload answers at once (the reload is refused, its lock
// let go), the watcher does not block, and the agent stops.
func TestConfigReloadFromFIFODoesNotHang(t *testing.T) {
	dir := tempDir(t)
	file := filepath.Join(dir, "obol.yaml")
	if err := os.WriteFile(file, []byte("resources:\n  a/b: {kind: gcra, burst: 3, count: 1, period: 1h}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	a := startAgent(t, []string{"--config", file, "--socket", sock, "--http", "127.0.0.1:0"}, noEnv, sock)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		t.Fatal(err)
	}
	c := unixClient(sock)
	c.Timeout = 20 * time.Second
	for i := range 2 { // a second reload finds the lock free
		resp, err := c.Post("http://obol/v1/config/reload", "", http.NoBody)
		if err != nil {
			t.Fatalf("reload %d: %v (blocked on the FIFO?)", i+1, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "FIFO") {
			t.Fatalf("reload %d: %d %s, want 400 naming the FIFO", i+1, resp.StatusCode, b)
		}
	}
	if err := a.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestRLSConfigIntoDevicesAndSecretsRefused: an RLS config file linked to
// a device or a FIFO is left out unopened; one linked to a /proc file
// that never ends, to a file that is a secret (the gossip key), or a large
// bad file refuses the directory at once, and the error (printed by
// --check-config, logged by the agent) quotes no more of the secret than
// a short excerpt and stays short.
func TestRLSConfigIntoDevicesAndSecretsRefused(t *testing.T) {
	dir := tempDir(t)
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("resources: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "c2VjcmV0LWtleS1tYXRlcmlhbC1BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="
	keyFile := filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(keyFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rlsDir := func(name string, setup func(p string)) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		setup(filepath.Join(d, "config.yaml"))
		return d
	}
	symlink := func(to string) func(string) {
		return func(p string) {
			if err := os.Symlink(to, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	// badFile returns an RLS config of about size bytes with a problem
	// on every other line (an unknown key).
	badFile := func(size int) []byte {
		var b bytes.Buffer
		b.WriteString("domain: d\ndescriptors:\n")
		for b.Len() < size {
			b.WriteString("  - key: k\n    nonsense_" + strings.Repeat("x", 200) + ": 1\n")
		}
		return b.Bytes()
	}
	writeFile := func(data []byte) func(string) {
		return func(p string) {
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		dir  string
		code int
		say  string
	}{
		// Not regular files: left out of the directory's files, never opened.
		{"/dev/zero", rlsDir("zero", symlink("/dev/zero")), 0, "0 domains"},
		{"a FIFO", rlsDir("fifo", func(p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}), 0, "0 domains"},
		// A /proc file is regular, says it is empty, and goes on for GBs.
		{"/proc/self/pagemap", rlsDir("pagemap", symlink("/proc/self/pagemap")), 2, "/pagemap/config.yaml"},
		{"the gossip key", rlsDir("key", symlink(keyFile)), 2, "want a mapping"},
		{"a 5 MB bad file", rlsDir("big", writeFile(badFile(5<<20))), 2, "over the cap"},
		{"a 3 MB bad file", rlsDir("bad", writeFile(badFile(3<<20))), 2, "more problem(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runWithin(t, "--check-config", good, "--rls-config", tc.dir, "--rls-socket", filepath.Join(dir, "r.sock"))
			if code != tc.code || !strings.Contains(stderr+stdout, tc.say) {
				t.Fatalf("exit %d, want %d saying %q; stderr:\n%.2000s\nstdout:\n%s", code, tc.code, tc.say, stderr, stdout)
			}
			if strings.Contains(stderr, secret[:17]) {
				t.Errorf("the error quotes more than %d bytes of the secret:\n%s", 16, stderr)
			}
			if len(stderr) > 32<<10 {
				t.Errorf("%d bytes of errors, want at most 32 KiB", len(stderr))
			}
		})
	}
	// The caps: a file at most rls.MaxFileSize, a directory rls.MaxDirSize.
	if rls.MaxFileSize != 4<<20 || rls.MaxDirSize != 16<<20 {
		t.Errorf("caps %d and %d: update docs/security.md", rls.MaxFileSize, rls.MaxDirSize)
	}
}
