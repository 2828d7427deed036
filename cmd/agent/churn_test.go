package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/obol-dev/obol/gossip/ring"
	"github.com/obol-dev/obol/internal/await"
	"github.com/obol-dev/obol/internal/freeport"
	"github.com/obol-dev/obol/reconcile"
)

// churnYAML is the churn tests' config: hour-long limits, so that nothing
// a test does ages out while it runs.
const churnYAML = `
resources:
  h/tiers:
    kind: tiers
    tiers: "1000,3600,3600,0"
  h/gcra:
    kind: gcra
    burst: 1000
    count: 1000
    period: 1h
  h/load:
    kind: tiers
    tiers: "1000000,3600,3600,0"
`

// churnSetup skips under -short, else writes churnYAML as the cluster
// config in a new directory and builds the agent there.
func churnSetup(t *testing.T) (dir, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs agent binaries; run without -short")
	}
	dir = tempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(churnYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	// The test clock's seam (OBOL_TEST_CLOCK_SHIFT, testclock.go): a test
	// that sets it runs its agents on a clock of its own.
	return dir, buildAgent(t, dir, "obol_testclock")
}

// stopProc stops p as a rollout does (SIGTERM) and waits for it to exit.
func stopProc(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent exited with %v; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("agent did not stop on SIGTERM; stderr:\n%s", p.stderr)
	}
}

// waitRemaining waits until every node sees want left of res/dom, and
// on a timeout says what each sees and whose counts it holds.
func waitRemaining(t *testing.T, nodes []*proc, res, dom string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok := true
		for _, p := range nodes {
			if p.remaining(t, res, dom) != want {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, p := range nodes {
				resp, err := p.client.Get("http://obol/v1/state?resource=" + res + "&domain=" + dom)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					fmt.Fprintf(&b, "%d left: %s\n", p.remaining(t, res, dom), body)
					if resp, err := p.client.Get("http://obol/metrics"); err == nil {
						m, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						for _, l := range strings.Split(string(m), "\n") {
							if strings.HasPrefix(l, "obol_cluster_welcomes") || strings.HasPrefix(l, "obol_cluster_live") || strings.HasPrefix(l, "obol_gossip_packets_total") || strings.HasPrefix(l, "obol_gossip_dropped") {
								fmt.Fprintf(&b, "  %s\n", l)
							}
						}
					}
				}
			}
			for _, p := range nodes {
				for _, l := range strings.Split(p.stderr.String(), "\n") {
					if strings.Contains(l, "gossip:") && !strings.Contains(l, "memberlist") {
						fmt.Fprintf(&b, "  log: %s\n", l)
					}
				}
			}
			t.Fatalf("timed out waiting for %s: want %d left of %s everywhere:\n%s", what, want, res, b.String())
		}
		<-time.After(20 * time.Millisecond) // polling the agents' answers: no event to wait on
	}
}

// rlsHour is the churn tests' rate limit service config: 1000 calls an
// hour per client.
const rlsHour = "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n"

// rlsArgs are the flags of node name's rate limit service on a socket in
// dir, with the config directory rdir.
func rlsArgs(dir, rdir, name string) []string {
	// A short drain: the service answers unhealthy for half of it before
	// it stops, which would add a second to every restart.
	return []string{"--rls-config", rdir, "--rls-socket", filepath.Join(dir, name+".rls.sock"), "--drain-timeout", "200ms"}
}

