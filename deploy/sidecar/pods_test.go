package sidecar

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The pods' world, as the Kubernetes manifests lay it out.
const (
	podSubnet = "10.213.80."      // the pods' /24, on a bridge in the test's own network namespace
	dnsAddr   = podSubnet + "254" // the cluster DNS server, on that bridge
	k8sNS     = "obol-test"       // the namespace: first in the pods' DNS search path
	// the headless Service every agent joins: the manifest's --join
	serviceName = "example-app-obol"
	gossipPort  = "7946"             // the agent's gossip port
	socketMount = "/run/obol"        // the emptyDir shared by the agent and the app
	configMount = "/etc/obol"        // the ConfigMap volume
	secretMount = "/etc/obol-gossip" // the Secret volume holding the gossip key
	fsGroup     = 2000               // the pod's securityContext.fsGroup

	// deadNodeReclaim is how long after a member's death the agent lets
	// its name back in at a new address (the gossip package's setting).
	deadNodeReclaim = time.Second
)

// podsConfig is the ConfigMap's config.yaml: t/hits allows 30 per minute
// and ships every hit at once (drift 0.01: max(1, 0.01·30/3) = 1 hit);
// t/jobs is copy-limited, 5 per domain.
const podsConfig = `resources:
  t/hits:
    kind: tiers
    tiers: "%d,60,60,0"
    drift: 0.01
  t/jobs:
    kind: copies
    domain_limit: 5
    global_limit: 10
`

// podFlags are the agent's arguments in a pod: the obol sidecar's args in
// the Kubernetes manifest (kubernetes/deployment.yaml), with the downward
// API's $(POD_NAME) and $(POD_IP) filled in as kubelet does. The test's
// volumes, DNS name and key file follow the same manifest.
func podFlags(name, ip string) []string {
	args := make([]string, len(manifestArgs))
	for i, a := range manifestArgs {
		args[i] = strings.NewReplacer("$(POD_NAME)", name, "$(POD_IP)", ip).Replace(a)
	}
	return args
}

