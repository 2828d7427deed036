package k8stest

// The rules every deployment of obol beside an app must keep, whoever
// writes it: the kustomize base (manifests_test.go) and the Helm chart
// (chart_test.go) are each decoded strictly into the API types and checked
// by the same functions here.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Names the checks look for.
const (
	sidecarName = "obol"
	runDir      = "/run/obol"
	agentUID    = 65532
	// defaultDrain is the agent's --drain-timeout when none is given.
	defaultDrain = 5 * time.Second
)

// decoder decodes YAML strictly into the registered API types: an unknown
// field (a misspelt one too: field names are case-sensitive) or a
// duplicate one is an error, as the API server's strict field validation
// has it.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, s, s, kjson.SerializerOptions{Yaml: true, Strict: true})
}()

// decodeStrict decodes one object.
func decodeStrict(doc []byte) (runtime.Object, error) {
	obj, gvk, err := decoder.Decode(doc, nil, nil)
	if err != nil {
		what := "object"
		if gvk != nil {
			what = gvk.Kind
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return obj, nil
}

// objects are the objects of a deployment of obol, decoded: the base's or
// the chart's.
type objects struct {
	deploy *appsv1.Deployment
	svc    *corev1.Service
	pdb    *policyv1.PodDisruptionBudget
	cm     *corev1.ConfigMap
	secret *corev1.Secret
}

// collect decodes every document strictly and sorts them by kind: one of
// each is expected. The Secret may be one made outside (userSecret).
func collect(docs [][]byte) (objects, error) {
	var o objects
	var errs []error
	for _, d := range docs {
		obj, err := decodeStrict(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var dup bool
		switch v := obj.(type) {
		case *appsv1.Deployment:
			dup, o.deploy = o.deploy != nil, v
		case *corev1.Service:
			dup, o.svc = o.svc != nil, v
		case *policyv1.PodDisruptionBudget:
			dup, o.pdb = o.pdb != nil, v
		case *corev1.ConfigMap:
			dup, o.cm = o.cm != nil, v
		case *corev1.Secret:
			dup, o.secret = o.secret != nil, v
		default:
			errs = append(errs, fmt.Errorf("unexpected object %T", obj))
		}
		if dup {
			errs = append(errs, fmt.Errorf("more than one %T", obj))
		}
	}
	if o.deploy == nil || o.svc == nil || o.pdb == nil || o.cm == nil || o.secret == nil {
		errs = append(errs, fmt.Errorf("want a Deployment, a Service, a PodDisruptionBudget, a ConfigMap and a Secret; got deployment %v, service %v, pdb %v, configmap %v, secret %v",
			o.deploy != nil, o.svc != nil, o.pdb != nil, o.cm != nil, o.secret != nil))
	}
	return o, errors.Join(errs...)
}

// flagValues returns a container's --name=value and --name value
// arguments; a bare --name is "true".
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimLeft(a, "-")
		if k, v, ok := strings.Cut(name, "="); ok {
			out[k] = v
			continue
		}
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out[name] = args[i+1]
			i++
			continue
		}
		out[name] = "true"
	}
	return out
}

// sidecar returns the obol init container.
func sidecar(ps *corev1.PodSpec) *corev1.Container {
	for i := range ps.InitContainers {
		if ps.InitContainers[i].Name == sidecarName {
			return &ps.InitContainers[i]
		}
	}
	return nil
}

// mountAt returns the container's mount at path.
func mountAt(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// mountOf returns the container's mount that holds path: the deepest
// one whose mount path is path or one of its parents.
func mountOf(c *corev1.Container, path string) *corev1.VolumeMount {
	var best *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		mp := filepath.Clean(m.MountPath)
		if (path == mp || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")) && (best == nil || len(mp) > len(filepath.Clean(best.MountPath))) {
			best = m
		}
	}
	return best
}

// volume returns the pod's volume called name.
func volume(ps *corev1.PodSpec, name string) *corev1.Volume {
	for i := range ps.Volumes {
		if ps.Volumes[i].Name == name {
			return &ps.Volumes[i]
		}
	}
	return nil
}