// rlsCall makes one call of client c1 through the rate limit service of
// node name and returns the hour's remaining calls after it.
func rlsCall(t *testing.T, dir, name string) int {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+filepath.Join(dir, name+".rls.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rlpb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, &rlpb.RateLimitRequest{Domain: "api",
		Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "client", Value: "c1"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return int(resp.Statuses[0].LimitRemaining)
}

// gcraViews is what each node would still grant of h/gcra's key u.
func gcraViews(t *testing.T, nodes []*proc) []int {
	var out []int
	for _, p := range nodes {
		out = append(out, p.remaining(t, "h/gcra", "u"))
	}
	return out
}

// state is p's /v1/state of res/dom (its tiers and every origin's
// contribution), for failure messages.
func (p *proc) state(t *testing.T, res, dom string) string {
	t.Helper()
	resp, err := p.client.Get("http://obol/v1/state?resource=" + res + "&domain=" + dom)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// remaining is what p would still grant res/dom now.
func (p *proc) remaining(t *testing.T, res, dom string) int {
	t.Helper()
	return int(p.request(t, res, dom, 0)["remaining"].(float64))
}

// loader hits h/load on the live agents about every 5 ms, as
// the app's traffic does during a rollout, and counts the grants.
type loader struct {
	mu      sync.Mutex
	nodes   []*proc
	granted atomic.Int64
	stop    chan struct{}
	done    chan struct{}
}

func startLoad(t *testing.T, nodes []*proc) *loader {
	l := &loader{nodes: append([]*proc(nil), nodes...), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-l.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			l.mu.Lock()
			p := l.nodes[r.IntN(len(l.nodes))]
			l.mu.Unlock()
			resp, err := p.client.Post("http://obol/v1/request", "application/json",
				strings.NewReader(`{"resource":"h/load","domain":"load","copies":1}`))
			if err != nil {
				continue // the node is stopping: the app retries elsewhere
			}
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if m["granted"] == float64(1) {
				l.granted.Add(1)
			}
		}
	}()
	return l
}

// add sends the load to p too.
func (l *loader) add(p *proc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes = append(l.nodes, p)
}

func (l *loader) without(old *proc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.nodes[:0]
	for _, p := range l.nodes {
		if p != old {
			out = append(out, p)
		}
	}
	l.nodes = out
}

func (l *loader) end() int {
	close(l.stop)
	<-l.done
	return int(l.granted.Load())
}

// TestRollingRestartKeepsCounts rolls a mesh of real agents one at a time,
// as a Deployment does (SIGTERM, then a new agent joining the survivors
// before the next stops), under load: every node, the new ones from their
// first answer, sees every hit of the hour, and none is lost.
func TestRollingRestartKeepsCounts(t *testing.T) {
	dir, bin := churnSetup(t)
	for _, tc := range []struct {
		n         int
		sameNames bool
	}{{3, true}, {3, false}, {10, true}, {10, false}} {
		t.Run(fmt.Sprintf("n=%d/same_names=%v", tc.n, tc.sameNames), func(t *testing.T) {
			sub := filepath.Join(dir, fmt.Sprintf("%d-%v", tc.n, tc.sameNames))
			if err := os.MkdirAll(sub, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sub, "cluster.yaml"), []byte(churnYAML), 0o600); err != nil {
				t.Fatal(err)
			}
			rdir := filepath.Join(sub, "rls")
			if err := os.Mkdir(rdir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(rdir, "api.yaml"), []byte(rlsHour), 0o600); err != nil {
				t.Fatal(err)
			}
			// The service's hour is the clock's: the agents run on the wall
			// clock moved on to the start of the next hour, so that the roll
			// (well under a minute) never crosses an hour's end.
			now := time.Now()
			t.Setenv("OBOL_TEST_CLOCK_SHIFT", now.Truncate(time.Hour).Add(time.Hour).Sub(now).String())
			var nodes []*proc
			var names []string
			for i := range tc.n {
				name := fmt.Sprintf("n%d", i)
				extra := rlsArgs(sub, rdir, name)
				if i > 0 {
					extra = append(extra, "--join", nodes[0].gossip)
				}
				nodes = append(nodes, startProc(t, bin, sub, name, extra...))
				names = append(names, name)
			}
			per := 300 / tc.n
			for i, p := range nodes {
				for range per {
					p.request(t, "h/tiers", "u", 1)
					p.request(t, "h/gcra", "u", 1)
				}
				for range 30 / tc.n {
					rlsCall(t, sub, names[i])
				}
			}
			want := 1000 - per*tc.n
			rlsWant := 1000 - 30/tc.n*tc.n
			waitRemaining(t, nodes, "h/tiers", "u", want, "every node to see every hit")
			t.Logf("h/gcra left before the roll, node by node: %v", gcraViews(t, nodes))
			load := startLoad(t, nodes)
			for i := range nodes {
				old := nodes[i]
				stopProc(t, old)
				load.without(old)
				name := fmt.Sprintf("n%d", i)
				if !tc.sameNames {
					name = fmt.Sprintf("n%d-new", i)
				}
				seed := nodes[(i+1)%len(nodes)]
				p := startProc(t, bin, sub, name, append(rlsArgs(sub, rdir, name), "--join", seed.gossip)...)
				// The rate limit service's hour counts every call too (each
				// check is one more).
				rlsWant--
				if got := rlsCall(t, sub, name); got != rlsWant {
					t.Fatalf("after restarting n%d the new node's rate limit service has %d calls left of its hour, want %d", i, got, rlsWant)
				}
				// Its first answer already counts every hit of the hour
				// but the load's last ones in flight.
				if got := p.remaining(t, "h/tiers", "u"); got != want {
					t.Fatalf("after restarting n%d the new node sees %d left of h/tiers, want %d\nits state: %s\nthe state of the node it joined through: %s\nits stderr:\n%s",
						i, got, want, p.state(t, "h/tiers", "u"), seed.state(t, "h/tiers", "u"), p.stderr)
				}
				// gcra refills one token every 3.6 s, and a peer's spends
				// are placed at their bucket's start (a fiftieth of the
				// hour early, which errs toward admission), in the order
				// they reach a node: the new node agrees with the node it
				// joined through within 1% of the limit.
				if got, ref := p.remaining(t, "h/gcra", "u"), seed.remaining(t, "h/gcra", "u"); got < ref-10 || got > ref+10 || got > want+50 {
					t.Fatalf("after restarting n%d the new node sees %d left of h/gcra, the node it joined through %d (want about %d); node by node: %v\nits state: %s\nthe state of the node it joined through: %s\nits stderr:\n%s",
						i, got, ref, want, gcraViews(t, append(nodes[:i:i], append([]*proc{p}, nodes[i+1:]...)...)),
						p.state(t, "h/gcra", "u"), seed.state(t, "h/gcra", "u"), p.stderr)
				}
				nodes[i] = p
				load.add(p)
			}
			granted := load.end()
			waitRemaining(t, nodes, "h/load", "load", 1000000-granted, "every node to count every hit of the load")
			t.Logf("%d load hits granted during the roll, every one still counted on every node", granted)
			for _, p := range nodes {
				stopProc(t, p)
			}
		})
	}
}

