package sidecar

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// The pods' world, as the Kubernetes manifests lay it out.
const (
	podSubnet   = "10.213.80."       // the pods' /24, on a bridge in the test's own network namespace
	dnsAddr     = podSubnet + "254"  // the cluster DNS server, on that bridge
	k8sNS       = "obol-test"        // the namespace: first in the pods' DNS search path
	serviceName = "obol-peers"       // the headless Service every agent joins
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

// podFlags are the agent's arguments in a pod, as the manifests give them
// (the socket comes from the image's OBOL_SOCKET).
func podFlags(name, ip string) []string {
	return []string{
		"--config", configMount + "/config.yaml",
		"--node-name", name,
		"--gossip-bind", net.JoinHostPort(ip, gossipPort),
		"--join", serviceName,
		"--gossip-secret-file", secretMount + "/key",
	}
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
	writeAtomic(t, w.secret, map[string]string{"key": base64.StdEncoding.EncodeToString(key) + "\n"})
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
const agentWatchesConfig = false

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

// world is the test's machine: a podman store of its own, the image, the
// network, the DNS server, and the ConfigMap and Secret directories.
type world struct {
	dir       string
	tag       string // the image
	version   string // stamped into the binary by build-image
	podmanEnv []string
	rootfsTar string
	netns     string // the bridge's namespace, where the DNS server listens
	prefix    string // the prefix of every namespace of this run
	configMap string
	secret    string

	mu    sync.Mutex
	peers []net.IP // what serviceName resolves to
}

func newWorld(t *testing.T) *world {
	dir, err := os.MkdirTemp("", "obol-pods-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing the test's directory: %v", err)
		}
	})
	id := fmt.Sprintf("%05x", os.Getpid()&0xfffff)
	w := &world{
		dir:       dir,
		tag:       "localhost/obol-agent:pods-test-" + id,
		version:   "v0.0.0-podstest." + id,
		prefix:    "obol-pods-" + id,
		configMap: filepath.Join(dir, "configmap"),
		secret:    filepath.Join(dir, "secret"),
	}
	for _, d := range []string{w.configMap, w.secret} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A store of the test's own, in vfs (which works anywhere, overlay
	// or not): nothing is pulled into or left in the machine's store.
	store := filepath.Join(dir, "store")
	storageConf := filepath.Join(dir, "storage.conf")
	containersConf := filepath.Join(dir, "containers.conf")
	writeFile(t, storageConf, fmt.Sprintf("[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n",
		filepath.Join(store, "graph"), filepath.Join(store, "run")), 0o644)
	writeFile(t, containersConf, fmt.Sprintf("[engine]\ntmp_dir = %q\nevents_logger = \"none\"\n",
		filepath.Join(store, "tmp")), 0o644)
	w.podmanEnv = append(os.Environ(), "CONTAINERS_STORAGE_CONF="+storageConf, "CONTAINERS_CONF="+containersConf)
	return w
}

// podman runs podman on the test's store and returns its stdout.
func (w *world) podman(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("podman", args...)
	cmd.Env = w.podmanEnv
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// buildImage runs build-image, which must print the tag.
func (w *world) buildImage(t *testing.T) {
	t.Helper()
	started := time.Now()
	cmd := exec.Command("./build-image", w.tag)
	cmd.Env = append(slices.Clone(w.podmanEnv), "OBOL_VERSION="+w.version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("build-image %s: %v\n%s", w.tag, err, stderr.String())
	}
	t.Cleanup(func() {
		cmd := exec.Command("podman", "rmi", "--force", w.tag)
		cmd.Env = w.podmanEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("podman rmi %s: %v\n%s", w.tag, err, out)
		}
	})
	if got := strings.TrimSpace(string(out)); got != w.tag {
		t.Fatalf("build-image printed %q on stdout, want the tag %q", got, w.tag)
	}
	t.Logf("build-image (binary and image) took %v", time.Since(started).Round(100*time.Millisecond))
}