// containerPort resolves a probe's or a Service's port on c: by name or
// number, with its protocol.
func containerPort(c *corev1.Container, p intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, cp := range c.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			if cp.Protocol == "" {
				cp.Protocol = corev1.ProtocolTCP
			}
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

// portOf returns the port of a host:port.
func portOf(hostport string) (int32, error) {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return int32(n), err
}

// check returns every way the objects break what a sidecar deployment of
// obol needs.
func check(o objects) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	d := o.deploy
	ps := &d.Spec.Template.Spec
	podLabels := labels.Set(d.Spec.Template.Labels)
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(podLabels) {
		bad("deployment: the selector %v does not match the pod template's labels %v (%v)", d.Spec.Selector, podLabels, err)
	}
	c := sidecar(ps)
	if c == nil {
		bad("deployment: no init container %q", sidecarName)
		return errs
	}
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		bad("%s: not a native sidecar: restartPolicy %v, want Always", c.Name, c.RestartPolicy)
	}
	if c.Image == "" {
		bad("%s: no image", c.Name)
	}
	f := flagValues(c.Args)
	if len(c.Command) > 0 {
		bad("%s: a command %q replaces the image's entrypoint (the agent); give args only", c.Name, c.Command)
	}

	// The socket directory: an emptyDir at /run/obol in every container.
	m := mountAt(c, runDir)
	if m == nil {
		bad("%s: nothing mounted at %s", c.Name, runDir)
	} else if v := volume(ps, m.Name); v == nil || v.EmptyDir == nil {
		bad("%s: %s is not an emptyDir volume", c.Name, runDir)
	} else {
		for i := range ps.Containers {
			app := &ps.Containers[i]
			if am := mountAt(app, runDir); am == nil || am.Name != m.Name {
				bad("%s: does not mount the emptyDir %q at %s (the agent's socket)", app.Name, m.Name, runDir)
			}
			for _, e := range app.Env {
				if e.Name == "OBOL_SOCKET" && e.Value != f["socket"] {
					bad("%s: OBOL_SOCKET %q is not the agent's --socket %q", app.Name, e.Value, f["socket"])
				}
			}
		}
	}
	if s := f["socket"]; filepath.Dir(s) != runDir {
		bad("%s: --socket %q is not in %s", c.Name, s, runDir)
	}
	if h := f["http"]; h != "" && h != "off" {
		host, _, err := net.SplitHostPort(h)
		if ip := net.ParseIP(host); err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			bad("%s: --http %q is not loopback: the app reaches the agent on 127.0.0.1", c.Name, h)
		}
	}
	if _, ok := f["http-public"]; ok {
		bad("%s: --http-public: the API stays on loopback; probes and metrics use --status-http", c.Name)
	}

	// Probes, on the status listener (kubelet reaches the pod's IP only).
	statusPort, err := portOf(f["status-http"])
	if err != nil {
		bad("%s: --status-http %q: %v", c.Name, f["status-http"], err)
	} else if host, _, _ := net.SplitHostPort(f["status-http"]); net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback() {
		bad("%s: --status-http %q is loopback: kubelet probes the pod's IP", c.Name, f["status-http"])
	}
	probe := func(what string, p *corev1.Probe, path string) {
		switch {
		case p == nil:
			bad("%s: no %s probe", c.Name, what)
		case p.HTTPGet == nil:
			bad("%s: the %s probe is not an httpGet", c.Name, what)
		case p.HTTPGet.Path != path:
			bad("%s: the %s probe asks %s, want %s", c.Name, what, p.HTTPGet.Path, path)
		default:
			if cp, ok := containerPort(c, p.HTTPGet.Port); !ok || cp.ContainerPort != statusPort {
				bad("%s: the %s probe's port %s is not the --status-http port %d", c.Name, what, p.HTTPGet.Port.String(), statusPort)
			}
			if p.HTTPGet.Host != "" {
				bad("%s: the %s probe sets host %q: kubelet would probe another host than the pod", c.Name, what, p.HTTPGet.Host)
			}
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("startup", c.StartupProbe, "/readyz")

	// Security, container by container (a container's setting wins over
	// the pod's).
	pod := ps.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	all := []*corev1.Container{c}
	for i := range ps.Containers {
		all = append(all, &ps.Containers[i])
	}
	for _, ct := range all {
		sc := ct.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		nonRoot, uid, seccomp := sc.RunAsNonRoot, sc.RunAsUser, sc.SeccompProfile
		if nonRoot == nil {
			nonRoot = pod.RunAsNonRoot
		}
		if uid == nil {
			uid = pod.RunAsUser
		}
		if seccomp == nil {
			seccomp = pod.SeccompProfile
		}
		if nonRoot == nil || !*nonRoot {
			bad("%s: runAsNonRoot is not true", ct.Name)
		}
		if ct == c && (uid == nil || *uid != agentUID) {
			bad("%s: runAsUser %v, want %d (the image's user)", ct.Name, uid, agentUID)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			bad("%s: readOnlyRootFilesystem is not true", ct.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad("%s: allowPrivilegeEscalation is not false", ct.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			bad("%s: capabilities do not drop ALL (and add none)", ct.Name)
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			bad("%s: seccompProfile is not RuntimeDefault", ct.Name)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		bad("%s: resources: want CPU and memory requests and a memory limit, got %v", c.Name, c.Resources)
	}

	// Stopping: the grace period covers the drain.
	drain := defaultDrain
	if v, ok := f["drain-timeout"]; ok {
		if drain, err = time.ParseDuration(v); err != nil {
			bad("%s: --drain-timeout %q: %v", c.Name, v, err)
		}
	}
	if g := ps.TerminationGracePeriodSeconds; g == nil {
		bad("deployment: no terminationGracePeriodSeconds (the default, 30, says nothing of the drain timeout %v)", drain)
	} else if time.Duration(*g)*time.Second <= drain {
		bad("deployment: terminationGracePeriodSeconds %d is not above the drain timeout %v", *g, drain)
	}

	// The pod's name and IP from the downward API.
	fieldRef := func(name string) string {
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				return e.ValueFrom.FieldRef.FieldPath
			}
		}
		return ""
	}
	if fieldRef("POD_NAME") != "metadata.name" || f["node-name"] != "$(POD_NAME)" {
		bad("%s: --node-name %q is not $(POD_NAME) from the downward API's metadata.name (%q)", c.Name, f["node-name"], fieldRef("POD_NAME"))
	}
	gossipPort, err := portOf(f["gossip-bind"])
	if err != nil || fieldRef("POD_IP") != "status.podIP" || !strings.HasPrefix(f["gossip-bind"], "$(POD_IP):") {
		bad("%s: --gossip-bind %q is not $(POD_IP):port with POD_IP from the downward API's status.podIP (%q)", c.Name, f["gossip-bind"], fieldRef("POD_IP"))
	}
	for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP} {
		found := false
		for _, cp := range c.Ports {
			found = found || cp.ContainerPort == gossipPort && (cp.Protocol == proto || cp.Protocol == "" && proto == corev1.ProtocolTCP)
		}
		if !found {
			bad("%s: no %s container port %d for gossip", c.Name, proto, gossipPort)
		}
	}

	// The state file, when there is one: where the agent may write (its
	// root filesystem is read-only), and one file per agent.
	if sf, ok := f["state-file"]; ok {
		replicas := int32(1) // Kubernetes' default
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		m := mountOf(c, sf)
		switch {
		case !filepath.IsAbs(sf):
			bad("%s: --state-file %q is not an absolute path", c.Name, sf)
		case m == nil:
			bad("%s: --state-file %q: nothing is mounted there, and the root filesystem is read-only", c.Name, sf)
		case m.ReadOnly:
			bad("%s: --state-file %q: %s is mounted read-only", c.Name, sf, m.MountPath)
		default:
			v := volume(ps, m.Name)
			switch {
			case v == nil:
				bad("%s: --state-file %q: no volume %q", c.Name, sf, m.Name)
			case v.ConfigMap != nil || v.Secret != nil || v.Projected != nil || v.DownwardAPI != nil:
				bad("%s: --state-file %q is on the volume %q, which kubelet writes and the agent cannot", c.Name, sf, m.Name)
			case v.EmptyDir == nil && v.Ephemeral == nil && replicas > 1:
				bad("%s: --state-file %q is on the volume %q, which outlives the pod: with %d replicas every agent would write the same file", c.Name, sf, m.Name, replicas)
			}
		}
	}

	// The headless Service --join resolves to every pod.
	s := o.svc
	if s.Spec.ClusterIP != corev1.ClusterIPNone {
		bad("service %s: clusterIP %q, want None (headless: its name resolves to the pods)", s.Name, s.Spec.ClusterIP)
	}
	if !s.Spec.PublishNotReadyAddresses {
		bad("service %s: publishNotReadyAddresses is not true: agents would not find pods whose app is not ready", s.Name)
	}
	if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
		bad("service %s: the selector %v does not match the pods' labels %v", s.Name, s.Spec.Selector, podLabels)
	}
	for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP} {
		ok := false
		for _, sp := range s.Spec.Ports {
			if sp.Protocol != proto || sp.Port != gossipPort {
				continue
			}
			if cp, found := containerPort(c, sp.TargetPort); found && cp.ContainerPort == gossipPort && cp.Protocol == proto {
				ok = true
			}
		}
		if !ok {
			bad("service %s: no %s port %d reaching the agent's gossip port", s.Name, proto, gossipPort)
		}
	}
	join := f["join"]
	host, port, err := net.SplitHostPort(join)
	if err != nil {
		host, port = join, ""
	}
	if host != s.Name && !strings.HasPrefix(host, s.Name+".") {
		bad("%s: --join %q does not name the headless Service %q", c.Name, join, s.Name)
	}
	if port != "" && port != strconv.Itoa(int(gossipPort)) {
		bad("%s: --join %q: port %s is not the gossip port %d", c.Name, join, port, gossipPort)
	}

	// The disruption budget covers the pods.
	p := o.pdb
	if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(podLabels) {
		bad("pdb %s: the selector %v does not match the pods' labels %v (%v)", p.Name, p.Spec.Selector, podLabels, err)
	}
	if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
		bad("pdb %s: neither maxUnavailable nor minAvailable", p.Name)
	}

	// The config from the ConfigMap and the key from the Secret, each a
	// mounted directory (kubelet updates no subPath mount).
	mounted := func(file, what, name string, data func(*corev1.Volume) (string, bool)) {
		m := mountAt(c, filepath.Dir(file))
		if m == nil {
			bad("%s: nothing mounted at %s for %s", c.Name, filepath.Dir(file), file)
			return
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			bad("%s: %s is mounted with a subPath: kubelet never updates it", c.Name, m.MountPath)
		}
		v := volume(ps, m.Name)
		if v == nil {
			bad("%s: no volume %q", c.Name, m.Name)
			return
		}
		ref, ok := data(v)
		if !ok || ref != name {
			bad("%s: %s is not mounted from the %s %q", c.Name, m.MountPath, what, name)
		}
	}
	cfgFile, keyFile := f["config"], f["gossip-secret-file"]
	mounted(cfgFile, "ConfigMap", o.cm.Name, func(v *corev1.Volume) (string, bool) {
		if v.ConfigMap == nil {
			return "", false
		}
		return v.ConfigMap.Name, len(v.ConfigMap.Items) == 0
	})
	if _, ok := o.cm.Data[filepath.Base(cfgFile)]; !ok {
		bad("configmap %s: no key %q for --config %q", o.cm.Name, filepath.Base(cfgFile), cfgFile)
	}
	mounted(keyFile, "Secret", o.secret.Name, func(v *corev1.Volume) (string, bool) {
		if v.Secret == nil {
			return "", false
		}
		return v.Secret.SecretName, len(v.Secret.Items) == 0
	})
	if _, ok := o.secret.Data[filepath.Base(keyFile)]; !ok {
		bad("secret %s: no key %q for --gossip-secret-file %q", o.secret.Name, filepath.Base(keyFile), keyFile)
	}
	return errs
}