// TestScaleOutMidWindow: a node that joins a mesh mid-window answers its
// first decision with the mesh's counts.
func TestScaleOutMidWindow(t *testing.T) {
	dir, bin := churnSetup(t)
	a := startProc(t, bin, dir, "a")
	b := startProc(t, bin, dir, "b", "--join", a.gossip)
	for range 45 {
		a.request(t, "h/tiers", "u", 1)
		b.request(t, "h/tiers", "u", 1)
	}
	waitFor(t, 5*time.Second, "b to see a's hits", func() bool { return b.remaining(t, "h/tiers", "u") == 910 })
	stopProc(t, a) // a's counts now live only in b
	joined := time.Now()
	c := startProc(t, bin, dir, "c", "--join", b.gossip)
	if got := c.remaining(t, "h/tiers", "u"); got != 910 {
		t.Fatalf("the joiner sees %d left, want 910 (a dead node's hits included)", got)
	}
	t.Logf("the joiner agreed with the mesh %v after it was started", time.Since(joined).Round(time.Millisecond))
}

// TestWholeMeshRestartWithStateFiles stops every agent of a mesh, then
// starts them again on their state files: nothing is lost, nothing counted
// twice (each file and each peer pass on the same counts).
func TestWholeMeshRestartWithStateFiles(t *testing.T) {
	dir, bin := churnSetup(t)
	state := func(i int) []string {
		return []string{"--state-file", filepath.Join(dir, fmt.Sprintf("n%d.state", i)), "--state-interval", "1h"}
	}
	var nodes []*proc
	for i := range 3 {
		extra := state(i)
		if i > 0 {
			extra = append(extra, "--join", nodes[0].gossip)
		}
		nodes = append(nodes, startProc(t, bin, dir, fmt.Sprintf("n%d", i), extra...))
	}
	for _, p := range nodes {
		for range 100 {
			p.request(t, "h/tiers", "u", 1)
		}
	}
	waitRemaining(t, nodes, "h/tiers", "u", 700, "every node to see every hit")
	for _, p := range nodes {
		stopProc(t, p) // each writes its file on the way out (the interval is an hour)
	}
	// A corrupt file beside them is no reason not to start.
	if err := os.WriteFile(filepath.Join(dir, "bad.state"), []byte("obol-state\x01garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startProc(t, bin, dir, "n0-new", state(0)...)
	if got := first.remaining(t, "h/tiers", "u"); got != 700 {
		t.Fatalf("the first agent back, alone with its state file, sees %d left, want 700 (its file holds its peers' counts too)", got)
	}
	var back []*proc
	back = append(back, first)
	for i := 1; i < 3; i++ {
		back = append(back, startProc(t, bin, dir, fmt.Sprintf("n%d", i), append(state(i), "--join", first.gossip)...))
	}
	// For a few sync ticks, whatever could still arrive (a count twice)
	// would show: no node may fall under 700 meanwhile. Nothing marks that
	// nothing more will arrive, so the window is watched (a poll).
	if await.PollOK(300*time.Millisecond, func() bool {
		for _, p := range back {
			if p.remaining(t, "h/tiers", "u") < 700 {
				return true
			}
		}
		return false
	}) {
		t.Fatal("a node fell under 700 left after the whole mesh restarted: a count applied twice")
	}
	for i, p := range back {
		if got := p.remaining(t, "h/tiers", "u"); got != 700 {
			t.Fatalf("node %d after the whole mesh restarted sees %d left, want 700", i, got)
		}
	}
	bad := startProc(t, bin, dir, "bad", "--state-file", filepath.Join(dir, "bad.state"))
	if !strings.Contains(bad.stderr.String(), "obol state file ignored") || !strings.Contains(bad.stderr.String(), "bad.state") {
		t.Fatalf("a corrupt state file was not logged as ignored, naming it:\n%s", bad.stderr)
	}
}

// TestKillDuringStateWrites kills an agent with SIGKILL, again and again,
// while it writes its state every few milliseconds: every start finds the
// last whole file (never a torn one) and restores it.
func TestKillDuringStateWrites(t *testing.T) {
	dir, bin := churnSetup(t)
	path := filepath.Join(dir, "a.state")
	hits := 0
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 8 {
		started := time.Now()
		p := startProc(t, bin, dir, fmt.Sprintf("a%d", round), "--state-file", path, "--state-interval", "2ms")
		if round > 0 {
			log := p.stderr.String()
			if strings.Contains(log, "obol state file ignored") || !strings.Contains(log, "obol state file restored") {
				t.Fatalf("round %d: the state file was not restored whole:\n%s", round, log)
			}
			// At most what was admitted after the last write is lost.
			if got := p.remaining(t, "h/tiers", "u"); got < 1000-hits || got > 1000-hits+10 {
				t.Fatalf("round %d: %d left after %d hits", round, got, hits)
			}
			hits = 1000 - p.remaining(t, "h/tiers", "u")
		}
		for range 10 {
			p.request(t, "h/tiers", "u", 1)
			hits++
		}
		// The first write of this round must have landed (the premise:
		// a whole file to restore; a loaded machine can take longer than
		// the random wait below to write it). No event marks a write: the
		// file's modification time is polled.
		if !await.PollOK(10*time.Second, func() bool {
			fi, err := os.Stat(path)
			return err == nil && fi.ModTime().After(started)
		}) {
			t.Fatalf("round %d: no state written within 10 s:\n%s", round, p.stderr)
		}
		// The kill lands at a random instant of the 2 ms write cycle: the
		// wait is the point of the test, not a stand-in for an event.
		time.Sleep(time.Duration(5+r.IntN(20)) * time.Millisecond)
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	// The directory holds the state file alone: no temporary left to pile up
	// but the one a kill may have cut short.
	ents, _ := os.ReadDir(dir)
	tmps := 0
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			tmps++
		}
	}
	if tmps > 8 {
		t.Fatalf("%d temporary state files left", tmps)
	}
}

// TestStoppedMeansPortFree: once "obol agent stopped" is logged, the gossip
// port is free: a new agent on the same address starts at once (a
// StatefulSet's pod restarted in place).
func TestStoppedMeansPortFree(t *testing.T) {
	dir, bin := churnSetup(t)
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	peer := startProc(t, bin, dir, "peer")
	a := startWrapped(t, nil, bin, dir, "a", "--gossip-bind", addr, "--join", peer.gossip, "--sync-interval", "100ms")
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the stop to be logged", func() bool { return strings.Contains(a.stderr.String(), `"obol agent stopped"`) })
	b := startWrapped(t, nil, bin, dir, "a", "--gossip-bind", addr, "--join", peer.gossip, "--sync-interval", "100ms")
	if strings.Contains(b.stderr.String(), "address already in use") {
		t.Fatalf("the gossip port was still bound after the stop was logged:\n%s", b.stderr)
	}
}

// TestOwnerModeWaveKeepsCounts: real agents in owner mode (from 3
// members) lose a wave of three at once, as a rolling deploy with
// maxUnavailable stops them: a node that hit a key, with the key's owner
// and successor, the only members its counts reached. The leavers hand
// their counts on as they stop (reconcile.Cluster.Handover): every
// survivor still counts every hit, and so does a node that joins after
// (without the handover it counted none).
func TestOwnerModeWaveKeepsCounts(t *testing.T) {
	dir, bin := churnSetup(t)
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(churnYAML+"gossip:\n  owner_from: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("w%d", i))
	}
	walk := ring.New(names).Walk(nil, reconcile.KeyHash("h/tiers", "u"), len(names))
	origin, owner, succ := walk[5], walk[0], walk[1]
	byName := map[string]*proc{}
	var first *proc
	for _, name := range names {
		var extra []string
		if first != nil {
			extra = []string{"--join", first.gossip}
		}
		p := startProc(t, bin, dir, name, extra...)
		if first == nil {
			first = p
		}
		byName[name] = p
	}
	waitFor(t, 10*time.Second, "every agent to be in owner mode with six members", func() bool {
		for _, p := range byName {
			m := p.metrics(t)
			if !strings.Contains(m, "\nobol_cluster_live_nodes 6\n") || !strings.Contains(m, "\nobol_cluster_owner_mode 1\n") {
				return false
			}
		}
		return true
	})
	// Over half the limit: the owner relays its sums to every member.
	for range 600 {
		byName[origin].request(t, "h/tiers", "u", 1)
	}
	var live []*proc
	for _, name := range walk[2:5] {
		live = append(live, byName[name])
	}
	waitRemaining(t, append(live, byName[owner], byName[succ], byName[origin]), "h/tiers", "u", 400, "every node to count the origin's hits")
	var wg sync.WaitGroup
	for _, name := range []string{origin, owner, succ} {
		wg.Go(func() { stopProc(t, byName[name]) })
	}
	wg.Wait()
	waitRemaining(t, live, "h/tiers", "u", 400, "the survivors to count the hits of the wave's origin")
	// The survivors kept the sums they were told; a node that joins now
	// learns the hits only from the members that hold the origin's counts.
	joiner := startProc(t, bin, dir, "w6", "--join", byName[walk[4]].gossip)
	waitRemaining(t, append(live, joiner), "h/tiers", "u", 400, "a node that joined after the wave to count the hits of its origin")
	if n := strings.Count(byName[origin].stderr.String(), "handed over counts"); n != 1 {
		t.Errorf("the origin logged %d handovers, want 1; stderr:\n%s", n, byName[origin].stderr)
	}
}

// metrics returns p's /metrics page.
func (p *proc) metrics(t *testing.T) string {
	t.Helper()
	resp, err := p.client.Get("http://obol/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