// image is what a runtime reads from the image's config.
type image struct {
	Size   int64
	Config struct {
		User       string
		Env        []string
		Entrypoint []string
		Cmd        []string
		Volumes    map[string]struct{}
	}
	uid, gid int
}

// inspect reads the image's config and checks what the pods rely on.
func (w *world) inspect(t *testing.T) *image {
	t.Helper()
	var imgs []*image
	if err := json.Unmarshal([]byte(w.podman(t, "image", "inspect", "--format", "json", w.tag)), &imgs); err != nil || len(imgs) != 1 {
		t.Fatalf("podman image inspect %s: %v (%d images)", w.tag, err, len(imgs))
	}
	img := imgs[0]
	t.Logf("image %s: %d bytes (%.1f MB), user %q, entrypoint %q, env %q", w.tag, img.Size, float64(img.Size)/1e6,
		img.Config.User, img.Config.Entrypoint, img.Config.Env)
	u, g, ok := strings.Cut(img.Config.User, ":")
	var err1, err2 error
	img.uid, err1 = strconv.Atoi(u)
	img.gid, err2 = strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || img.uid == 0 || img.gid == 0 {
		t.Fatalf("the image's user is %q: want a numeric non-root uid:gid (65532:65532)", img.Config.User)
	}
	if len(img.Config.Entrypoint) == 0 {
		t.Fatal("the image has no entrypoint")
	}
	if !slices.Contains(img.Config.Env, "OBOL_SOCKET="+socketMount+"/obol.sock") {
		t.Errorf("the image's environment %q does not put the socket in %s", img.Config.Env, socketMount)
	}
	if _, ok := img.Config.Volumes[socketMount]; !ok {
		t.Errorf("the image declares the volumes %v, not %s", img.Config.Volumes, socketMount)
	}
	if img.Size > 40e6 {
		t.Errorf("the image is %d bytes: more than 40 MB for one static binary", img.Size)
	}
	return img
}

// exportRootfs exports the image's root filesystem (podman create, podman
// export) and checks it holds no shell and a socket directory the image's
// user owns.
func (w *world) exportRootfs(t *testing.T, img *image) {
	t.Helper()
	name := w.prefix + "-export"
	w.podman(t, "create", "--network", "none", "--name", name, w.tag)
	w.rootfsTar = filepath.Join(w.dir, "rootfs.tar")
	w.podman(t, "export", "--output", w.rootfsTar, name)
	w.podman(t, "rm", "--volumes", name)

	f, err := os.Open(w.rootfsTar)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var files []string
	sockDir := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the exported rootfs: %v", err)
		}
		name := path.Clean("/" + h.Name)
		switch path.Base(name) {
		case "sh", "bash", "ash", "dash", "busybox":
			t.Errorf("the image holds a shell: %s", name)
		}
		if h.Typeflag == tar.TypeReg {
			files = append(files, fmt.Sprintf("%s (%d bytes)", name, h.Size))
		}
		if name == socketMount && h.Typeflag == tar.TypeDir {
			sockDir = h.Uid == img.uid && h.Gid == img.gid
		}
	}
	t.Logf("the image's files: %s", strings.Join(files, ", "))
	if !sockDir {
		t.Errorf("the image has no directory %s owned by %d:%d", socketMount, img.uid, img.gid)
	}
}

// unpack extracts the exported rootfs into dir, owners as numbers.
func (w *world) unpack(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "--extract", "--same-permissions", "--same-owner", "--numeric-owner",
		"--file", w.rootfsTar, "--directory", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpacking the rootfs: %v\n%s", err, out)
	}
}

// checkVersion runs the entrypoint --version from the rootfs as the image's
// user: it prints the version build-image stamped.
func (w *world) checkVersion(t *testing.T, img *image) {
	t.Helper()
	root := filepath.Join(w.dir, "version-rootfs")
	w.unpack(t, root)
	args := append([]string{"--root", root, "--setuid", strconv.Itoa(img.uid), "--setgid", strconv.Itoa(img.gid), "--"},
		append(slices.Clone(img.Config.Entrypoint), "--version")...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = img.Config.Env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--version from the rootfs: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "obol agent "+w.version+"\n") {
		t.Errorf("--version from the image printed\n%s\nwant the stamped version %s first", out, w.version)
	}
}

