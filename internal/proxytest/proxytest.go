// This file has one job: the helpers every proxy example's test calls
// (building and starting the agent, the proxy and the counting upstream,
// waiting for them, and the requests and checks the tests share).

package proxytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/await"
	"github.com/obol-dev/obol/internal/freeport"
)

// AgentConfig is the agent's config in the proxy tests: api/search allows
// 3 requests a minute per domain (a client address), api/tenant 2 a minute
// (a tenant), except the tenant "bench" (latency measurements'), which is
// never limited in practice.
const AgentConfig = `
resources:
  api/search:
    kind: gcra
    burst: 3
    count: 3
    period: 1m
  api/tenant:
    kind: gcra
    burst: 2
    count: 2
    period: 1m
    domains:
      bench: {burst: 1000000, count: 1000000, period: 1s}
`

// The RateLimit-Policy fields of AgentConfig's resources.
const (
	SearchPolicy = `"gcra";q=3;w=60`
	TenantPolicy = `"gcra";q=2;w=60`
)

// BuildAgent builds ./cmd/agent with go build into dir and returns the
// binary's path. It fails the test when the build fails.
func BuildAgent(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "agent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/obol-dev/obol/cmd/agent").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/agent: %v\n%s", err, out)
	}
	return bin
}

// Find returns the path of the program name, looked up in $PATH and then in
// /usr/sbin and /usr/bin (where Debian installs nginx and haproxy, outside
// a non-root $PATH), or "" when it is not installed.
func Find(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// FreePort returns a loopback TCP port that was free a moment ago, for a
// program that cannot be told to pick its own and report it.
// (See package internal/freeport: the port is below the kernel's
// ephemeral range, where no other test's connection takes it meanwhile.)
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Buffer is an io.Writer safe for concurrent use, for a child's output; a
// test waits on its writes for a line to appear.
type Buffer = await.Log

// Proc is a child process whose stdout and stderr go to Output.
type Proc struct {
	Name   string
	Output *Buffer
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
}

// Start starts argv as a child named name. The test's cleanup stops it
// (SIGTERM, then SIGKILL after 10 s) unless it was stopped already.
func Start(t testing.TB, name string, argv ...string) *Proc {
	t.Helper()
	return StartEnv(t, name, nil, argv...)
}

// StartEnv is Start with env (KEY=value entries) added to the environment.
func StartEnv(t testing.TB, name string, env []string, argv ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Output: &Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.Output, p.Output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if p.Exited() {
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.Name, err)
	}
}

// Stop sends SIGTERM and waits up to 10 s for the process to exit; it fails
// the test if the process does not exit, or exits with an error.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit within 10 s of SIGTERM; output:\n%s", p.Name, p.Output)
	}
	if p.err != nil {
		t.Fatalf("%s exited with %v; output:\n%s", p.Name, p.err, p.Output)
	}
}

// WaitFor polls cond (await.Poll's intervals) until it returns nil,
// failing the test with cond's last error after d, or as soon as one of
// procs exits. It is for what the children show only in their replies:
// no event crosses the process.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() error, procs ...*Proc) {
	t.Helper()
	var err error
	var gone *Proc
	await.PollOK(d, func() bool {
		if err = cond(); err == nil {
			return true
		}
		for _, p := range procs {
			if p.Exited() {
				gone = p
				return true
			}
		}
		return false
	})
	switch {
	case err == nil:
	case gone != nil:
		t.Fatalf("waiting for %s: %s exited (%v); output:\n%s", what, gone.Name, gone.err, gone.Output)
	default:
		t.Fatalf("waiting for %s: still %v after %v", what, err, d)
	}
}

// Agent is the obol agent running from a built binary.
type Agent struct {
	*Proc
	Bin    string
	Args   []string
	Socket string
	client *http.Client
}

// StartAgent starts bin with --config config, --socket socket and the extra
// args, and waits until /readyz answers 200 on the socket.
func StartAgent(t testing.TB, bin, config, socket string, extra ...string) *Agent {
	t.Helper()
	a := &Agent{Bin: bin, Socket: socket, Args: append([]string{"--config", config, "--socket", socket}, extra...)}
	a.client = UnixClient(socket)
	a.Restart(t)
	return a
}

