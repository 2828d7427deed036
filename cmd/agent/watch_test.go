package main

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/api"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// fakeFile plays configFile for the watcher's step: the content in force,
// the last content read, and the reloads asked for (each "reads" what the
// watcher saw last, good unless bad says otherwise).
type fakeFile struct {
	inForce, last digest
	reloads       int
	bad           map[digest]bool
	seen          digest
}

func (f *fakeFile) known(s digest) bool { return s == f.inForce || s == f.last }

func (f *fakeFile) reload() {
	f.reloads++
	f.last = f.seen
	if !f.bad[f.seen] {
		f.inForce = f.seen
	}
}

func sum(s string) digest { return sha256.Sum256([]byte(s)) }

// TestWatcherStep drives the watcher's step with fake reads and a fake
// clock: a change is loaded once it reads the same for the quiet period, a
// burst once, unchanged content never, a bad one once, an unreadable file
// never.
func TestWatcherStep(t *testing.T) {
	const quiet = time.Second
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	newWatcher := func() (*watcher, *fakeFile, *syncBuffer) {
		f := &fakeFile{inForce: sum("a"), last: sum("a"), bad: map[digest]bool{}}
		logs := &syncBuffer{}
		w := &watcher{path: "/etc/obol/config.yaml", quiet: quiet, known: f.known, reload: f.reload,
			log: slog.New(slog.NewJSONHandler(logs, nil))}
		return w, f, logs
	}
	// feed steps through reads of content (an error for "!missing"), one
	// every 250ms from t0+at, and returns the reloads so far.
	feed := func(w *watcher, f *fakeFile, at time.Duration, contents ...string) int {
		for i, c := range contents {
			o := observation{sum: sum(c)}
			if c == "!missing" {
				o = observation{err: fs.ErrNotExist}
			}
			f.seen = o.sum
			w.step(t0.Add(at+time.Duration(i)*250*time.Millisecond), o)
		}
		return f.reloads
	}

	t.Run("unchanged content is never reloaded", func(t *testing.T) {
		w, f, _ := newWatcher()
		if n := feed(w, f, 0, "a", "a", "a", "a", "a", "a", "a", "a", "a", "a"); n != 0 {
			t.Errorf("%d reloads of unchanged content", n)
		}
	})
	t.Run("a change is loaded after the quiet period, once", func(t *testing.T) {
		w, f, _ := newWatcher()
		// Seen at 0, 250, 500, 750 ms: not yet quiet for 1 s.
		if n := feed(w, f, 0, "b", "b", "b", "b"); n != 0 {
			t.Fatalf("reloaded after %v of quiet, want after %v", 750*time.Millisecond, quiet)
		}
		if n := feed(w, f, time.Second, "b"); n != 1 {
			t.Fatalf("%d reloads after 1 s of quiet, want 1", n)
		}
		if n := feed(w, f, 1250*time.Millisecond, "b", "b", "b", "b", "b", "b"); n != 1 {
			t.Errorf("%d reloads, want 1: loaded content was reloaded", n)
		}
	})
	t.Run("a burst of writes is loaded once, when it ends", func(t *testing.T) {
		w, f, _ := newWatcher()
		// A new content every read for 3 s (a slow copy), then stable.
		var burst []string
		for i := range 12 {
			burst = append(burst, fmt.Sprintf("partial %d", i))
		}
		if n := feed(w, f, 0, burst...); n != 0 {
			t.Fatalf("%d reloads during the burst", n)
		}
		if n := feed(w, f, 3*time.Second, "final", "final", "final", "final", "final", "final", "final"); n != 1 {
			t.Fatalf("%d reloads after the burst, want 1", n)
		}
		if f.inForce != sum("final") {
			t.Errorf("the content in force is not the burst's last")
		}
	})
	t.Run("a bad file is tried once; the next good one is taken", func(t *testing.T) {
		w, f, _ := newWatcher()
		f.bad[sum("bad")] = true
		if n := feed(w, f, 0, "bad", "bad", "bad", "bad", "bad", "bad", "bad", "bad", "bad", "bad"); n != 1 {
			t.Fatalf("%d reloads of a bad file, want 1 (refused, not retried)", n)
		}
		if f.inForce != sum("a") {
			t.Fatalf("a bad file was put in force")
		}
		if n := feed(w, f, 3*time.Second, "c", "c", "c", "c", "c"); n != 2 || f.inForce != sum("c") {
			t.Fatalf("%d reloads, want 2 with the good file in force", n)
		}
	})
	t.Run("back to the content in force after a refused one: no reload", func(t *testing.T) {
		w, f, _ := newWatcher()
		f.bad[sum("bad")] = true
		feed(w, f, 0, "bad", "bad", "bad", "bad", "bad")
		if n := feed(w, f, 2*time.Second, "a", "a", "a", "a", "a", "a"); n != 1 {
			t.Errorf("%d reloads, want 1 (the bad file's only)", n)
		}
	})
	t.Run("back to the content in force before the quiet period ends: no reload", func(t *testing.T) {
		w, f, _ := newWatcher()
		if n := feed(w, f, 0, "b", "b", "a", "a", "a", "a", "a", "a"); n != 0 {
			t.Errorf("%d reloads, want 0", n)
		}
	})
	t.Run("loaded by another (SIGHUP) meanwhile: no reload", func(t *testing.T) {
		w, f, _ := newWatcher()
		feed(w, f, 0, "b", "b")
		f.inForce, f.last = sum("b"), sum("b") // a SIGHUP loaded it
		if n := feed(w, f, 500*time.Millisecond, "b", "b", "b", "b", "b", "b"); n != 0 {
			t.Errorf("%d reloads of content a SIGHUP loaded", n)
		}
	})
	t.Run("an unreadable file keeps the config, is logged once, and its return is taken", func(t *testing.T) {
		w, f, logs := newWatcher()
		if n := feed(w, f, 0, "b", "!missing", "!missing", "!missing", "!missing", "!missing", "!missing"); n != 0 {
			t.Fatalf("%d reloads while the file is missing", n)
		}
		if c := strings.Count(logs.String(), "config file cannot be read"); c != 1 {
			t.Errorf("the missing file was logged %d times, want once:\n%s", c, logs)
		}
		// Recreated with the content in force: nothing to do.
		if n := feed(w, f, 2*time.Second, "a", "a", "a", "a", "a", "a"); n != 0 {
			t.Fatalf("%d reloads of the recreated, unchanged file", n)
		}
		if !strings.Contains(logs.String(), "config file can be read again") {
			t.Errorf("the file's return was not logged:\n%s", logs)
		}
		feed(w, f, 4*time.Second, "!missing")
		if n := feed(w, f, 5*time.Second, "d", "d", "d", "d", "d"); n != 1 || f.inForce != sum("d") {
			t.Errorf("%d reloads of the recreated, changed file, want 1", n)
		}
	})
}