// podIP returns the pods' address with host part i.
func (w *world) podIP(i int) string { return podSubnet + strconv.Itoa(i) }

// network makes the bridge, in a network namespace of its own with the DNS
// server's address.
func (w *world) network(t *testing.T) {
	t.Helper()
	w.netns = w.prefix + "-net"
	ip(t, "netns", "add", w.netns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", w.netns).Run() })
	ip(t, "-n", w.netns, "link", "set", "lo", "up")
	ip(t, "-n", w.netns, "link", "add", "br0", "type", "bridge")
	ip(t, "-n", w.netns, "addr", "add", dnsAddr+"/24", "dev", "br0")
	ip(t, "-n", w.netns, "link", "set", "br0", "up")
}

// setPeers sets the addresses serviceName resolves to.
func (w *world) setPeers(addrs ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.peers = w.peers[:0]
	for _, a := range addrs {
		w.peers = append(w.peers, net.ParseIP(a).To4())
	}
}

// ServeDNS answers as the cluster DNS does for a headless Service: an A
// record per pod for the Service's name in the namespace, no AAAA records,
// and NXDOMAIN for any other name. memberlist asks names with a dot over
// TCP, type ANY; the Go resolver asks A and AAAA over UDP.
func (w *world) ServeDNS(rw dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = rw.WriteMsg(m)
		return
	}
	q := r.Question[0]
	if !strings.EqualFold(q.Name, serviceName+"."+k8sNS+".svc.cluster.local.") {
		m.Rcode = dns.RcodeNameError
		_ = rw.WriteMsg(m)
		return
	}
	if q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY {
		w.mu.Lock()
		for _, a := range w.peers {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: a})
		}
		w.mu.Unlock()
	}
	_ = rw.WriteMsg(m)
}

// serveDNS starts the DNS server on the bridge, UDP and TCP.
func (w *world) serveDNS(t *testing.T) {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	err := inNetns(w.netns, func() error {
		var err error
		if pc, err = net.ListenPacket("udp4", net.JoinHostPort(dnsAddr, "53")); err != nil {
			return err
		}
		ln, err = net.Listen("tcp4", net.JoinHostPort(dnsAddr, "53"))
		return err
	})
	if err != nil {
		t.Fatalf("DNS server: %v", err)
	}
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: w}, {Listener: ln, Handler: w}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() { _ = s.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = s.Shutdown() })
	}
}

