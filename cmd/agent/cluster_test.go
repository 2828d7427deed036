package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/await"
)

// clusterYAML is the three-agent test's config: a tier of 30 per 10 s, and
// 5 per second with a prison tier of 1 per 30 s behind it.
const clusterYAML = `
resources:
  t/limit30:
    kind: tiers
    tiers: "30,10,10,0"
  t/prison:
    kind: tiers
    tiers: "5,1,1,0,1,30,30,0"
`

// proc is an agent binary running.
type proc struct {
	cmd    *exec.Cmd
	socket string
	stderr *syncBuffer
	gossip string
	client *http.Client
}

// buildAgent builds the agent binary once per test, with the build tags
// given (obol_testclock: testclock.go).
func buildAgent(t *testing.T, dir string, tags ...string) string {
	t.Helper()
	bin := filepath.Join(dir, "agent")
	out, err := exec.Command("go", "build", "-tags", strings.Join(tags, ","), "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startProc starts the agent bin as node name on a loopback gossip port.
func startProc(t *testing.T, bin, dir, name string, extra ...string) *proc {
	t.Helper()
	return startWrapped(t, nil, bin, dir, name, append([]string{"--gossip-bind", "127.0.0.1:0", "--sync-interval", "100ms"}, extra...)...)
}

// startWrapped starts the agent bin as node name, its command line prefixed
// by wrap (e.g. ip netns exec NS), and waits until it has joined and serves.
func startWrapped(t *testing.T, wrap []string, bin, dir, name string, extra ...string) *proc {
	t.Helper()
	p := &proc{socket: filepath.Join(dir, name+".sock"), stderr: &syncBuffer{}}
	args := append([]string{"--config", filepath.Join(dir, "cluster.yaml"), "--socket", p.socket, "--http", "127.0.0.1:0",
		"--node-name", name}, extra...)
	argv := append(append(append([]string(nil), wrap...), bin), args...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
		}
	})
	p.client = unixClient(p.socket)
	line := p.stderr.WaitJSON(t, 15*time.Second, "obol agent gossip started")
	p.gossip, _ = line["gossip"].(string)
	// Readiness shows only on /readyz, once the listeners serve: no event
	// crosses the process.
	if !await.PollOK(15*time.Second, func() bool {
		resp, err := p.client.Get("http://obol/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatalf("%s never got ready; stderr:\n%s", name, p.stderr)
	}
	return p
}

// request asks p for one decision and returns the reply's fields.
func (p *proc) request(t *testing.T, res, dom string, copies int) map[string]any {
	t.Helper()
	body := fmt.Sprintf(`{"resource":%q,"domain":%q,"copies":%d}`, res, dom, copies)
	resp, err := p.client.Post("http://obol/v1/request", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("request: %d %s", resp.StatusCode, b)
	}
	return m
}

// tierState is one tier of GET /v1/state's reply.
type tierState struct {
	Tier  int    `json:"tier"`
	State string `json:"state"`
}

// tiers returns the tiers of GET /v1/state for the key on p.
func (p *proc) tiers(t *testing.T, res, dom string) []tierState {
	t.Helper()
	resp, err := p.client.Get("http://obol/v1/state?resource=" + res + "&domain=" + dom)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Tiers []tierState `json:"tiers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/state: %d %v", resp.StatusCode, err)
	}
	return out.Tiers
}

func (p *proc) peers(t *testing.T) []map[string]any {
	t.Helper()
	resp, err := p.client.Get("http://obol/v1/peers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Peers []map[string]any `json:"peers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Peers
}

// TestThreeAgentsConverge starts three agent binaries joined over loopback
// and checks what a user would see: 30 hits on one node's tier of limit 30
// leave the other two rejecting within a second, and a domain that bursts
// into a prison tier on one node is in prison on all.
func TestThreeAgentsConverge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three agent binaries; run without -short")
	}
	dir := tempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(clusterYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildAgent(t, dir)
	a := startProc(t, bin, dir, "a")
	b := startProc(t, bin, dir, "b", "--join", a.gossip)
	c := startProc(t, bin, dir, "c", "--join", a.gossip+","+b.gossip)
	nodes := []*proc{a, b, c}
	waitFor(t, 10*time.Second, "every node to see three live members", func() bool {
		for _, n := range nodes {
			alive := 0
			for _, p := range n.peers(t) {
				if p["state"] == "alive" {
					alive++
				}
			}
			if alive != 3 {
				return false
			}
		}
		return true
	})

	for i := range 30 {
		if m := a.request(t, "t/limit30", "user", 1); m["granted"] != float64(1) {
			t.Fatalf("hit %d on a: %v", i, m)
		}
	}
	start := time.Now()
	for _, n := range []*proc{b, c} {
		waitFor(t, time.Second-time.Since(start), "the other nodes to reject the 31st hit", func() bool {
			return n.request(t, "t/limit30", "user", 0)["remaining"] == float64(0)
		})
		if m := n.request(t, "t/limit30", "user", 1); m["granted"] != float64(0) {
			t.Fatalf("a peer granted the 31st hit: %v", m)
		}
	}
	t.Logf("the other two nodes rejected %v after the 30th hit", time.Since(start).Round(time.Millisecond))

	for range 6 {
		b.request(t, "t/prison", "burst", 1)
	}
	for _, n := range []*proc{a, c} {
		waitFor(t, time.Second, "the prison tier on every node", func() bool {
			return n.request(t, "t/prison", "burst", 0)["tier"] == float64(2)
		})
	}
	// Tier 1's active time (1 s) ends on every node; the prison lasts 30 s.
	for _, n := range nodes {
		waitFor(t, 5*time.Second, "tier 1 to end on every node", func() bool {
			ts := n.tiers(t, "t/prison", "burst")
			return len(ts) == 2 && ts[0].State == "inactive" && ts[1].State == "active"
		})
	}
	for _, n := range nodes {
		if m := n.request(t, "t/prison", "burst", 1); m["granted"] != float64(0) || m["tier"] != float64(2) {
			t.Fatalf("a node let the prisoner out: %v", m)
		}
	}
}

// waitFor polls cond until it holds or d passes. It is for what the agents
// show only in their replies (members, counts, tiers): no event crosses the
// process to say they changed. A wait for a log line is stderr.Wait.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	await.Poll(t, d, what, cond)
}