// splitYAML splits a YAML stream into its documents, leaving out those
// with nothing but comments (a template that rendered to nothing).
func splitYAML(b []byte) ([][]byte, error) {
	var docs [][]byte
	r := kyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		docs = append(docs, doc)
	}
}

// stripComments drops the comment lines of a YAML document.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// sources are the deployments of obol the repository ships, each built
// and decoded as a user's tool would: the kustomize base, and the chart
// with its default values installed as the release example-app (the
// base's names).
var sources = []struct {
	name  string
	build func(t *testing.T) (objects, error)
}{
	{"base", func(t *testing.T) (objects, error) { return build(t, nil) }},
	{"chart", func(t *testing.T) (objects, error) { return buildChart(t, defaultRelease, "") }},
}

// TestChecksFail: each invariant, broken on its own, is reported, in the
// base and in the chart.
func TestChecksFail(t *testing.T) {
	cases := []struct {
		name    string
		breakIt func(o objects)
		want    string
	}{
		{"not a native sidecar", func(o objects) { sidecar(pod(o)).RestartPolicy = nil }, "not a native sidecar"},
		{"the app without the socket dir", func(o objects) { pod(o).Containers[0].VolumeMounts = nil }, "does not mount the emptyDir"},
		{"the socket dir not an emptyDir", func(o objects) {
			v := volume(pod(o), mountAt(sidecar(pod(o)), runDir).Name)
			v.EmptyDir, v.HostPath = nil, &corev1.HostPathVolumeSource{Path: "/run/obol"}
		}, "is not an emptyDir"},
		{"no readiness probe", func(o objects) { sidecar(pod(o)).ReadinessProbe = nil }, "no readiness probe"},
		{"liveness on the wrong path", func(o objects) { sidecar(pod(o)).LivenessProbe.HTTPGet.Path = "/readyz" }, "liveness probe asks /readyz"},
		{"a probe on the loopback API port", func(o objects) { sidecar(pod(o)).ReadinessProbe.HTTPGet.Port = intstr.FromInt32(7070) }, "is not the --status-http port"},
		{"status on loopback", func(o objects) { setArg(sidecar(pod(o)), "status-http", "127.0.0.1:7071") }, "is loopback"},
		{"public API", func(o objects) { setArg(sidecar(pod(o)), "http", "0.0.0.0:7070") }, "is not loopback"},
		{"root", func(o objects) { sidecar(pod(o)).SecurityContext.RunAsNonRoot = ptr(false) }, "runAsNonRoot"},
		{"writable root", func(o objects) { pod(o).Containers[0].SecurityContext.ReadOnlyRootFilesystem = nil }, "app: readOnlyRootFilesystem"},
		{"escalation", func(o objects) { sidecar(pod(o)).SecurityContext.AllowPrivilegeEscalation = ptr(true) }, "allowPrivilegeEscalation"},
		{"capabilities kept", func(o objects) { sidecar(pod(o)).SecurityContext.Capabilities.Drop = []corev1.Capability{"NET_RAW"} }, "drop ALL"},
		{"no seccomp", func(o objects) {
			sidecar(pod(o)).SecurityContext.SeccompProfile = nil
			pod(o).SecurityContext.SeccompProfile = nil
		}, "seccompProfile"},
		{"no memory limit", func(o objects) { delete(sidecar(pod(o)).Resources.Limits, corev1.ResourceMemory) }, "resources"},
		{"grace period within the drain", func(o objects) { pod(o).TerminationGracePeriodSeconds = ptr(int64(10)) }, "terminationGracePeriodSeconds 10 is not above the drain timeout 10s"},
		{"not headless", func(o objects) { o.svc.Spec.ClusterIP = "" }, "want None"},
		{"not-ready pods unpublished", func(o objects) { o.svc.Spec.PublishNotReadyAddresses = false }, "publishNotReadyAddresses"},
		{"no UDP gossip port", func(o objects) { o.svc.Spec.Ports = o.svc.Spec.Ports[:1] }, "no UDP port 7946"},
		{"service selects other pods", func(o objects) { o.svc.Spec.Selector = map[string]string{"app": "other"} }, "does not match the pods' labels"},
		{"join another name", func(o objects) { setArg(sidecar(pod(o)), "join", "obol-peers") }, "does not name the headless Service"},
		{"pdb selects other pods", func(o objects) { o.pdb.Spec.Selector.MatchLabels = map[string]string{"app": "other"} }, "pdb example-app: the selector"},
		{"node name not from the downward API", func(o objects) { setArg(sidecar(pod(o)), "node-name", "obol") }, "--node-name"},
		{"pod IP from the wrong field", func(o objects) { sidecar(pod(o)).Env[1].ValueFrom.FieldRef.FieldPath = "status.hostIP" }, "--gossip-bind"},
		{"config by subPath", func(o objects) {
			m := mountAt(sidecar(pod(o)), "/etc/obol")
			m.MountPath, m.SubPath = "/etc/obol/config.yaml", "config.yaml"
			setArg(sidecar(pod(o)), "config", "/etc/obol/config.yaml")
		}, "nothing mounted at /etc/obol"},
		{"config key missing", func(o objects) { o.cm.Data = map[string]string{"obol.yaml": "{}"} }, `no key "config.yaml"`},
		{"state file on the read-only root", func(o objects) { setArg(sidecar(pod(o)), "state-file", "/var/lib/obol/obol.state") }, "nothing is mounted there"},
		{"state file on a read-only mount", func(o objects) { setArg(sidecar(pod(o)), "state-file", "/etc/obol/obol.state") }, "is mounted read-only"},
		{"state file shared by the replicas", func(o objects) {
			ps := pod(o)
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "obol-state", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "obol-state"}}})
			c := sidecar(ps)
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "obol-state", MountPath: "/var/lib/obol"})
			setArg(c, "state-file", "/var/lib/obol/obol.state")
		}, "which outlives the pod: with 3 replicas"},
		{"secret from another Secret", func(o objects) {
			volume(pod(o), mountAt(sidecar(pod(o)), "/etc/obol-gossip").Name).Secret.SecretName = "other"
		}, "is not mounted from the Secret"},
	}
	for _, src := range sources {
		for _, tc := range cases {
			t.Run(src.name+"/"+tc.name, func(t *testing.T) {
				o, err := src.build(t)
				if err != nil {
					t.Fatal(err)
				}
				tc.breakIt(o)
				errs := check(o)
				for _, e := range errs {
					if strings.Contains(e.Error(), tc.want) {
						return
					}
				}
				t.Errorf("no error says %q; got %v", tc.want, errs)
			})
		}
	}
}

