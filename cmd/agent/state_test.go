package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/obol-dev/obol/gossip/packet"
)

func goodState(t *testing.T) []byte {
	t.Helper()
	b, err := encodeStateFile(&packet.Packet{From: "a", Incarnation: 7, Full: true,
		Names:  []packet.Name{{Hash: 1, Resource: "h/tiers", Domain: "u"}},
		Counts: []packet.Count{{Hash: 1, Slot: 1, Bucket: 1000, Value: 3}},
		Held:   []packet.Held{{From: "b", Incarnation: 2, Counts: []packet.Count{{Hash: 1, Slot: 1, Bucket: 1000, Value: 9}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStateFileRoundTrip(t *testing.T) {
	p, err := decodeStateFile(goodState(t))
	if err != nil {
		t.Fatal(err)
	}
	if p.From != "a" || p.Incarnation != 7 || len(p.Counts) != 1 || len(p.Held) != 1 || p.Held[0].Counts[0].Value != 9 {
		t.Fatalf("decoded %+v", p)
	}
}

// TestStateFileRefused: every way a state file can be bad is an error
// saying what is wrong, never a panic.
func TestStateFileRefused(t *testing.T) {
	good := goodState(t)
	flip := append([]byte(nil), good...)
	flip[len(flip)-3] ^= 0xff
	future := append([]byte(nil), good...)
	future[len(stateMagic)] = stateFormat + 1
	for _, tc := range []struct {
		name, want string
		b          []byte
	}{
		{"empty", "not an obol state file", nil},
		{"foreign", "not an obol state file", []byte("{\"counts\": []}")},
		{"header cut", "truncated", good[:stateHeader-2]},
		{"payload cut", "truncated", good[:len(good)-5]},
		{"padded", "truncated or padded", append(append([]byte(nil), good...), 0)},
		{"flipped byte", "checksum", flip},
		{"later format", "format 2", future},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeStateFile(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestReadStateFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := readState(filepath.Join(dir, "none")); !errors.Is(err, errNoState) {
		t.Fatalf("a missing file: %v, want errNoState", err)
	}
	if _, err := readState(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err == nil {
		if _, err := readState(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a FIFO (must not block): %v", err)
		}
	}
	if _, err := readState("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a device: %v", err)
	}
	path := filepath.Join(dir, "s")
	if err := writeState(path, goodState(t)); err != nil {
		t.Fatal(err)
	}
	if p, err := readState(path); err != nil || p.From != "a" {
		t.Fatalf("readState after writeState: %+v, %v", p, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the state file's mode: %v, %v; want 0600", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("a temporary file was left: %s", e.Name())
		}
	}
}

func TestCheckStateWritable(t *testing.T) {
	dir := t.TempDir()
	if err := checkStateWritable(filepath.Join(dir, "s")); err != nil {
		t.Fatal(err)
	}
	err := checkStateWritable(filepath.Join(dir, "missing-dir", "s"))
	if err == nil || !strings.Contains(err.Error(), "missing-dir") {
		t.Fatalf("a state file in a missing directory: %v, want an error naming the path", err)
	}
	if err := checkStateWritable(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a directory as the state file: %v", err)
	}
	if os.Getuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		if err := checkStateWritable(filepath.Join(ro, "s")); err == nil {
			t.Fatal("a read-only directory was taken")
		}
	}
}

// TestServeRefusesUnwritableState: an agent whose state file cannot be
// written stops at start with status 1 and a message naming the path.
func TestServeRefusesUnwritableState(t *testing.T) {
	dir := t.TempDir()
	var stderr syncBuffer
	bad := filepath.Join(dir, "no-such-dir", "obol.state")
	err := run(t.Context(), []string{"--socket", filepath.Join(dir, "s.sock"), "--http", "off", "--state-file", bad}, func(string) string { return "" }, &stderr, &stderr)
	if exitCode(err) != exitFailure || !strings.Contains(stderr.String(), bad) {
		t.Fatalf("exit %d (%v), stderr:\n%s\nwant status 1 naming %s", exitCode(err), err, stderr.String(), bad)
	}
}

func FuzzStateFile(f *testing.F) {
	b, _ := encodeStateFile(&packet.Packet{From: "a", Full: true, Held: []packet.Held{{From: "b", Counts: []packet.Count{{Hash: 1, Value: 2}}}}})
	f.Add(b)
	f.Add([]byte(stateMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeStateFile(b)
		if err == nil && (p == nil || !p.Full) {
			t.Fatalf("accepted a state that is not full: %+v", p)
		}
	})
}