// inNetns runs f on an OS thread moved into the named network namespace,
// so that the sockets f opens live there; the thread is never used again.
func inNetns(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		ns, err := os.Open("/run/netns/" + name)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// ip runs iproute2's ip.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// pod is one pod: a network namespace with an address on the bridge, the
// image's rootfs, its emptyDir, its resolv.conf and hosts, and the agent
// when it runs.
type pod struct {
	w      *world
	name   string
	ip     string
	netns  string
	rootfs string
	empty  string // the emptyDir at /run/obol, host side
	resolv string
	hosts  string
	client *http.Client

	cmd     *exec.Cmd
	agent   int // the agent's PID, as the host sees it
	stderr  *syncBuffer
	exited  chan struct{}
	exitErr error
	started time.Time     // the last start
	ready   time.Duration // the last start's time to ready
	first   time.Duration // the first start's
}

// newPod makes a pod with address host part i: its namespace, veth on the
// bridge, rootfs and the files the runtime provides.
func (w *world) newPod(t *testing.T, name string, i int) *pod {
	t.Helper()
	dir := filepath.Join(w.dir, name)
	p := &pod{w: w, name: name, ip: w.podIP(i), netns: w.prefix + "-" + name, rootfs: filepath.Join(dir, "rootfs"),
		empty: filepath.Join(dir, "emptydir"), resolv: filepath.Join(dir, "resolv.conf"), hosts: filepath.Join(dir, "hosts")}
	ip(t, "netns", "add", p.netns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.netns).Run() })
	veth := "veth-" + name
	ip(t, "-n", w.netns, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", p.netns)
	ip(t, "-n", w.netns, "link", "set", veth, "master", "br0", "up")
	ip(t, "-n", p.netns, "link", "set", "lo", "up")
	ip(t, "-n", p.netns, "addr", "add", p.ip+"/24", "dev", "eth0")
	ip(t, "-n", p.netns, "link", "set", "eth0", "up")

	w.unpack(t, p.rootfs)
	// The mount points a runtime makes in the container's root: /run/obol
	// must come from the image (its VOLUME).
	for _, d := range []string{"proc", configMount, secretMount} {
		if err := os.MkdirAll(filepath.Join(p.rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"/etc/resolv.conf", "/etc/hosts"} {
		writeFile(t, filepath.Join(p.rootfs, f), "", 0o644)
	}
	// An emptyDir is 0777; with the pod's fsGroup the kubelet gives it that
	// group and the setgid bit, so that what is created in it (the socket)
	// belongs to the group every container of the pod is in.
	if err := os.Mkdir(p.empty, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p.empty, 0, fsGroup); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.empty, 0o777|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p.resolv, fmt.Sprintf("search %s.svc.cluster.local svc.cluster.local cluster.local\nnameserver %s\noptions ndots:5\n", k8sNS, dnsAddr), 0o644)
	p.writeHosts(t)
	p.client = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", p.socket())
		}},
	}
	return p
}

// socket is the agent's socket as the app sees it, in the emptyDir.
func (p *pod) socket() string { return filepath.Join(p.empty, "obol.sock") }

// writeHosts writes the pod's /etc/hosts as the kubelet does, in place
// (the file is bind-mounted).
func (p *pod) writeHosts(t *testing.T) {
	t.Helper()
	writeFile(t, p.hosts, fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", p.ip, p.name), 0o644)
}

// moveIP gives the pod a new address, as a rescheduled pod gets one.
func (p *pod) moveIP(t *testing.T, addr string) {
	t.Helper()
	ip(t, "-n", p.netns, "addr", "del", p.ip+"/24", "dev", "eth0")
	ip(t, "-n", p.netns, "addr", "add", addr+"/24", "dev", "eth0")
	p.ip = addr
	p.writeHosts(t)
}

// podRuntime is the container runtime's part, run by sh in the pod's
// network namespace and a private mount namespace: it bind-mounts the
// volumes and files into the rootfs (read-only but the emptyDir), makes
// the root read-only, and runs the entrypoint in it as the image's user,
// as PID 1 of a new PID namespace with /proc mounted.
// Arguments: ROOTFS UID GID {SOURCE TARGET ro|rw}... -- ENTRYPOINT ARGS...
const podRuntime = `set -eu
root=$1 uid=$2 gid=$3
shift 3
mount --bind "$root" "$root"
while [ "$1" != -- ]; do
	mount --bind "$1" "$root$2"
	if [ "$3" = ro ]; then mount -o remount,bind,ro "$root$2"; fi
	shift 3
done
shift
mount -o remount,bind,ro "$root"
exec unshare --pid --fork --kill-child --mount-proc --setgid "$gid" --setuid "$uid" --root "$root" -- "$@"
`

// launch starts the pod's agent: the image's entrypoint with the pod
// flags, the image's environment, in the pod.
func (p *pod) launch(t *testing.T, img *image) {
	t.Helper()
	args := []string{"netns", "exec", p.netns, "unshare", "--mount", "--propagation", "private",
		"sh", "-c", podRuntime, "pod-runtime", p.rootfs, strconv.Itoa(img.uid), strconv.Itoa(img.gid),
		p.empty, socketMount, "rw",
		p.w.configMap, configMount, "ro",
		p.w.secret, secretMount, "ro",
		p.resolv, "/etc/resolv.conf", "ro",
		p.hosts, "/etc/hosts", "ro",
		"--"}
	args = append(args, img.Config.Entrypoint...)
	args = append(args, img.Config.Cmd...)
	args = append(args, podFlags(p.name, p.ip)...)
	p.cmd = exec.Command("ip", args...)
	p.cmd.Env = img.Config.Env
	p.stderr = &syncBuffer{}
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	p.exited, p.exitErr, p.agent = make(chan struct{}), nil, 0
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	cmd, exited := p.cmd, p.exited
	go func() { p.exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
			return
		default:
		}
		if pid := p.agent; pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill() // --kill-child takes the agent with it
			<-exited
		}
	})
}

