package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// netnsYAML: a tier long enough that hits made during the partition are
// still counted after the heal.
const netnsYAML = `
resources:
  t/long:
    kind: tiers
    tiers: "1000,30,30,0"
`

// netnsSync is the sync interval of the partition test's agents.
const netnsSync = 250 * time.Millisecond

// TestPartitionNetns runs three agents in three Linux network namespaces on
// one bridge, cuts one off, checks both sides keep granting, heals, and
// measures how long counts take to re-converge.
func TestPartitionNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs agents in network namespaces; run without -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces: run `sudo go test -run TestPartitionNetns ./cmd/agent/` (.ci/run does, as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2 (the ip command): install it (apt-get install iproute2; .ci/run does) and run as root")
	}
	// Names unique to this run: interface names are at most 15 bytes.
	tag := fmt.Sprintf("%05x", os.Getpid()&0xfffff)
	br := "obr" + tag
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	quiet := func(args ...string) { _ = exec.Command("ip", args...).Run() }
	sh("link", "add", br, "type", "bridge")
	t.Cleanup(func() { quiet("link", "del", br) })
	sh("link", "set", br, "up")
	var hostEnds, addrs []string
	for i := range 3 {
		ns := fmt.Sprintf("obol-%s-%d", tag, i)
		host, peer := fmt.Sprintf("ov%s%dh", tag, i), fmt.Sprintf("ov%s%dn", tag, i)
		addr := fmt.Sprintf("10.213.77.%d", i+1)
		sh("netns", "add", ns)
		t.Cleanup(func() { quiet("netns", "del", ns) })
		sh("link", "add", host, "type", "veth", "peer", "name", peer)
		t.Cleanup(func() { quiet("link", "del", host) })
		sh("link", "set", peer, "netns", ns)
		sh("link", "set", host, "master", br)
		sh("link", "set", host, "up")
		sh("-n", ns, "addr", "add", addr+"/24", "dev", peer)
		sh("-n", ns, "link", "set", peer, "up")
		sh("-n", ns, "link", "set", "lo", "up")
		hostEnds = append(hostEnds, host)
		addrs = append(addrs, addr+":7946")
	}

	dir := tempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(netnsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildAgent(t, dir)
	join := strings.Join(addrs, ",")
	var nodes []*proc
	for i := range 3 {
		ns := fmt.Sprintf("obol-%s-%d", tag, i)
		nodes = append(nodes, startWrapped(t, []string{"ip", "netns", "exec", ns}, bin, dir, fmt.Sprintf("n%d", i),
			"--gossip-bind", addrs[i], "--join", join, "--sync-interval", netnsSync.String(), "--gossip-insecure"))
	}
	alive := func(n *proc) int {
		k := 0
		for _, p := range n.peers(t) {
			if p["state"] == "alive" {
				k++
			}
		}
		return k
	}
	waitFor(t, 15*time.Second, "three live members everywhere", func() bool {
		return alive(nodes[0]) == 3 && alive(nodes[1]) == 3 && alive(nodes[2]) == 3
	})
	hits := func(n *proc) float64 {
		v, _ := n.request(t, "t/long", "d", 0)["tier_hits"].(float64)
		return v
	}

	// Cut n2 off and keep both sides busy: each keeps granting alone.
	sh("link", "set", hostEnds[2], "down")
	cut := time.Now()
	for i := range 20 {
		if m := nodes[0].request(t, "t/long", "d", 1); m["granted"] != float64(1) {
			t.Fatalf("n0 hit %d during the partition: %v", i, m)
		}
	}
	for i := range 15 {
		if m := nodes[2].request(t, "t/long", "d", 1); m["granted"] != float64(1) {
			t.Fatalf("n2 hit %d during the partition: %v", i, m)
		}
	}
	// Long enough for memberlist to declare the cut node dead.
	waitFor(t, 20*time.Second, "n0 to see n2 gone", func() bool { return alive(nodes[0]) == 2 })
	t.Logf("n2 declared not alive %v after the cut", time.Since(cut).Round(time.Millisecond))
	if got := hits(nodes[1]); got != 20 {
		t.Fatalf("n1 counts %v hits during the partition, want n0's 20", got)
	}
	if got := hits(nodes[2]); got != 15 {
		t.Fatalf("n2 counts %v hits during the partition, want its own 15", got)
	}

	sh("link", "set", hostEnds[2], "up")
	healed := time.Now()
	waitFor(t, 30*time.Second, "every node to count all 35 hits", func() bool {
		return hits(nodes[0]) == 35 && hits(nodes[1]) == 35 && hits(nodes[2]) == 35
	})
	took := time.Since(healed)
	t.Logf("counts re-converged %v after the heal (sync interval %v)", took.Round(time.Millisecond), netnsSync)
	// Alone this takes about two sync intervals (61–217 ms measured); with
	// the whole race-enabled suite on two cores it has taken up to 1.06 s.
	// How fast is a benchmark's business (bench/cluster); this test holds
	// the bound a healed partition must meet: a peer heard from again after
	// a silence resyncs at once (gossip's ResyncAfter, 2.5 s), so counts
	// are whole well within that plus a few ticks.
	if bound := 2500*time.Millisecond + 4*netnsSync; took > bound {
		t.Errorf("counts took %v to re-converge after the heal, more than %v (a resync and four ticks)", took, bound)
	}
}
