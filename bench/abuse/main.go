package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// attack is one replayed attack: run drives it until ctx ends and returns
// its own verdict (nil when the defence held) and a figure to print.
type attack struct {
	name string
	what string
	run  func(ctx context.Context, a *agentProc) (figure string, err error)
	// latency: the attack holds only if the probe's p99 during it is within
	// 2× of idle. Attacks that flood the agent from this process burn the
	// same two processors the agent runs on, so their latency is reported
	// but does not judge them, unless the run is pinned (pinning): then the
	// attacker has a processor of its own and every attack is judged so.
	latency bool
	// agentArgs, when set, returns more flags for the agent under attack
	// (e.g. the rate limit service's listeners), given the run's directory.
	agentArgs func(dir string) ([]string, error)
}

var attacks = []attack{
	{name: "simulate", what: "three clients post the heaviest /v1/simulate bodies in a loop (the red team's 100k tiers, and the largest the budget allows)", run: attackSimulate, latency: true},
	{name: "ids", what: "a second client guesses a victim's session, hold and transfer ids from its own", run: attackIDs},
	{name: "caps", what: "a client opens day-long sessions in a loop until refused (holds and transfers are capped alike; see the local tests)", run: attackCaps},
	{name: "clock", what: "the wall clock steps back 1 h, then forward 24 h (handler code on a faked wall clock)", run: attackClock},
	{name: "logs", what: "clients open connections and drop them in the middle of 14 KB of headers", run: attackLogs},
	{name: "gossip", what: "a rogue agent without the mesh's key joins and reserves every copy; an agent is started to gossip off loopback without a key", run: attackGossip},
	{name: "names", what: "a second agent starts under a node name already in the mesh", run: attackNames},
	{name: "token", what: "requests without the bearer token to an agent that asks for it; a public listener without a token", run: attackToken},
	{name: "hoard", what: "a client admits calls of an adaptive resource (client_share 0.5) and never completes them; another process then asks", run: attackHoard},
	{name: "smuggle", what: "a request carries both Content-Length and Transfer-Encoding, then a second request on the connection", run: attackSmuggle},
}

func main() {
	only := flag.String("attack", "", "run only the attack of this name")
	d := flag.Duration("d", 5*time.Second, "how long each phase (idle, attack) lasts")
	probeSock := flag.String("probe", "", "internal: probe the agent on this socket for -d and print p50, p99 and the count (ns)")
	admitOnce := flag.String("admit-once", "", "internal: admit one call of demo/hoard on this socket, print the reply and exit (another process, for the hoard attack)")
	flag.Parse()
	if *probeSock != "" {
		l := probe(context.Background(), &agentProc{socket: *probeSock}, *d)
		fmt.Println(int64(l.p50), int64(l.p99), l.n)
		return
	}
	if *admitOnce != "" {
		_, b, err := (&agentProc{client: unixClient(*admitOnce)}).post(context.Background(), "/v1/admit", `{"resource":"demo/hoard"}`)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(string(b))
		return
	}
	if err := run(*only, *d); err != nil {
		fmt.Fprintln(os.Stderr, "abuse:", err)
		os.Exit(1)
	}
}

func run(only string, d time.Duration) error {
	dir, err := os.MkdirTemp("", "obol-abuse")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	gobin, err := benchkit.GoTool()
	if err != nil {
		return err
	}
	bin, err := benchkit.BuildAgent(context.Background(), gobin, dir)
	if err != nil {
		return err
	}
	pin := newPinning()
	fmt.Println(pin.describe())
	held, broke := 0, 0
	for _, at := range attacks {
		if only != "" && at.name != only {
			continue
		}
		var extra []string
		if at.agentArgs != nil {
			if extra, err = at.agentArgs(dir); err != nil {
				return fmt.Errorf("%s: %w", at.name, err)
			}
		}
		// The verdict is the pinned run's when taskset is there (the
		// attacker on one processor, the agent and the probe on the
		// other); the unpinned figure is printed beside it.
		var pinned *outcome
		if pin.ok {
			if pinned, err = runPhase(at, bin, dir, d, extra, pin, true); err != nil {
				return err
			}
		}
		free, err := runPhase(at, bin, dir, d, extra, pin, false)
		if err != nil {
			return err
		}
		judged := free
		if pinned != nil {
			judged = pinned
		}
		verdict := judged.verdict(at.latency || pinned != nil)
		if strings.HasPrefix(verdict, "held") {
			held++
		} else {
			broke++
		}
		mode := "unpinned"
		if pinned != nil {
			mode = "pinned"
		}
		fmt.Printf("%-10s %s: %s; %s probe idle p50 %v p99 %v, during p50 %v p99 %v (p99 ×%.2f, %d probes); %s\n",
			at.name, verdict, at.what, mode, judged.idle.p50, judged.idle.p99, judged.during.p50, judged.during.p99, judged.ratio(), judged.during.n, judged.figure)
		if pinned != nil {
			fmt.Printf("%-10s   unpinned: %s; probe idle p99 %v, during p99 %v (p99 ×%.2f, %d probes); %s\n",
				"", free.verdict(at.latency), free.idle.p99, free.during.p99, free.ratio(), free.during.n, free.figure)
		}
	}
	fmt.Printf("RESULT attacks=%d held=%d broke=%d\n", held+broke, held, broke)
	return nil
}