// Restart starts the agent again with the same arguments (after Stop) and
// waits until it is ready.
func (a *Agent) Restart(t testing.TB) {
	t.Helper()
	a.Proc = Start(t, "agent", append([]string{a.Bin}, a.Args...)...)
	a.client.CloseIdleConnections()
	WaitFor(t, 10*time.Second, "the agent to be ready", func() error {
		resp, err := a.client.Get("http://obol/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", resp.StatusCode)
		}
		return nil
	}, a.Proc)
}

// Get asks the agent GET path over its socket and returns the status.
func (a *Agent) Get(t testing.TB, path string) int {
	t.Helper()
	resp, err := a.client.Get("http://obol" + path)
	if err != nil {
		t.Fatalf("GET %s from the agent: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// UnixClient is an HTTP client that reaches every URL's server over the
// Unix socket path.
func UnixClient(path string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
		Timeout: 5 * time.Second,
	}
}

// ClientFrom is an HTTP client whose connections come from the loopback
// address local (say 127.0.0.2: all of 127.0.0.0/8 is the machine's own), so
// that a proxy sees another client address.
func ClientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4},
		Timeout:   10 * time.Second,
	}
}

// Upstream is the application behind the proxy: it answers 200 "app PATH"
// to every request and counts the requests per path.
type Upstream struct {
	Addr string // host:port on loopback
	srv  *http.Server
	mu   sync.Mutex
	hits map[string]int
	last map[string]http.Header
}

// StartUpstream starts an Upstream on a free loopback port; the test's
// cleanup closes it.
func StartUpstream(t testing.TB) *Upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &Upstream{Addr: ln.Addr().String(), hits: map[string]int{}, last: map[string]http.Header{}}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := u.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	t.Cleanup(func() { _ = u.srv.Close() })
	return u
}

func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.hits[r.URL.Path]++
	u.last[r.URL.Path] = r.Header.Clone()
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "app %s\n", r.URL.Path)
}

// Hits returns how many requests for path reached the upstream.
func (u *Upstream) Hits(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[path]
}

// LastHeader returns the headers of the last request for path that reached
// the upstream (nil if none did).
func (u *Upstream) LastHeader(path string) http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last[path]
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of ds by the
// nearest-rank method; ds is sorted in place.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(p/100*float64(len(ds))+0.999999) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}

// ReplaceOnce returns s with old replaced by new, failing the test unless
// old occurs exactly once in s (what name names, for the message): a test
// that adapts a shipped config must notice when the config changes under it.
func ReplaceOnce(t testing.TB, name, s, old, new string) string {
	t.Helper()
	return ReplaceN(t, name, s, old, new, 1)
}

// ReplaceN is ReplaceOnce for old occurring exactly n times.
func ReplaceN(t testing.TB, name, s, old, new string, n int) string {
	t.Helper()
	if got := strings.Count(s, old); got != n {
		t.Fatalf("%s: want exactly %d of %q to replace, found %d", name, n, old, got)
	}
	return strings.ReplaceAll(s, old, new)
}

// Get sends GET url with the headers (name, value pairs) through c, reads
// the body and returns the response and the body.
func Get(t testing.TB, c *http.Client, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp, string(b)
}

// WantAllowed checks that resp is the upstream's 200 carrying the RateLimit
// fields of a gcra resource once each: RateLimit-Policy equal to policy and
// RateLimit's r equal to remaining; and no Retry-After.
func WantAllowed(t testing.TB, what string, resp *http.Response, policy string, remaining int) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d, want 200", what, resp.StatusCode)
	}
	if got := resp.Header.Values("RateLimit-Policy"); len(got) != 1 || got[0] != policy {
		t.Errorf("%s: RateLimit-Policy %q, want [%q]", what, got, policy)
	}
	if got, want := resp.Header.Values("RateLimit"), fmt.Sprintf(`"gcra";r=%d;t=`, remaining); len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("%s: RateLimit %q, want one starting %q", what, got, want)
	}
	if got := resp.Header.Get("Retry-After"); got != "" {
		t.Errorf("%s: Retry-After %q on an allowed response", what, got)
	}
}