// awaitReady waits until the agent answers /readyz with 200 through the
// socket, and finds the agent's PID. Safe to call for several pods at once.
func (p *pod) awaitReady(t *testing.T) {
	deadline := p.started.Add(20 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Errorf("%s's agent exited before it was ready: %v\n%s", p.name, p.exitErr, p.stderr)
			return
		default:
		}
		if resp, err := p.client.Get("http://obol/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("%s's agent was not ready in 20 s:\n%s", p.name, p.stderr)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	p.ready = time.Since(p.started)
	if p.first == 0 {
		p.first = p.ready
	}
	// The agent is the only child of the runtime's unshare, which kept
	// the PID ip started with.
	pid, err := childOf(p.cmd.Process.Pid)
	if err != nil {
		t.Errorf("%s: finding the agent: %v", p.name, err)
		return
	}
	p.agent = pid
}

// childOf returns the PID of parent's only child.
func childOf(parent int) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var kids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(parent) {
			kids = append(kids, pid)
		}
	}
	if len(kids) != 1 {
		return 0, fmt.Errorf("process %d has children %v, want one", parent, kids)
	}
	return kids[0], nil
}

// checkContained checks, from /proc, that the agent runs as the image's
// user with no other group and no capability, as PID 1 of its own PID namespace, with a
// read-only root and a writable /run/obol, and that its socket there
// belongs to the pod's fsGroup.
func (p *pod) checkContained(t *testing.T, img *image) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.agent))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Uid":    fmt.Sprintf("%d\t%[1]d\t%[1]d\t%[1]d", img.uid),
		"Gid":    fmt.Sprintf("%d\t%[1]d\t%[1]d\t%[1]d", img.gid),
		"Groups": "",
		"CapEff": "0000000000000000", // as with drop: [ALL]
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		v = strings.TrimSpace(v)
		if w, ok := want[k]; ok && v != w {
			t.Errorf("%s's agent: %s %q, want %q", p.name, k, v, w)
		}
		if k == "NSpid" {
			if f := strings.Fields(v); len(f) != 2 || f[1] != "1" {
				t.Errorf("%s's agent: NSpid %q, want PID 1 in a namespace of its own", p.name, v)
			}
		}
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", p.agent))
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]string{} // mount point → options, as the agent sees them
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 5 {
			opts[f[4]] = f[5]
		}
	}
	if o := opts["/"]; !slices.Contains(strings.Split(o, ","), "ro") {
		t.Errorf("%s's agent runs with a root mounted %q, want read-only", p.name, o)
	}
	if o := opts[socketMount]; !slices.Contains(strings.Split(o, ","), "rw") {
		t.Errorf("%s's agent has %s mounted %q, want read-write", p.name, socketMount, o)
	}
	// The socket is the pod's: any container in the fsGroup may connect.
	fi, err := os.Stat(p.socket())
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o660 || st.Uid != uint32(img.uid) || st.Gid != fsGroup {
		t.Errorf("%s's socket is %v owned by %d:%d, want a socket 0660 owned by %d:%d (the fsGroup)",
			p.name, fi.Mode(), st.Uid, st.Gid, img.uid, fsGroup)
	}
}

