package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/obol-dev/obol/config"
)

// watch.go re-reads the config file when its content changes, through the
// same reload as SIGHUP and POST /v1/config/reload.
//
// The watcher polls: every watchEvery it reads the file through its path
// (following every symlink) and compares the SHA-256 of the bytes with the
// digest of the bytes the last load read. Content, not metadata, decides,
// so every way a file is replaced is seen alike: an edit in place, a rename
// over it (editors, mv), a delete and recreate, and Kubernetes' ConfigMap
// volume, where the path is a symlink config.yaml -> ..data/config.yaml and
// kubelet swaps the ..data symlink to a new directory in one rename. The
// alternative, inotify (fsnotify), sees none of that swap through the
// file's own name, only events on its directory, misses a symlink whose
// target lives elsewhere, fails on network and FUSE filesystems, and takes
// an inotify instance from a per-user budget (128 by default) that every
// container of the same uid on a node shares. The cost of polling is one
// read of a small file a second; the latency it adds (1 to 2 s) is small
// beside kubelet's own delay in updating a ConfigMap volume (up to a
// minute or more).
//
// Debounce: a new content is loaded once it has read the same for
// watchQuiet, so a burst of writes (an editor saving in steps, a copy in
// progress) is loaded once, when it ends, and a half-written file is not.
// Content that is in force is not loaded again, whoever loaded it (the
// start, SIGHUP, POST /v1/config/reload or the watcher): the loads record
// what they read (configFile). A bad file is refused by the reload, which
// logs every problem and counts it, and is not retried until the content
// changes again. A file that cannot be read (deleted, a dangling symlink) keeps
// the config in force; the watcher logs it once and waits for the file.

// Watcher timing.
const (
	// watchEvery is how often the watcher reads the config file.
	watchEvery = time.Second
	// watchQuiet is how long a new content must read the same before it
	// is loaded: a change is in force 1 to 2 s after the last write.
	watchQuiet = time.Second
)

// digest is the SHA-256 of a config file's bytes.
type digest [sha256.Size]byte

// configFile is the agent's config file and what its loads read: the
// digest of the content in force and of the last content read. It is safe
// for concurrent use.
type configFile struct {
	path string

	mu      sync.Mutex
	inForce digest // the last content that parsed
	last    digest // the last content read, good or bad
	read    bool   // a load has read the file
}

// load reads and parses the file as config.Load does (the same errors:
// a read error wrapped as "config: …", a *config.Problems as "config file
// PATH: …") and records the digest of the bytes it read, and, when they
// parse, that they are the content in force: its caller puts a config that
// loads in force (the start, Server.Reload). A file that cannot be read
// records nothing.
func (f *configFile) load() (*config.Config, error) {
	data, err := config.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	sum := sha256.Sum256(data)
	c, err := config.Parse(data)
	f.mu.Lock()
	f.last, f.read = sum, true
	if err == nil {
		f.inForce = sum
	}
	f.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", f.path, err)
	}
	return c, nil
}

// known reports whether sum is the content in force or the last content a
// load read (a refused one): loading it again would change nothing.
func (f *configFile) known(sum digest) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.read && (sum == f.inForce || sum == f.last)
}

// observation is what one read of the config file gave: the digest of its
// bytes, or the error that stopped the read.
type observation struct {
	sum digest
	err error
}

// observe reads the file at path.
func observe(path string) observation {
	data, err := config.ReadFile(path)
	if err != nil {
		return observation{err: err}
	}
	return observation{sum: sha256.Sum256(data)}
}

// watcher decides, read after read, when the config file must be
// reloaded. Its step is the whole decision and does no I/O; run feeds it.
// It is not safe for concurrent use (one goroutine runs it).
type watcher struct {
	path   string
	what   string             // what is watched, in the log lines: "config file" when ""
	keeps  string             // what the log says while it cannot be read: "the config in force stays, watching for the file" when ""
	read   func() observation // one read of what is watched: observe(path) when nil
	quiet  time.Duration
	known  func(digest) bool // content in force or refused last (configFile.known)
	reload func()            // the server's reload: loads, logs, counts
	log    *slog.Logger

	pending    digest    // a content seen that is not the one loaded
	since      time.Time // when pending was first seen, unchanged since
	hasPending bool
	unreadable bool // the last read failed (logged once)
}

// step takes what the file read at now and reloads when a content not
// known (in force, or refused last) has read the same for w.quiet. It reports whether
// it reloaded.
func (w *watcher) step(now time.Time, o observation) bool {
	if o.err != nil {
		if !w.unreadable {
			w.unreadable = true
			w.log.Warn(w.whatOr()+" cannot be read; "+or(w.keeps, "the config in force stays, watching for the file"), "path", w.path, "err", o.err)
		}
		w.hasPending = false
		return false
	}
	if w.unreadable {
		w.unreadable = false
		w.log.Info(w.whatOr()+" can be read again", "path", w.path)
	}
	if w.known(o.sum) {
		w.hasPending = false // back to what is in force, or loaded by another
		return false
	}
	if !w.hasPending || o.sum != w.pending {
		w.pending, w.since, w.hasPending = o.sum, now, true
		return false
	}
	if now.Sub(w.since) < w.quiet {
		return false
	}
	w.hasPending = false
	w.log.Info(w.whatOr()+" changed; reloading", "path", w.path)
	w.reload()
	return true
}

// run reads the file every interval and steps until ctx is done.
func (w *watcher) run(ctx context.Context, every time.Duration) {
	read := w.read
	if read == nil {
		read = func() observation { return observe(w.path) }
	}
	stepLoop(ctx, every, time.Now, func(now time.Time) { w.step(now, read()) })
}

func (w *watcher) whatOr() string { return or(w.what, "config file") }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