// watchRig is a real server with a real config file and a watcher stepped
// by hand on a fake clock: real files, the real Reload, no timers.
type watchRig struct {
	t    *testing.T
	dir  string
	path string // the path the agent is given
	file *configFile
	srv  *api.Server
	w    *watcher
	logs *syncBuffer
	now  time.Time
}

// newWatchRig starts a rig whose config file is at name in a new dir,
// written by write with burst 1 first.
func newWatchRig(t *testing.T, name string, write func(r *watchRig, content string)) *watchRig {
	t.Helper()
	r := &watchRig{t: t, dir: t.TempDir(), logs: &syncBuffer{}, now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	r.path = filepath.Join(r.dir, name)
	write(r, gcraConfig(1))
	r.file = &configFile{path: r.path}
	cfg, err := r.file.load()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(r.logs, nil))
	r.srv = api.New(local.New(cfg), api.Options{Logger: log, LoadConfig: func() (*config.Config, string, error) {
		c, err := r.file.load()
		return c, r.path, err
	}})
	r.w = &watcher{path: r.path, quiet: watchQuiet, known: r.file.known, reload: func() { _, _ = r.srv.Reload() }, log: log}
	return r
}

// settle steps the watcher over the file as it reads now, for one quiet
// period and a step more, and returns how many reloads that took.
func (r *watchRig) settle() int {
	n := 0
	for range 3 {
		if r.w.step(r.now, observe(r.path)) {
			n++
		}
		r.now = r.now.Add(watchQuiet / 2)
	}
	return n
}