// kill sends sig to the agent and waits for it to exit.
func (p *pod) kill(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(p.agent, sig); err != nil {
		t.Fatalf("%v to %s's agent: %v", sig, p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s's agent did not exit on %v", p.name, sig)
	}
}

// awaitMesh waits until every pod's agent lists the others, each alive at
// its pod's current address.
func awaitMesh(t *testing.T, d time.Duration, pods []*pod) {
	t.Helper()
	waitFor(t, d, "every agent to see every pod alive at its address", func() bool {
		for _, p := range pods {
			live := map[string]string{}
			for _, m := range p.peers(t) {
				if m.State == "alive" {
					live[m.Name] = m.Address
				}
			}
			for _, q := range pods {
				if live[q.name] != net.JoinHostPort(q.ip, gossipPort) {
					return false
				}
			}
		}
		return true
	})
}

type member struct {
	Name, Address, State string
}

func (p *pod) peers(t *testing.T) []member {
	t.Helper()
	var out struct{ Peers []member }
	p.call(t, "GET", "/v1/peers", "", &out)
	return out.Peers
}

// check asks GET /v1/check and returns the status and headers.
func (p *pod) check(t *testing.T, resource, domain string, copies int) (int, http.Header) {
	t.Helper()
	resp, err := p.client.Get(fmt.Sprintf("http://obol/v1/check?resource=%s&domain=%s&copies=%d", resource, domain, copies))
	if err != nil {
		t.Fatalf("%s: check: %v", p.name, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}

// session opens a session of 10 minutes: the holds outlive the test
// unless something drops them.
func (p *pod) session(t *testing.T) string {
	t.Helper()
	var out struct{ Session string }
	p.call(t, "POST", "/v1/sessions", `{"ttl_ms": 600000}`, &out)
	return out.Session
}

// reserve asks for copies of t/jobs for domain and returns how many it got.
func (p *pod) reserve(t *testing.T, domain string, copies int, session string) int {
	t.Helper()
	var out struct{ Granted int }
	p.call(t, "POST", "/v1/reserve", fmt.Sprintf(`{"resource":"t/jobs","domain":%q,"copies":%d,"session":%q}`, domain, copies, session), &out)
	return out.Granted
}

// holds returns the copies of t/jobs held for domain across the cluster.
func (p *pod) holds(t *testing.T, domain string) int {
	t.Helper()
	var out struct{ Holds int }
	p.call(t, "GET", "/v1/state?resource=t/jobs&domain="+domain, "", &out)
	return out.Holds
}

// configVersion returns the version of the config in force.
func (p *pod) configVersion(t *testing.T) int {
	t.Helper()
	var out struct{ Version int }
	p.call(t, "GET", "/v1/config", "", &out)
	return out.Version
}

// call sends a request through the pod's socket and decodes the JSON reply.
func (p *pod) call(t *testing.T, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://obol"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", p.name, method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s %s: %d %s", p.name, method, path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %s %s: %v in %s", p.name, method, path, err, b)
	}
}

// logLine returns the agent's last log line with message msg, or nil.
func (p *pod) logLine(msg string) map[string]any {
	var found map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			found = m
		}
	}
	return found
}

// writeAtomic lays files out in dir as the kubelet does for a ConfigMap or
// Secret volume, and swaps them in atomically on later calls: the files
// live in a timestamped directory, "..data" is a symlink to it, and each
// file's name is a symlink to "..data/NAME". An update writes a new
// directory, points "..data_tmp" at it and renames that over "..data" (the
// one atomic step), then removes the old directory.
func writeAtomic(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	data := filepath.Join(dir, "..data")
	old, _ := os.Readlink(data)
	gen := ".." + time.Now().UTC().Format("2006_01_02_15_04_05.000000000")
	if err := os.Mkdir(filepath.Join(dir, gen), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		writeFile(t, filepath.Join(dir, gen, name), content, 0o644)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(gen, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, data); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); errors.Is(err, fs.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
