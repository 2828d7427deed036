package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/safefile"
	"github.com/obol-dev/obol/reconcile"
)

// The state file (--state-file): the agent's whole view of the counts, its
// own and those it holds for peers (reconcile.Cluster.Snapshot), written
// atomically (a temporary file beside it, fsync, rename, fsync of the
// directory) every --state-interval and on a clean stop, and merged at
// start (reconcile.Cluster.Restore) as a peer's state is merged: windows
// that ended while the agent was down are not restored, and counts peers
// pass on as well are counted once.
//
// The file: the magic "obol-state", a format version byte, the CRC-32
// (IEEE) of the payload and its length (big-endian uint32 and uint64),
// then the payload, a mesh state (packet.EncodeState).

const (
	defaultStateInterval = 5 * time.Second
	stateMagic           = "obol-state"
	stateFormat          = 1
	stateHeader          = len(stateMagic) + 1 + 4 + 8
	// maxStateFile is the largest state file read: a larger one is
	// logged and ignored, never read into memory.
	maxStateFile = 1 << 30
)

// errNoState is the error of readState for a file that does not exist.
var errNoState = errors.New("no state file yet")

// encodeStateFile returns the file's bytes for snapshot p.
func encodeStateFile(p *packet.Packet) ([]byte, error) {
	payload, err := packet.EncodeState(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, stateHeader+len(payload))
	b = append(b, stateMagic...)
	b = append(b, stateFormat)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(payload))
	b = binary.BigEndian.AppendUint64(b, uint64(len(payload)))
	return append(b, payload...), nil
}

// decodeStateFile parses a state file's bytes; its error says what is
// wrong (not a state file, a later format, truncated, corrupt).
func decodeStateFile(b []byte) (*packet.Packet, error) {
	if len(b) < len(stateMagic) || !bytes.Equal(b[:len(stateMagic)], []byte(stateMagic)) {
		return nil, errors.New("not an obol state file (it does not start with \"obol-state\")")
	}
	if len(b) < stateHeader {
		return nil, fmt.Errorf("truncated: %d bytes, shorter than the %d-byte header", len(b), stateHeader)
	}
	if v := b[len(stateMagic)]; v != stateFormat {
		return nil, fmt.Errorf("format %d, this build reads format %d (written by a later release?)", v, stateFormat)
	}
	sum := binary.BigEndian.Uint32(b[len(stateMagic)+1:])
	n := binary.BigEndian.Uint64(b[len(stateMagic)+5:])
	payload := b[stateHeader:]
	if uint64(len(payload)) != n {
		return nil, fmt.Errorf("truncated or padded: %d bytes of state after the header, the header says %d", len(payload), n)
	}
	if crc32.ChecksumIEEE(payload) != sum {
		return nil, errors.New("corrupt: the checksum does not match")
	}
	p, err := packet.DecodeState(payload)
	if err != nil {
		return nil, fmt.Errorf("corrupt: %w", err)
	}
	return p, nil
}

// readState reads the state file at path: errNoState when there is none,
// another error when it is not a regular file, too large, or not a good
// state file. It never blocks on a FIFO or reads a device.
func readState(path string) (*packet.Packet, error) {
	b, err := safefile.Read(path, maxStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoState
	}
	if err != nil {
		return nil, err
	}
	return decodeStateFile(b)
}

// writeState writes b to path atomically: a reader (or a restart after a
// crash at any instant) sees the previous file or this one, whole.
func writeState(path string, b []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(name)
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename itself, durable where the file system allows
		d.Close()
	}
	return nil
}

// checkStateWritable reports, naming the path, whether the agent can write
// its state file there: a file (or nothing yet) in a directory it can
// create files in.
func checkStateWritable(path string) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("--state-file %q: not a regular file (%s)", path, fi.Mode().Type())
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".check-*")
	if err != nil {
		return fmt.Errorf("--state-file %q: cannot write beside it: %w", path, err)
	}
	tmp.Close()
	os.Remove(tmp.Name())
	return nil
}

// stateKeeper writes rec's state to its file.
type stateKeeper struct {
	path     string
	interval time.Duration
	rec      *reconcile.Cluster
	log      *slog.Logger

	mu      sync.Mutex // one write at a time
	failing bool       // the last write failed (logged once until one succeeds)
}

// restore merges the file's state into rec, logging what happened: a
// missing file is normal (the first start); a bad one is logged, naming
// the file and what was wrong, and ignored.
func (k *stateKeeper) restore() {
	start := time.Now()
	p, err := readState(k.path)
	switch {
	case errors.Is(err, errNoState):
		k.log.Info("obol state file: none yet, starting from no counts", "state_file", k.path)
		return
	case err != nil:
		k.log.Warn("obol state file ignored: starting from no counts", "state_file", k.path, "err", err)
		return
	}
	n := k.rec.Restore(p)
	k.log.Info("obol state file restored", "state_file", k.path, "written_by", p.From, "incarnation", p.Incarnation,
		"origins", 1+len(p.Held), "counts_restored", n, "took", time.Since(start).String())
}

// write writes the state once; a failure is logged once until a write
// succeeds again.
func (k *stateKeeper) write() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, err := encodeStateFile(k.rec.Snapshot())
	if err == nil {
		err = writeState(k.path, b)
	}
	if err != nil {
		if !k.failing {
			k.log.Error("obol state file not written", "state_file", k.path, "err", err)
		}
		k.failing = true
		return err
	}
	if k.failing {
		k.log.Info("obol state file written again", "state_file", k.path)
	}
	k.failing = false
	return nil
}

// run writes the state every interval until ctx is done.
func (k *stateKeeper) run(ctx context.Context) {
	t := time.NewTicker(k.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = k.write()
		}
	}
}
