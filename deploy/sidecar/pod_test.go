// A pod: its namespaces, the container runtime's part of starting the
// image's entrypoint in them, and the app's calls through the socket.

package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/await"
	"github.com/obol-dev/obol/internal/proxytest"
)

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
	stderr  *proxytest.Buffer
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
	p.stderr = &proxytest.Buffer{}
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
	// Readiness shows only on /readyz, from a process in another network
	// namespace: no event reaches the test, so it is polled.
	exited := false
	ready := await.PollOK(time.Until(p.started.Add(20*time.Second)), func() bool {
		select {
		case <-p.exited:
			exited = true
			return true
		default:
		}
		resp, err := p.client.Get("http://obol/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if exited {
		t.Errorf("%s's agent exited before it was ready: %v\n%s", p.name, p.exitErr, p.stderr)
		return
	}
	if !ready {
		t.Errorf("%s's agent was not ready in 20 s:\n%s", p.name, p.stderr)
		return
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
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // the API reads no other body type
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

func writeFile(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or d passes. It is for what the agents
// show only in their replies (members, counts, holds), from processes in
// other network namespaces: no event reaches the test to say they changed.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	await.Poll(t, d, what, cond)
}
