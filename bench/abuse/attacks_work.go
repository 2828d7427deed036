package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// attacks_work.go replays the work a permitted client can hand the agent
// besides its decisions (issue 26, item 10):
//   - simcluster: /v1/simulate/cluster moved the probe's p99 3× with one
//     client and 10× with three. Replayed: three clients post, in a loop,
//     the largest cluster simulation the bounds allow and one over them.
//   - rlsreload: a 1.8 MB rate limit service config rewritten every 2 s
//     moved the probe's p99 3.8×. Replayed: the runner's agent serves the
//     service with its config directory watched; a file of about 1.8 MB
//     (20,000 descriptors) is rewritten with new contents every 2 s.
// Both are judged by the probe's p99 during the attack; each also checks
// that the work was done (simulations accepted, reloads logged).

func init() {
	attacks = append(attacks,
		attack{name: "simcluster", what: "three clients post the largest /v1/simulate/cluster body the bounds allow and one over its event budget, in a loop", run: attackSimCluster, latency: true},
		attack{name: "simtiny", what: "three clients post the smallest /v1/simulate body in a loop (each run takes the Go runtime's processors up by one and back down)", run: attackSimTiny, latency: true},
		attack{name: "rlsreload", what: "the rate limit service's config directory gets a 1.8 MB file (20,000 descriptors), rewritten every 2 s", run: attackRLSReload, latency: true, agentArgs: rlsAgentArgs},
	)
}

// The cluster simulations posted: about the largest the bounds allow (200
// nodes, the bound, for 2 s of virtual time: its two runs take most of the
// 2 s of processor time a simulation may use; 5 s is stopped at that
// limit), and one over the event budget (a minute at 5,000 requests a
// second per node), which must be refused before it costs anything.
const (
	simClusterBody = `{"resource":{"kind":"tiers","tiers":"100,1,1,0"},"nodes":200,"keys":1000,"duration_ms":2000,"offered_per_s":1,"sync_interval_ms":250,"seed":1}`
	simClusterOver = `{"resource":{"kind":"tiers","tiers":"100,1,1,0"},"nodes":200,"keys":1000,"duration_ms":60000,"offered_per_s":5000,"sync_interval_ms":250,"seed":1}`
)

// postLoops runs three clients that post to path until ctx ends, client w's
// i-th body being body(w, i), pausing pause after a 429 (0: none), and
// returns the replies by status and the slowest 200.
func postLoops(ctx context.Context, a *agentProc, path string, body func(w, i int) string, pause time.Duration) (map[int]int, time.Duration) {
	var mu sync.Mutex
	codes := map[int]int{}
	var slowest time.Duration
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				t := time.Now()
				code, _, err := a.post(context.Background(), path, body(w, i))
				if err != nil {
					continue
				}
				mu.Lock()
				codes[code]++
				if code == 200 {
					slowest = max(slowest, time.Since(t))
				}
				mu.Unlock()
				if code == 429 && pause > 0 {
					time.Sleep(pause)
				}
			}
		})
	}
	wg.Wait()
	return codes, slowest
}

func attackSimCluster(ctx context.Context, a *agentProc) (string, error) {
	// The body over the event budget, alone first: while another
	// simulation runs it is answered 429 (one at a time) before it is
	// read, so in the loops below it may never meet an idle simulator.
	over, _, err := a.post(context.Background(), "/v1/simulate/cluster", simClusterOver)
	if err != nil {
		return "", err
	}
	// A client heeding Retry-After would wait longer than 10 ms after a 429.
	codes, slowest := postLoops(ctx, a, "/v1/simulate/cluster", func(w, i int) string {
		if (i+w)%2 == 1 {
			return simClusterOver
		}
		return simClusterBody
	}, 10*time.Millisecond)
	fig := fmt.Sprintf("the body over the event budget alone: %d; then replies by status %v, slowest accepted run %v", over, codes, slowest.Round(time.Millisecond))
	switch {
	case codes[200] == 0:
		return fig, errors.New("no simulation was accepted: the test did not exercise the simulator")
	case over != 413:
		return fig, errors.New("the simulation over the event budget was not refused")
	}
	return fig, nil
}

// attackSimTiny: a simulation runs with one more Go processor than the
// agent has, and changing the count stops the world for a moment; the
// smallest simulations, posted as fast as they are answered, change it
// most often.
func attackSimTiny(ctx context.Context, a *agentProc) (string, error) {
	const body = `{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"d"}]}`
	codes, _ := postLoops(ctx, a, "/v1/simulate", func(int, int) string { return body }, 0)
	fig := fmt.Sprintf("replies by status %v", codes)
	if codes[200] == 0 {
		return fig, errors.New("no simulation was accepted: the test did not exercise the simulator")
	}
	return fig, nil
}

// rlsBigConfig is a rate limit service config of n descriptors, each
// with a value of its own and a limit that differs by round.
func rlsBigConfig(n, round int) string {
	var b strings.Builder
	b.WriteString("domain: big\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: client\n    value: client-%07d\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", i, 100+round)
	}
	return b.String()
}

func attackRLSReload(ctx context.Context, a *agentProc) (string, error) {
	dir := argOf(a, "--rls-config")
	if dir == "" {
		return "", errors.New("setup: the agent has no --rls-config")
	}
	size := 0
	writes := 0
	for round := 0; ; round++ {
		cfg := rlsBigConfig(20_000, round)
		size = len(cfg)
		tmp := filepath.Join(dir, ".big.tmp")
		if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, filepath.Join(dir, "big.yaml")); err != nil {
			return "", err
		}
		writes++
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
			continue
		}
		break
	}
	// The watcher takes a change once it reads the same for a tick: wait
	// for the last write's reload before counting.
	time.Sleep(2500 * time.Millisecond)
	reloads := strings.Count(a.stderr.String(), "rate limit service config reloaded")
	fig := fmt.Sprintf("%d writes of %d bytes, %d reloads logged", writes, size, reloads)
	if reloads == 0 {
		return fig, errors.New("no reload was logged: the test did not exercise the watcher")
	}
	return fig, nil
}
