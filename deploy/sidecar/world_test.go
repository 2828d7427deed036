// The test's machine: its podman store and the image, the bridge, the
// cluster DNS, and the kubelet's layout of ConfigMap and Secret volumes.

package sidecar

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

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