// outcome is one run of an attack against a fresh agent.
type outcome struct {
	idle, during latency
	figure       string
	err          error
}

func (o *outcome) ratio() float64 {
	return float64(o.during.p99) / float64(max(o.idle.p99, time.Microsecond))
}

// verdict is "held", or "broke (why)": the attack's own error, else, when
// latency judges it, a probe p99 over 2× idle.
func (o *outcome) verdict(latency bool) string {
	switch {
	case o.err != nil:
		return "broke (" + o.err.Error() + ")"
	case latency && o.ratio() > 2:
		return fmt.Sprintf("broke (probe p99 %.1f× idle)", o.ratio())
	}
	return "held"
}

// runPhase starts a fresh agent, probes it idle for d, then runs the
// attack for d while probing, and stops the agent. Pinned (p.ok), this
// process (the attacker) runs on one processor and the agent and the
// probe on another; unpinned, each runs where the scheduler puts it.
func runPhase(at attack, bin, dir string, d time.Duration, extra []string, p pinning, pinned bool) (*outcome, error) {
	agentCPU := ""
	if pinned {
		agentCPU = p.agentCPU
		if err := p.pinSelf(p.attackerCPU); err != nil {
			return nil, err
		}
		defer p.pinSelf(p.all)
	}
	probeCPU = agentCPU
	defer func() { probeCPU = "" }()
	a, err := startAgentOn(agentCPU, bin, dir, extra...)
	if err != nil {
		return nil, err
	}
	defer a.stop()
	o := &outcome{idle: probeProcess(context.Background(), a, d)}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan struct{})
	go func() { o.figure, o.err = at.run(ctx, a); close(done) }()
	o.during = probeProcess(ctx, a, d)
	<-done
	return o, nil
}

// agentProc is a running agent.
type agentProc struct {
	bin    string // the agent binary, for attacks that start more agents
	dir    string
	cmd    *exec.Cmd
	socket string
	client *http.Client
	stderr *countingWriter
}

// countingWriter counts what the agent writes to its log, keeping the start.
type countingWriter struct {
	mu   sync.Mutex
	n    int64
	head bytes.Buffer
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += int64(len(p))
	if w.head.Len() < 64<<10 {
		w.head.Write(p)
	}
	return len(p), nil
}

func (w *countingWriter) bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *countingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.head.String()
}

func startAgent(bin, dir string, extra ...string) (*agentProc, error) {
	return startAgentOn("", bin, dir, extra...)
}

