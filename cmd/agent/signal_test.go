package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalExitsZero runs the built binary and stops it with SIGTERM, then
// SIGINT: each is a clean stop, exit status 0 and the socket removed.
func TestSignalExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent; run without -short")
	}
	dir := tempDir(t)
	bin := buildAgent(t, dir)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		socket := filepath.Join(dir, "obol.sock")
		stderr := &syncBuffer{}
		cmd := exec.Command(bin, "--socket", socket, "--http", "off")
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stderr.Wait(t, 10*time.Second, "obol agent started")
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("after %v: %v, want exit status 0; stderr:\n%s", sig, err, stderr)
		}
		if !strings.Contains(stderr.String(), `"msg":"obol agent stopped"`) {
			t.Errorf("after %v: no clean-stop line in the log:\n%s", sig, stderr)
		}
		if _, err := os.Stat(socket); !os.IsNotExist(err) {
			t.Errorf("after %v: the socket is still there (%v)", sig, err)
		}
	}
}