// TestAgentTakesTheFlags: the real agent takes the sidecar's flags, config
// and key as the base and the chart give them (agentTakesTheFlags).
func TestAgentTakesTheFlags(t *testing.T) {
	bin := agentBinary(t)
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			o, err := src.build(t)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", agentTakesTheFlags(t, bin, o))
		})
	}
}

func pod(o objects) *corev1.PodSpec { return &o.deploy.Spec.Template.Spec }

func ptr[T any](v T) *T { return &v }

// setArg sets --name=value in c's args.
func setArg(c *corev1.Container, name, value string) {
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--"+name+"=") {
			c.Args[i] = "--" + name + "=" + value
			return
		}
	}
	c.Args = append(c.Args, "--"+name+"="+value)
}

// envRef is a $(VAR) reference in a container's args.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// agentTakesTheFlags runs the real agent (bin) with --check-config and the
// sidecar's args as kubelet would start it: $(VAR) expanded from the
// downward API (a made-up pod name and IP) and the container's env, which
// the agent gets too, each volume laid out where it is mounted (the
// ConfigMap's and the Secret's keys as files, any other volume an empty
// directory), under a temporary root. It fails t unless the agent takes
// them and says it would serve the socket and gossip as the pod means it
// to, and returns what the agent printed.
func agentTakesTheFlags(t *testing.T, bin string, o objects) string {
	t.Helper()
	ps := pod(o)
	c := sidecar(ps)
	podName, podIP := o.deploy.Name+"-7d9f8c6b5-x2x4q", "10.244.1.7"
	env := map[string]string{}
	cmdEnv := []string{"PATH=" + os.Getenv("PATH")}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = podName
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = podIP
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
			cmdEnv = append(cmdEnv, e.Name+"="+e.Value)
		}
	}
	root := t.TempDir()
	var mounts []string
	for _, m := range c.VolumeMounts {
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		mounts = append(mounts, m.MountPath)
		v := volume(ps, m.Name)
		files := map[string][]byte{}
		switch {
		case v == nil:
			t.Fatalf("%s: no volume %s", c.Name, m.Name)
		case v.ConfigMap != nil && v.ConfigMap.Name == o.cm.Name:
			for k, s := range o.cm.Data {
				files[k] = []byte(s)
			}
		case v.Secret != nil && v.Secret.SecretName == o.secret.Name:
			files = o.secret.Data
		case v.ConfigMap != nil || v.Secret != nil:
			t.Fatalf("volume %s: a ConfigMap or Secret this test does not have", m.Name)
		}
		for k, b := range files {
			if err := os.WriteFile(filepath.Join(dir, k), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	var args []string
	for _, a := range c.Args {
		a = envRef.ReplaceAllStringFunc(a, func(ref string) string {
			v, ok := env[envRef.FindStringSubmatch(ref)[1]]
			if !ok {
				t.Fatalf("%s: %s is not in the container's env (kubelet would leave it as is)", a, ref)
			}
			return v
		})
		if k, v, ok := strings.Cut(a, "="); ok {
			for _, mp := range mounts {
				if v == mp || strings.HasPrefix(v, mp+"/") {
					v = filepath.Join(root, v)
				}
			}
			if k == "--config" {
				k = "--check-config"
			}
			a = k + "=" + v
		}
		args = append(args, a)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = cmdEnv
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	f := flagValues(c.Args)
	_, gossipPort, _ := net.SplitHostPort(f["gossip-bind"])
	for _, want := range []string{"is valid", "socket " + filepath.Join(root, f["socket"]),
		"gossip on " + net.JoinHostPort(podIP, gossipPort) + " as " + podName, "joining " + o.svc.Name, "encrypted"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--check-config does not say %q:\n%s", want, out)
		}
	}
	return string(out)
}