// startAgentOn starts an agent pinned to the processors cpus (taskset -c),
// or wherever the scheduler puts it when cpus is "".
func startAgentOn(cpus, bin, dir string, extra ...string) (*agentProc, error) {
	sock := filepath.Join(dir, fmt.Sprintf("obol-%d.sock", time.Now().UnixNano()))
	args := append([]string{"--socket", sock, "--http", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	if cpus != "" {
		cmd = exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
	}
	stderr := &countingWriter{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &agentProc{bin: bin, dir: dir, cmd: cmd, socket: sock, stderr: stderr, client: unixClient(sock)}
	if benchkit.WaitSocket(context.Background(), sock, 5*time.Second) == nil {
		return a, nil
	}
	a.stop()
	return nil, fmt.Errorf("the agent did not open its socket in 5 s: %s", stderr.String())
}

func (a *agentProc) stop() {
	_ = a.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = a.cmd.Process.Kill()
		<-done
	}
}

func unixClient(sock string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 16,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
}

// post sends body to path and returns the status and reply.
func (a *agentProc) post(ctx context.Context, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://obol"+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json") // the API refuses any other body type (415)
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if path == "/v1/simulate" { // the attack does not read its replies: discard them without holding them
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

type latency struct {
	p50, p99 time.Duration
	n        int
}

// probeProcess runs the probe in a process of its own (this program run
// again with -probe), so that the attacker's work in this process (its
// allocations, its collections) never delays the probe's own requests:
// what it measures is the agent.
func probeProcess(ctx context.Context, a *agentProc, d time.Duration) latency {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	cmd := exec.Command(os.Args[0], "-probe", a.socket, "-d", d.String())
	if probeCPU != "" {
		cmd = exec.Command("taskset", "-c", probeCPU, os.Args[0], "-probe", a.socket, "-d", d.String())
	}
	out, err := cmd.Output()
	var p50, p99 int64
	var n int
	if err != nil {
		return latency{}
	}
	fmt.Sscan(string(out), &p50, &p99, &n)
	return latency{p50: time.Duration(p50), p99: time.Duration(p99), n: n}
}

// probe asks /v1/request one at a time until ctx ends or d passes.
func probe(ctx context.Context, a *agentProc, d time.Duration) latency {
	c := unixClient(a.socket)
	end := time.Now().Add(d)
	var ds []time.Duration
	body := `{"resource":"demo/export","domain":"probe","copies":0}`
	for time.Now().Before(end) && ctx.Err() == nil {
		req, _ := http.NewRequest("POST", "http://obol/v1/request", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json") // else 415: the probe would time a refusal, not a decision
		t := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			fmt.Fprintf(os.Stderr, "probe: /v1/request answered %d, want 200\n", resp.StatusCode)
			os.Exit(1)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ds = append(ds, time.Since(t))
		time.Sleep(time.Millisecond) // a steady client, not a load generator
	}
	if len(ds) == 0 {
		return latency{}
	}
	slices.Sort(ds)
	return latency{p50: ds[len(ds)/2], p99: ds[len(ds)*99/100], n: len(ds)}
}

// attackSimulate: the hardening review's first attack. One body of 100k
// tiers × 10k requests took 21.5 s of CPU and three at once pushed every
// client past its timeout. The defence holds when the 100k-tier body is
// refused at once, the heaviest accepted body finishes within the time limit,
// concurrent runs are refused, and the probe stays within 2× of idle.
func attackSimulate(ctx context.Context, a *agentProc) (string, error) {
	redTeam := simBody(100_000, 10_000)
	heaviest := simBody(64, 30_000)
	codes, slowest := postLoops(ctx, a, "/v1/simulate", func(w, i int) string {
		if (i+w)%2 == 0 {
			return redTeam
		}
		return heaviest
	}, 0)
	fig := fmt.Sprintf("replies by status %v, slowest accepted run %v", codes, slowest.Round(time.Millisecond))
	switch {
	case codes[200] == 0:
		return fig, errors.New("no simulation was accepted: the test did not exercise the limit")
	case codes[413] == 0:
		return fig, errors.New("the 100k-tier body was not refused as too large")
	case slowest > 3*time.Second:
		return fig, fmt.Errorf("an accepted simulation took %v", slowest)
	}
	return fig, nil
}

// simBody is a /v1/simulate body of a tiers resource with n tiers and k
// requests of 1 hit, a millisecond apart.
func simBody(n, k int) string {
	var b strings.Builder
	b.WriteString(`{"resource":{"kind":"tiers","tiers":"`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("1,1,1,0")
	}
	b.WriteString(`"},"requests":[`)
	for i := range k {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"at_ms":%d,"domain":"d%d","copies":2}`, i, i%7)
	}
	b.WriteString("]}")
	return b.String()
}

// Pinning: a run pins its processes of a run with taskset (util-linux), so that a
// probe's latency measures the agent's isolation rather than an attacker
// and an agent sharing two processors: this process (the attacker, with
// any agent it starts of its own) on the first processor, the agent under
// attack and the probe on the second. Without taskset, or with one
// processor, every run is unpinned and says so.

// pinning is how a run pins its processes.
type pinning struct {
	ok                    bool   // taskset is there and there are two processors or more
	why                   string // why not, when !ok
	attackerCPU, agentCPU string
	all                   string // every processor, to unpin this process
}

// probeCPU is where probeProcess runs the probe ("" unpinned).
var probeCPU string

func newPinning() pinning {
	n := runtime.NumCPU()
	if _, err := exec.LookPath("taskset"); err != nil {
		return pinning{why: "taskset (util-linux) not found"}
	}
	if n < 2 {
		return pinning{why: "one processor only"}
	}
	return pinning{ok: true, attackerCPU: "0", agentCPU: "1", all: "0-" + strconv.Itoa(n-1)}
}

func (p pinning) describe() string {
	if !p.ok {
		return "pinning: unpinned (" + p.why + "); verdicts are the unpinned runs'"
	}
	return fmt.Sprintf("pinning: taskset: attacker on processor %s, agent and probe on processor %s; each attack runs pinned (the verdict) and unpinned (printed below it)", p.attackerCPU, p.agentCPU)
}

// pinSelf moves every thread of this process to cpus (threads made later
// inherit it from theirs).
func (p pinning) pinSelf(cpus string) error {
	out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p -c %s: %v: %s", cpus, err, out)
	}
	return nil
}