// WantLimited checks that resp is a 429 with Retry-After in whole seconds
// in [1, maxWait] and the RateLimit fields of an empty gcra bucket once
// each, RateLimit-Policy equal to policy.
func WantLimited(t testing.TB, what string, resp *http.Response, policy string, maxWait int) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("%s: status %d, want 429", what, resp.StatusCode)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > maxWait {
		t.Errorf("%s: Retry-After %q, want whole seconds in [1, %d]", what, resp.Header.Get("Retry-After"), maxWait)
	}
	if got := resp.Header.Values("RateLimit-Policy"); len(got) != 1 || got[0] != policy {
		t.Errorf("%s: RateLimit-Policy %q, want [%q]", what, got, policy)
	}
	if got := resp.Header.Values("RateLimit"); len(got) != 1 || !strings.HasPrefix(got[0], `"gcra";r=0;t=`) {
		t.Errorf("%s: RateLimit %q, want one starting \"gcra\";r=0;t=", what, got)
	}
}

// StartBackends writes AgentConfig into dir, builds the agent and starts it
// on the socket dir/obol.sock with the extra args, and starts an Upstream.
func StartBackends(t testing.TB, dir string, extra ...string) (*Agent, *Upstream) {
	t.Helper()
	socket := filepath.Join(dir, "obol.sock")
	if len(socket) >= 100 {
		t.Fatalf("socket path %s is too long for a Unix socket: set TMPDIR to a shorter directory", socket)
	}
	cfg := filepath.Join(dir, "obol.yaml")
	if err := os.WriteFile(cfg, []byte(AgentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return StartAgent(t, BuildAgent(t, dir), cfg, socket, extra...), StartUpstream(t)
}

// Measure sends n pairs of sequential requests through c: plain (a path
// the proxy passes without a check), then checked with the headers hdr (a
// path it checks, and the agent allows), after 100 pairs to warm up. It
// returns each side's times.
func Measure(t testing.TB, c *http.Client, plain, checked string, n int, hdr ...string) (plainTimes, checkedTimes []time.Duration) {
	t.Helper()
	one := func(url string, hdr ...string) time.Duration {
		start := time.Now()
		resp, _ := Get(t, c, url, hdr...)
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d", url, resp.StatusCode)
		}
		return d
	}
	for range 100 {
		one(plain)
		one(checked, hdr...)
	}
	plainTimes, checkedTimes = make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		plainTimes[i] = one(plain)
		checkedTimes[i] = one(checked, hdr...)
	}
	return plainTimes, checkedTimes
}

// Result formats the RESULT line of a latency measurement: the p50 and p99
// of each side in microseconds, names prefixed by plain and checked.
func Result(plainName, checkedName string, plain, checked []time.Duration) string {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return fmt.Sprintf("RESULT %s_p50_us=%.0f %s_p99_us=%.0f %s_p50_us=%.0f %s_p99_us=%.0f (n=%d each, interleaved)",
		plainName, us(Percentile(plain, 50)), plainName, us(Percentile(plain, 99)),
		checkedName, us(Percentile(checked, 50)), checkedName, us(Percentile(checked, 99)), len(plain))
}

// Pause stops the process with SIGSTOP and waits until each of its threads
// is stopped (Linux: state T in /proc/PID/task/*/stat): a signal takes
// effect some time after kill returns, and a thread running meanwhile may
// still answer. The test's cleanup resumes it if the test does not.
func (p *Proc) Pause(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	WaitFor(t, 5*time.Second, p.Name+" to stop", func() error {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, task := range tasks {
			b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			if err != nil {
				return err
			}
			// pid (comm) state ...: comm may hold spaces and parentheses.
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			if i < 0 || i+2 >= len(s) {
				return fmt.Errorf("%s/stat: unexpected %q", task.Name(), s)
			}
			if state := s[i+2]; state != 'T' {
				return fmt.Errorf("thread %s in state %c", task.Name(), state)
			}
		}
		return nil
	})
}

// Resume continues a process stopped by Pause.
func (p *Proc) Resume(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGCONT)
}

// StuckBound is how long a request through a proxy may take while the agent
// is stuck (SIGSTOP) for the proxy to count as having given up on it: far
// above the proxies' own check timeouts (a few hundred ms), far below the
// test client's 10 s. How long it really took is logged, not asserted: a
// loaded machine is slow.
const StuckBound = 8 * time.Second