// burst returns the burst of resource a/b in force.
func (r *watchRig) burst() int {
	return r.srv.Engine().Config().Resources["a/b"].Burst
}

func gcraConfig(burst int) string {
	return fmt.Sprintf("resources:\n  a/b: {kind: gcra, burst: %d, count: 1, period: 1h}\n", burst)
}

func writeInPlace(r *watchRig, content string) {
	r.t.Helper()
	// O_TRUNC on the same inode, as `cat > file` or an editor saving in
	// place.
	if err := os.WriteFile(r.path, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func writeRenameOver(r *watchRig, content string) {
	r.t.Helper()
	tmp := filepath.Join(r.dir, ".config.yaml.swp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, r.path); err != nil {
		r.t.Fatal(err)
	}
}

// writeKubelet updates a ConfigMap volume the way kubelet does: the new
// content in a new timestamped directory, a temporary symlink to it renamed
// over ..data (one atomic swap), the file's own symlink (name ->
// ..data/name) made once, the old directory removed.
func writeKubelet(r *watchRig, content string) {
	r.t.Helper()
	name := filepath.Base(r.path)
	old, _ := os.Readlink(filepath.Join(r.dir, "..data"))
	ts := fmt.Sprintf("..2026_01_02_15_04_05.%09d", time.Now().UnixNano()%1e9)
	for ts == old {
		ts += "0"
	}
	if err := os.Mkdir(filepath.Join(r.dir, ts), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, ts, name), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	tmp := filepath.Join(r.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(r.dir, "..data")); err != nil {
		r.t.Fatal(err)
	}
	if _, err := os.Lstat(r.path); errors.Is(err, fs.ErrNotExist) {
		if err := os.Symlink(filepath.Join("..data", name), r.path); err != nil {
			r.t.Fatal(err)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(r.dir, old)); err != nil {
			r.t.Fatal(err)
		}
	}
}

func writeDeleteRecreate(r *watchRig, content string) {
	r.t.Helper()
	if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.t.Fatal(err)
	}
	// The watcher may read while the file is gone.
	if r.w != nil && r.w.step(r.now, observe(r.path)) {
		r.t.Fatal("reloaded while the file was gone")
	}
	writeInPlace(r, content)
}

// TestWatchFiles: every way a file is replaced reloads it once, through the
// server's Reload; unchanged content does not; a bad file is refused with
// every problem logged and the config in force kept, and the next good one
// is taken.
func TestWatchFiles(t *testing.T) {
	writers := []struct {
		name  string
		write func(*watchRig, string)
	}{
		{"in place", writeInPlace},
		{"rename over", writeRenameOver},
		{"kubelet ..data swap", writeKubelet},
		{"delete and recreate", writeDeleteRecreate},
	}
	for _, wr := range writers {
		t.Run(wr.name, func(t *testing.T) {
			r := newWatchRig(t, "config.yaml", wr.write)
			if n := r.settle(); n != 0 || r.burst() != 1 {
				t.Fatalf("%d reloads of the file as started (burst %d)", n, r.burst())
			}
			wr.write(r, gcraConfig(2))
			if n := r.settle(); n != 1 || r.burst() != 2 {
				t.Fatalf("after a change: %d reloads, burst %d; want 1, 2; logs:\n%s", n, r.burst(), r.logs)
			}
			wr.write(r, gcraConfig(2))
			if n := r.settle(); n != 0 {
				t.Fatalf("the same content written again: %d reloads, want 0", n)
			}
			wr.write(r, "resources:\n  a/b: {kind: gcra, burst: -1, count: 1, period: 1h, colour: red}\n")
			if n := r.settle(); n != 1 || r.burst() != 2 {
				t.Fatalf("a bad file: %d reloads, burst %d; want 1 refused reload and burst 2 kept", n, r.burst())
			}
			logs := r.logs.String()
			if !strings.Contains(logs, "config reload refused") || !strings.Contains(logs, "burst") || !strings.Contains(logs, "colour") {
				t.Fatalf("the refusal did not list every problem (burst, colour):\n%s", logs)
			}
			if n := r.settle(); n != 0 {
				t.Fatalf("the bad file was retried: %d reloads", n)
			}
			wr.write(r, gcraConfig(3))
			if n := r.settle(); n != 1 || r.burst() != 3 {
				t.Fatalf("the good file after a bad one: %d reloads, burst %d; want 1, 3", n, r.burst())
			}
		})
	}
	t.Run("kubelet swap of a ConfigMap whose other key changed", func(t *testing.T) {
		// kubelet swaps ..data when any key of the ConfigMap changes; the
		// agent's file reads the same, so nothing is reloaded.
		r := newWatchRig(t, "config.yaml", writeKubelet)
		writeKubelet(r, gcraConfig(1))
		if n := r.settle(); n != 0 {
			t.Fatalf("%d reloads of an unchanged file after a swap", n)
		}
	})
}

// TestRunWatchesConfig: the agent, run as in a pod, reloads when kubelet
// swaps its ConfigMap volume, on its own timer; an agent started with
// OBOL_WATCH_CONFIG=false on the same file does not.
func TestRunWatchesConfig(t *testing.T) {
	r := &watchRig{t: t, dir: tempDir(t)}
	r.path = filepath.Join(r.dir, "config.yaml")
	writeKubelet(r, gcraConfig(1))
	sockOn, sockOff := filepath.Join(r.dir, "on.sock"), filepath.Join(r.dir, "off.sock")
	on := startAgent(t, []string{"--config", r.path, "--socket", sockOn, "--http", "off"}, noEnv, sockOn)
	off := startAgent(t, []string{"--config", r.path, "--socket", sockOff, "--http", "off"}, envOf(map[string]string{"OBOL_WATCH_CONFIG": "false"}), sockOff)
	for _, a := range []*agent{on, off} {
		if !strings.Contains(a.stderr.String(), `"watch_config":`+fmt.Sprint(a == on)) {
			t.Fatalf("the start line does not say watch_config %v:\n%s", a == on, a.stderr)
		}
	}
	start := time.Now() // before the swap: the watcher may read it at once
	writeKubelet(r, gcraConfig(5))
	// A reload is logged once the new config is in force.
	if line := on.stderr.WaitJSON(t, 10*time.Second, "config reloaded"); line["version"] != 2.0 {
		t.Fatalf("the watching agent reloaded to version %v, want 2", line["version"])
	}
	took := time.Since(start)
	if v := configVersion(t, sockOn); v != 2 {
		t.Fatalf("the watching agent serves version %v after its reload, want 2", v)
	}
	if took < watchQuiet {
		t.Errorf("reloaded %v after the swap, before the quiet period %v", took, watchQuiet)
	}
	// The other agent reads the same file; by the time the watching one has
	// reloaded, one more read and quiet period would have been enough. What
	// is tested is that nothing happens in that time: no event can mark it.
	time.Sleep(watchEvery + watchQuiet)
	if v := configVersion(t, sockOff); v != 1 {
		t.Fatalf("the agent with OBOL_WATCH_CONFIG=false reloaded (version %v)", v)
	}
	if !strings.Contains(on.stderr.String(), "config file changed; reloading") {
		t.Errorf("the reload was not logged as the watcher's:\n%s", on.stderr)
	}
	t.Logf("reloaded %v after the swap", took.Round(time.Millisecond))
}

// configVersion returns GET /v1/config's version through the socket.
func configVersion(t *testing.T, sock string) float64 {
	t.Helper()
	resp, err := unixClient(sock).Get("http://obol/v1/config")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v struct{ Version float64 }
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("GET /v1/config: %v: %s", err, b)
	}
	return v.Version
}