// manifestArgs are the obol container's args in the manifest.
var manifestArgs = func() []string {
	b, err := os.ReadFile(filepath.Join("kubernetes", "deployment.yaml"))
	if err != nil {
		panic(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					InitContainers []struct {
						Name string   `yaml:"name"`
						Args []string `yaml:"args"`
					} `yaml:"initContainers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		panic(err)
	}
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if c.Name == "obol" {
			return c.Args
		}
	}
	panic("kubernetes/deployment.yaml: no obol init container")
}()

// manifestArg returns the value of flag --name in the manifest's args.
func manifestArg(name string) string {
	for _, a := range manifestArgs {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	panic("kubernetes/deployment.yaml: no --" + name)
}

// TestPodsFromImage builds the agent's image with build-image (podman),
// exports its root filesystem, and runs the image's entrypoint from it in
// three "pods": each a network namespace on one bridge and a private mount
// namespace with the image's root read-only, an emptyDir at /run/obol, the
// ConfigMap and the Secret mounted, a resolv.conf pointing at a DNS server
// that answers the headless Service's name with every pod's address, and
// the agent as user 65532 and PID 1 of its own PID namespace. The test is
// every pod's app: it talks to each agent only through the socket in the
// pod's emptyDir. It shows the three join, 30 hits through pod A make B and
// C reject, killing A's agent (SIGKILL) frees its holds on B and C, A's
// agent restarted at a new address rejoins, a ConfigMap swap reloads every
// agent, and SIGTERM stops each cleanly; it logs the image size, each
// agent's start-to-ready time and the join time.
func TestPodsFromImage(t *testing.T) {
	requirePodTools(t)
	began := time.Now()
	w := newWorld(t)

	// The image, and its root filesystem as a runtime would unpack it.
	w.buildImage(t)
	img := w.inspect(t)
	w.exportRootfs(t, img)
	w.checkVersion(t, img)

	w.network(t)
	w.serveDNS(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	writeAtomic(t, w.secret, map[string]string{filepath.Base(manifestArg("gossip-secret-file")): base64.StdEncoding.EncodeToString(key) + "\n"})
	writeAtomic(t, w.configMap, map[string]string{"config.yaml": fmt.Sprintf(podsConfig, 30)})

	// The three pods start together, as a Deployment's replicas do.
	a, b, c := w.newPod(t, "pod-a", 1), w.newPod(t, "pod-b", 2), w.newPod(t, "pod-c", 3)
	pods := []*pod{a, b, c}
	w.setPeers(a.ip, b.ip, c.ip)
	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range pods {
		p.launch(t, img)
	}
	for _, p := range pods {
		wg.Go(func() { p.awaitReady(t) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	awaitMesh(t, 30*time.Second, pods)
	joined := time.Since(start)
	for _, p := range pods {
		t.Logf("%s: start to ready %v", p.name, p.ready.Round(time.Millisecond))
		p.checkContained(t, img)
	}
	t.Logf("three pods started together: all three see three live members %v after the start", joined.Round(time.Millisecond))

	// 30 hits through pod A's socket: B and C reject the 31st.
	for i := range 30 {
		if code, _ := a.check(t, "t/hits", "tenant-1", 1); code != http.StatusNoContent {
			t.Fatalf("hit %d through pod A: status %d, want 204", i+1, code)
		}
	}
	hit30 := time.Now()
	for _, p := range []*pod{b, c} {
		waitFor(t, 5*time.Second, p.name+" to reject tenant-1 after A's 30 hits", func() bool {
			code, _ := p.check(t, "t/hits", "tenant-1", 0)
			return code == http.StatusTooManyRequests
		})
		code, h := p.check(t, "t/hits", "tenant-1", 1)
		if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
			t.Fatalf("%s granted the 31st hit or gave no Retry-After: status %d, headers %v", p.name, code, h)
		}
	}
	t.Logf("B and C reject %v after A's 30th hit", time.Since(hit30).Round(time.Millisecond))

	// Pod A's agent holds 4 copies of t/jobs for acme: B and C count them.
	sess := a.session(t)
	if got := a.reserve(t, "acme", 4, sess); got != 4 {
		t.Fatalf("pod A reserved %d copies, want 4", got)
	}
	for _, p := range []*pod{b, c} {
		waitFor(t, 5*time.Second, p.name+" to count A's 4 holds", func() bool { return p.holds(t, "acme") == 4 })
	}
	if got := b.reserve(t, "acme", 2, b.session(t)); got != 0 {
		t.Fatalf("pod B reserved %d copies beside A's 4 of 5, want 0", got)
	}

	// SIGKILL pod A's agent: B and C drop its holds once memberlist
	// declares it dead.
	a.kill(t, syscall.SIGKILL)
	killed := time.Now()
	for _, p := range []*pod{b, c} {
		waitFor(t, 30*time.Second, p.name+" to drop the killed agent's holds", func() bool { return p.holds(t, "acme") == 0 })
	}
	dead := time.Now()
	t.Logf("B and C dropped the killed agent's holds %v after SIGKILL", dead.Sub(killed).Round(time.Millisecond))
	if got := b.reserve(t, "acme", 2, b.session(t)); got != 2 {
		t.Fatalf("pod B reserved %d copies after A's holds were dropped, want 2", got)
	}

	// Pod A comes back as a rescheduled pod does: the same name, a new
	// address; the Service's name now resolves to it instead. Its peers
	// let a dead member's name be taken at a new address a second after
	// they declared it dead (memberlist's DeadNodeReclaimTime, which obol
	// sets to 1 s); a pod back sooner waits for the next push/pull, up to
	// 30 s. The test restarts A after that second, as a rescheduled pod
	// (seconds to start) would come back. The killed agent's socket is
	// still in the emptyDir: the new one replaces it.
	oldAddr := net.JoinHostPort(a.ip, gossipPort)
	a.moveIP(t, w.podIP(11))
	w.setPeers(a.ip, b.ip, c.ip)
	// memberlist keeps the instant it declared A dead to itself and tells
	// no one when the reclaim time has passed: no event marks it.
	time.Sleep(time.Until(dead.Add(deadNodeReclaim + 100*time.Millisecond)))
	restart := time.Now()
	a.launch(t, img)
	a.awaitReady(t)
	awaitMesh(t, 5*time.Second, pods)
	t.Logf("pod A restarted at %s: ready in %v, back in the mesh (seen alive at its new address by B and C) %v after the start",
		a.ip, a.ready.Round(time.Millisecond), time.Since(restart).Round(time.Millisecond))
	// The Go resolver of the static binary, in the image's root with the
	// pod's resolv.conf, found all three addresses: A's join reached
	// them all (itself included).
	if j := a.logLine("gossip: joined"); j == nil || j["reached"] != float64(3) {
		t.Errorf("pod A's join did not reach three addresses, so %s resolved to fewer: %v\n%s", serviceName, j, a.stderr)
	}
	for _, p := range []*pod{b, c} {
		m := p.logLine("gossip: peer rejoined at a new address")
		if m == nil || m["node"] != "pod-a" || m["old_addr"] != oldAddr || m["addr"] != net.JoinHostPort(a.ip, gossipPort) {
			t.Errorf("%s did not log pod-a's rejoin from %s: %v", p.name, oldAddr, m)
		}
	}

	// A new config through the ConfigMap: the kubelet's symlink swap,
	// then every agent reloads it.
	before := map[*pod]int{}
	for _, p := range pods {
		before[p] = p.configVersion(t)
	}
	writeAtomic(t, w.configMap, map[string]string{"config.yaml": fmt.Sprintf(podsConfig, 40)})
	swapped := time.Now()
	for _, p := range pods {
		reloadAfterConfigMapSwap(t, p)
	}
	for _, p := range pods {
		waitFor(t, 10*time.Second, p.name+" to put the swapped config in force", func() bool {
			return p.configVersion(t) == before[p]+1
		})
		_, h := p.check(t, "t/hits", "tenant-2", 0)
		if pol := h.Get("RateLimit-Policy"); !strings.Contains(pol, "q=40") {
			t.Errorf("%s after the swap: RateLimit-Policy %q, want the new limit 40", p.name, pol)
		}
	}
	t.Logf("every agent runs the swapped config %v after the swap", time.Since(swapped).Round(time.Millisecond))

	// The kubelet stops a pod with SIGTERM to the container's PID 1: each
	// agent stops cleanly and removes its socket from the emptyDir.
	for _, p := range pods {
		p.kill(t, syscall.SIGTERM)
		if p.exitErr != nil {
			t.Errorf("%s exited on SIGTERM with %v, want status 0; stderr:\n%s", p.name, p.exitErr, p.stderr)
		}
		if _, err := os.Lstat(p.socket()); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left its socket in the emptyDir after SIGTERM: %v", p.name, err)
		}
	}
	t.Logf("figures: image %.1f MB; start to ready %v, %v, %v (A restarted: %v); three pods joined in %v; test %v",
		float64(img.Size)/1e6, pods[0].first.Round(time.Millisecond), b.ready.Round(time.Millisecond), c.ready.Round(time.Millisecond),
		a.ready.Round(time.Millisecond), joined.Round(time.Millisecond), time.Since(began).Round(time.Second))
}

// agentWatchesConfig says whether the agent re-reads its config file by
// itself when the file changes. While false, reloadAfterConfigMapSwap sends
// SIGHUP, as an operator would; once true, it sends nothing and the test's
// wait for exactly one new config version shows the watch works in a pod,
// through the kubelet's symlink swap.
const agentWatchesConfig = true

// reloadAfterConfigMapSwap makes p's agent re-read its config after the
// ConfigMap's files were swapped, unless the agent watches its config file
// (agentWatchesConfig).
func reloadAfterConfigMapSwap(t *testing.T, p *pod) {
	t.Helper()
	if agentWatchesConfig {
		return
	}
	if err := syscall.Kill(p.agent, syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP to %s's agent: %v", p.name, err)
	}
}

// requirePodTools skips the test unless it runs as root with podman,
// unshare, ip, tar and go.
func requirePodTools(t *testing.T) {
	t.Helper()
	const how = "run it as root with podman, util-linux (unshare) and iproute2 installed: " +
		"`go test -run TestPodsFromImage -v ./deploy/sidecar/` (.ci/sidecar-image installs them)"
	if testing.Short() {
		t.Skip("builds the image and runs it in three pods; run without -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (network and mount namespaces, podman's store): " + how)
	}
	for _, tool := range []string{"podman", "unshare", "ip", "tar", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %s", tool, how)
		}
	}
}
