package k8stest

// The Helm chart in deploy/sidecar/helm/obol: rendered with Helm's own
// library as helm install renders it, decoded strictly and checked by the
// rules of checks_test.go, its default render compared with the kustomize
// base, its values tried one by one, and its documentation checked
// against its values.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsyaml "sigs.k8s.io/yaml"
)

// chartDir is the chart users install.
var chartDir = filepath.Join("..", "sidecar", "helm", "obol")

// defaultRelease is the release name under which the chart's default
// render has the kustomize base's names.
const defaultRelease = "example-app"

// rendered is what helm install applies and prints.
type rendered struct {
	docs  [][]byte // the objects, one document each
	notes string   // NOTES.txt
}

// renderChart renders the chart as `helm install NAME CHART --namespace
// NAMESPACE -f values.yaml` does, values being that file's text: the
// user's values over the chart's, checked against values.schema.json,
// then every template rendered by Helm's engine. The engine runs in strict
// mode: a template that reads a value values.yaml does not have fails here,
// where helm would render it empty.
func renderChart(t *testing.T, name, namespace, values string) (rendered, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	user, err := common.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("the test's values: %v", err)
	}
	opts := common.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := util.ToRenderValuesWithSchemaValidation(ch, user, opts, nil, false)
	if err != nil {
		return rendered{}, err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, vals)
	if err != nil {
		return rendered{}, err
	}
	var r rendered
	for _, file := range slices.Sorted(maps.Keys(files)) {
		if path.Base(file) == "NOTES.txt" {
			r.notes = files[file]
			continue
		}
		docs, err := splitYAML([]byte(files[file]))
		if err != nil {
			return rendered{}, fmt.Errorf("%s: %w", file, err)
		}
		r.docs = append(r.docs, docs...)
	}
	return r, nil
}

// notesSecret matches the command NOTES.txt gives for making the Secret
// the chart refers to but does not make.
var notesSecret = regexp.MustCompile(`kubectl create secret generic (\S+) (?:-n \S+ )?--from-file=gossip\.key=gossip\.key`)

// userSecret is the Secret `kubectl create secret generic NAME
// --from-file=gossip.key=FILE` makes, FILE holding key.
func userSecret(name, key string) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\ntype: Opaque\ndata:\n  gossip.key: %s\n",
		name, base64.StdEncoding.EncodeToString([]byte(key)))
}

// buildChart renders the chart as the release name in the namespace
// default with values (a values file's text) and decodes every object. A
// chart that makes no Secret has NOTES.txt say how to make it: the Secret
// that command makes, with a fresh key, is added, as a user would.
func buildChart(t *testing.T, name, values string) (objects, error) {
	t.Helper()
	r, err := renderChart(t, name, "default", values)
	if err != nil {
		return objects{}, err
	}
	return collectChart(t, r)
}

// collectChart decodes a render's objects strictly, adding the Secret its
// NOTES.txt has the user make.
func collectChart(t *testing.T, r rendered) (objects, error) {
	t.Helper()
	docs := r.docs
	if m := notesSecret.FindStringSubmatch(r.notes); m != nil {
		docs = append(slices.Clip(docs), userSecret(m[1], gossipKey(t)))
	}
	return collect(docs)
}

// kinds returns the kind and name of each document.
func kinds(t *testing.T, docs [][]byte) []string {
	t.Helper()
	var out []string
	for _, d := range docs {
		obj, err := decodeStrict(d)
		if err != nil {
			t.Fatal(err)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, obj.GetObjectKind().GroupVersionKind().Kind+"/"+m.GetName())
	}
	return out
}

// TestChart renders the chart with its default values, decodes every
// object strictly and checks the sidecar's invariants, as TestManifests
// does for the base.
func TestChart(t *testing.T) {
	r, err := renderChart(t, defaultRelease, "default", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ConfigMap/example-app-obol-config", "Deployment/example-app", "PodDisruptionBudget/example-app", "Service/example-app-obol"}
	if got := kinds(t, r.docs); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("the chart renders %v, want %v (no Secret: the user makes it)", got, want)
	}
	o, err := collectChart(t, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range check(o) {
		t.Error(e)
	}
	if img := sidecar(pod(o)).Image; img != "localhost/obol:dev" {
		t.Errorf("the agent's image is %q, want localhost/obol:dev (the base's)", img)
	}
}

// TestChartMatchesBase: installed as example-app with its default values,
// the chart makes what the kustomize base makes: the same objects under the
// same names, the same pod (the native sidecar, its args, env, ports,
// probes, resources and securityContext, the app, the volumes), the same
// headless Service, budget and config. The chart adds Helm's labels; the
// base's labels are all there, with the same values.
func TestChartMatchesBase(t *testing.T) {
	base, err := build(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	chart, err := buildChart(t, defaultRelease, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []objects{base, chart} {
		if sidecar(pod(o)) == nil {
			t.Fatalf("deployment %s: no init container %q", o.deploy.Name, sidecarName)
		}
	}
	type names struct{ Deployment, Service, PDB, ConfigMap, Secret string }
	podSpecRest := func(o objects) corev1.PodSpec {
		ps := *pod(o)
		ps.InitContainers, ps.Containers, ps.Volumes, ps.SecurityContext = nil, nil, nil, nil
		return ps
	}
	svcSpec := func(o objects) corev1.ServiceSpec {
		s := *o.svc.Spec.DeepCopy()
		s.Selector = nil
		return s
	}
	config := func(o objects) any {
		var v any
		if err := sigsyaml.Unmarshal([]byte(o.cm.Data["config.yaml"]), &v); err != nil {
			t.Fatalf("configmap %s: %v", o.cm.Name, err)
		}
		return map[string]any{"keys": slices.Sorted(maps.Keys(o.cm.Data)), "config.yaml": v}
	}
	aspects := []struct {
		name string
		of   func(o objects) any
	}{
		{"names", func(o objects) any {
			n := names{o.deploy.Name, o.svc.Name, o.pdb.Name, o.cm.Name, ""}
			if m := mountOf(sidecar(pod(o)), flagValues(sidecar(pod(o)).Args)["gossip-secret-file"]); m != nil {
				if v := volume(pod(o), m.Name); v != nil && v.Secret != nil {
					n.Secret = v.Secret.SecretName
				}
			}
			return n
		}},
		{"replicas and update strategy", func(o objects) any { return []any{o.deploy.Spec.Replicas, o.deploy.Spec.Strategy} }},
		{"the pods' annotations", func(o objects) any { return o.deploy.Spec.Template.Annotations }},
		{"the native sidecar (image, args, env, ports, probes, resources, securityContext, mounts)", func(o objects) any { return pod(o).InitContainers }},
		{"the app's container", func(o objects) any { return pod(o).Containers }},
		{"the volumes (the socket's emptyDir, the ConfigMap, the Secret)", func(o objects) any { return pod(o).Volumes }},
		{"the pod's securityContext", func(o objects) any { return pod(o).SecurityContext }},
		{"the rest of the pod spec (grace period, service links)", func(o objects) any { return podSpecRest(o) }},
		{"the headless Service (but its selector)", func(o objects) any { return svcSpec(o) }},
		{"the disruption budget", func(o objects) any { return []any{o.pdb.Spec.MaxUnavailable, o.pdb.Spec.MinAvailable} }},
		{"obol's config", config},
		{"the Secret's keys", func(o objects) any { return slices.Sorted(maps.Keys(o.secret.Data)) }},
	}
	for _, a := range aspects {
		if b, c := a.of(base), a.of(chart); !equality.Semantic.DeepEqual(b, c) {
			t.Errorf("%s: the chart differs from the base (- base, + chart):\n%s", a.name, diff.Diff(b, c))
		}
	}
	// Every label the base puts on an object or a pod, the chart puts
	// there too: what selects the base's pods (kubectl -l, a PodMonitor)
	// selects the chart's.
	sub := []struct {
		what       string
		base, more map[string]string
	}{
		{"the Deployment's labels", base.deploy.Labels, chart.deploy.Labels},
		{"the pods' labels", base.deploy.Spec.Template.Labels, chart.deploy.Spec.Template.Labels},
		{"the Service's labels", base.svc.Labels, chart.svc.Labels},
		{"the budget's labels", base.pdb.Labels, chart.pdb.Labels},
	}
	for _, s := range sub {
		for k, v := range s.base {
			if s.more[k] != v {
				t.Errorf("%s: the base has %s=%s, the chart %q", s.what, k, v, s.more[k])
			}
		}
	}
	if sel := labels.SelectorFromSet(base.deploy.Spec.Selector.MatchLabels); !sel.Matches(labels.Set(chart.deploy.Spec.Template.Labels)) {
		t.Errorf("the base's selector %v does not select the chart's pods %v", sel, chart.deploy.Spec.Template.Labels)
	}
}

// TestChartValues renders the chart with values other than the defaults
// and checks each render with the same rules, the agent's --check-config
// included, and what each value changes.
func TestChartValues(t *testing.T) {
	bin := agentBinary(t)
	key := gossipKey(t)
	cases := []struct {
		name, release, values string
		want                  func(t *testing.T, o objects, r rendered)
	}{
		{
			name:    "one replica, the state file on a claim, another image, the key in the values",
			release: "shop",
			values: `
replicas: 1
strategy: {type: Recreate}
image: {repository: registry.example.com/obol/agent, tag: v0.5.0, pullPolicy: Always}
gossip:
  key: ` + jsonString(key) + `
stateFile:
  interval: 2s
  volume:
    persistentVolumeClaim: {claimName: shop-obol-state}
`,
			want: func(t *testing.T, o objects, r rendered) {
				ps := pod(o)
				c := sidecar(ps)
				f := flagValues(c.Args)
				expect(t, "names", []string{o.deploy.Name, o.svc.Name, o.pdb.Name, o.cm.Name, o.secret.Name},
					[]string{"shop", "shop-obol", "shop", "shop-obol-config", "shop-obol-gossip"})
				expect(t, "--join", f["join"], "shop-obol")
				expect(t, "replicas", *o.deploy.Spec.Replicas, int32(1))
				expect(t, "strategy", o.deploy.Spec.Strategy.Type, appsv1.RecreateDeploymentStrategyType)
				expect(t, "image", c.Image, "registry.example.com/obol/agent:v0.5.0")
				expect(t, "pull policy", c.ImagePullPolicy, corev1.PullAlways)
				expect(t, "--state-file", f["state-file"], "/var/lib/obol/obol.state")
				expect(t, "--state-interval", f["state-interval"], "2s")
				v := volume(ps, mountOf(c, "/var/lib/obol/obol.state").Name)
				if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "shop-obol-state" {
					t.Errorf("the state file's volume is %+v, want the claim shop-obol-state", v.VolumeSource)
				}
				expect(t, "the Secret's key", string(o.secret.Data["gossip.key"]), key)
				if notesSecret.MatchString(r.notes) {
					t.Errorf("NOTES.txt has the user make the Secret the chart made:\n%s", r.notes)
				}
				expect(t, "instance label", o.deploy.Spec.Template.Labels["app.kubernetes.io/instance"], "shop")
			},
		},
		{
			name:    "no state file",
			release: defaultRelease,
			values:  "stateFile: {enabled: false, volume: {persistentVolumeClaim: {claimName: unused}}}\n",
			want: func(t *testing.T, o objects, r rendered) {
				c := sidecar(pod(o))
				for _, a := range c.Args {
					if strings.HasPrefix(a, "--state-") {
						t.Errorf("the agent has %s with stateFile.enabled false", a)
					}
				}
				if volume(pod(o), "obol-state") != nil || mountAt(c, "/var/lib/obol") != nil {
					t.Error("the state file's volume is there with stateFile.enabled false")
				}
			},
		},
		{
			name:    "the state file on an ephemeral volume, three replicas",
			release: defaultRelease,
			values: `
stateFile:
  mountPath: /var/lib/obol/
  volume:
    ephemeral:
      volumeClaimTemplate:
        spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 64Mi}}}
`,
			want: func(t *testing.T, o objects, r rendered) {
				c := sidecar(pod(o))
				expect(t, "--state-file", flagValues(c.Args)["state-file"], "/var/lib/obol/obol.state")
				if v := volume(pod(o), "obol-state"); v == nil || v.Ephemeral == nil {
					t.Errorf("the state file's volume is %+v, want the ephemeral one", v)
				}
			},
		},
		{
			name:    "other names, ports, config and app",
			release: "shop",
			values: `
fullnameOverride: checkout
agent:
  http: "off"
  statusPort: 9090
  drainTimeout: 20s
  extraArgs: ["--state-interval=1s"]
  env: [{name: OBOL_LOG_LEVEL, value: debug}]
terminationGracePeriodSeconds: 45
gossip: {port: 7950, secretName: mesh-key}
config: |
  resources:
    api/search: {kind: gcra, burst: 5, count: 5, period: 1s}
metrics: {annotations: false}
podAnnotations: {team: payments}
podLabels: {tier: backend}
podDisruptionBudget: {minAvailable: 2}
imagePullSecrets: [{name: regcred}]
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: shop, effect: NoSchedule}]
extraVolumes: [{name: cache, emptyDir: {}}]
socketVolume: {medium: "", sizeLimit: 1Gi}
app:
  name: checkout
  image: {repository: registry.example.com/shop/checkout, tag: 1.4.2, pullPolicy: IfNotPresent}
  command: []
  args: [--listen=:8080]
  env: [{name: OBOL_RESOURCE, value: api/search}]
  ports: [{name: http, containerPort: 8080}]
  readinessProbe: {httpGet: {path: /ready, port: http}}
  livenessProbe: {httpGet: {path: /live, port: http}}
  extraVolumeMounts: [{name: cache, mountPath: /cache}]
`,
			want: func(t *testing.T, o objects, r rendered) {
				ps := pod(o)
				c := sidecar(ps)
				f := flagValues(c.Args)
				expect(t, "names", []string{o.deploy.Name, o.svc.Name, o.pdb.Name, o.cm.Name, o.secret.Name},
					[]string{"checkout", "checkout-obol", "checkout", "checkout-obol-config", "mesh-key"})
				expect(t, "--http", f["http"], "off")
				expect(t, "--gossip-bind", f["gossip-bind"], "$(POD_IP):7950")
				expect(t, "--status-http", f["status-http"], ":9090")
				expect(t, "--drain-timeout", f["drain-timeout"], "20s")
				expect(t, "the extra flag", c.Args[len(c.Args)-1], "--state-interval=1s")
				expect(t, "the agent's extra env", c.Env[len(c.Env)-1], corev1.EnvVar{Name: "OBOL_LOG_LEVEL", Value: "debug"})
				port, _ := containerPort(c, c.ReadinessProbe.HTTPGet.Port)
				expect(t, "the probes' port", port.ContainerPort, int32(9090))
				expect(t, "the pods' annotations", o.deploy.Spec.Template.Annotations, map[string]string{"team": "payments"})
				expect(t, "the pods' extra label", o.deploy.Spec.Template.Labels["tier"], "backend")
				expect(t, "the budget", []*intstr.IntOrString{o.pdb.Spec.MinAvailable, o.pdb.Spec.MaxUnavailable}, []*intstr.IntOrString{ptr(intstr.FromInt32(2)), nil})
				var cfg map[string]any
				if err := sigsyaml.Unmarshal([]byte(o.cm.Data["config.yaml"]), &cfg); err != nil || fmt.Sprint(cfg) != "map[resources:map[api/search:map[burst:5 count:5 kind:gcra period:1s]]]" {
					t.Errorf("config.yaml is %v (%v)", cfg, err)
				}
				if slices.ContainsFunc(r.docs, func(d []byte) bool { return strings.Contains(string(d), "kind: Secret") }) {
					t.Error("the chart made a Secret with gossip.secretName given and no key")
				}
				if m := notesSecret.FindStringSubmatch(r.notes); m == nil || m[1] != "mesh-key" {
					t.Errorf("NOTES.txt does not have the user make the Secret mesh-key:\n%s", r.notes)
				}
				app := ps.Containers[0]
				expect(t, "the app's name and image", []string{app.Name, app.Image}, []string{"checkout", "registry.example.com/shop/checkout:1.4.2"})
				expect(t, "the app's command and args", []any{app.Command, app.Args}, []any{[]string(nil), []string{"--listen=:8080"}})
				expect(t, "the app's env", app.Env, []corev1.EnvVar{{Name: "OBOL_SOCKET", Value: "/run/obol/obol.sock"}, {Name: "OBOL_RESOURCE", Value: "api/search"}})
				expect(t, "the app's readiness path", app.ReadinessProbe.HTTPGet.Path, "/ready")
				expect(t, "the app's mounts", len(app.VolumeMounts), 2)
				expect(t, "the pods' volumes", len(ps.Volumes), 4)
				expect(t, "the socket's emptyDir", *volume(ps, "obol-run").EmptyDir, corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("1Gi"))})
				expect(t, "the pull secrets", ps.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}})
				expect(t, "the node selector", ps.NodeSelector, map[string]string{"kubernetes.io/os": "linux"})
				expect(t, "the tolerations", len(ps.Tolerations), 1)
				expect(t, "the grace period", *ps.TerminationGracePeriodSeconds, int64(45))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := renderChart(t, tc.release, "default", tc.values)
			if err != nil {
				t.Fatal(err)
			}
			o, err := collectChart(t, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range check(o) {
				t.Error(e)
			}
			if t.Failed() {
				return // what follows reads what check found missing
			}
			tc.want(t, o, r)
			agentTakesTheFlags(t, bin, o)
		})
	}
}

// jsonString quotes s for a YAML flow scalar.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// expect reports a difference between what the render has and what the
// values should give.
func expect[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

// TestChartStrictDecoding: what the chart passes through from the values
// into the objects is decoded as strictly as the base: a misspelt or
// unknown field fails, naming it.
func TestChartStrictDecoding(t *testing.T) {
	cases := []struct{ name, values, want string }{
		{"misspelt case", "agent: {securityContext: {runAsNonroot: true}}\n", `unknown field "spec.template.spec.initContainers[0].securityContext.runAsNonroot"`},
		{"unknown field", "app: {readinessProbe: {httpGet: {path: /ready, port: 8080}, initialDelay: 5}}\n", `unknown field "spec.template.spec.containers[0].readinessProbe.initialDelay"`},
		{"a field of another kind", "stateFile: {volume: {persistentVolumeClaim: {claimName: x, storage: 1Gi}}}\nreplicas: 1\n", `unknown field "spec.template.spec.volumes[3].persistentVolumeClaim.storage"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildChart(t, defaultRelease, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// TestChartWithoutBudget: podDisruptionBudget.enabled false leaves the
// budget out and changes nothing else.
func TestChartWithoutBudget(t *testing.T) {
	r, err := renderChart(t, defaultRelease, "default", "podDisruptionBudget: {enabled: false}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ConfigMap/example-app-obol-config", "Deployment/example-app", "Service/example-app-obol"}
	if got := slices.Sorted(slices.Values(kinds(t, r.docs))); !slices.Equal(got, want) {
		t.Errorf("renders %v, want %v", got, want)
	}
	for _, d := range r.docs {
		obj, _ := decodeStrict(d)
		if _, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			t.Error("a PodDisruptionBudget with podDisruptionBudget.enabled false")
		}
	}
}

// TestChartAsSubchart: a parent chart's global values (which Helm hands
// to every subchart) pass the schema, which refuses every other unknown
// value.
func TestChartAsSubchart(t *testing.T) {
	if _, err := renderChart(t, defaultRelease, "default", "global: {clusterDomain: cluster.local}\n"); err != nil {
		t.Fatal(err)
	}
}

// TestChartRefuses: values that would make a broken deployment, and
// misspelt or unknown ones, fail the render (as they fail helm install),
// saying which.
func TestChartRefuses(t *testing.T) {
	cases := []struct{ name, values, want string }{
		{"a misspelt value", "replica: 2\n", "replica"},
		{"an unknown value under a known one", "image: {repo: x}\n", "repo"},
		{"a port as a string", "agent: {statusPort: \"7071\"}\n", "statusPort"},
		{"a drain timeout without a unit", "agent: {drainTimeout: 10}\n", "drainTimeout"},
		{"a bad interval", "stateFile: {interval: often}\n", "interval"},
		{"the config as a map", "config: {resources: {}}\n", "config"},
		{"the app called obol", "app: {name: obol}\n", "app.name obol: the agent's container is called obol"},
		{"a name too long for the Service", "fullnameOverride: " + strings.Repeat("a", 59) + "\n", "fullnameOverride"},
		{"a state file on a claim with three replicas", "stateFile: {volume: {persistentVolumeClaim: {claimName: x}}}\n", "every agent would write the same file"},
		{"the state volume over the socket's", "replicas: 1\nstateFile: {mountPath: /run/obol, volume: {emptyDir: {}}}\n", "the agent's own volumes are mounted there"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(t, defaultRelease, "default", tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// TestChartLint runs Helm's linter (helm lint) on the chart: no warning,
// no error.
func TestChartLint(t *testing.T) {
	l := lint.RunAll(chartDir, nil, "default")
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			t.Error(m)
		} else {
			t.Log(m)
		}
	}
}

// TestChartKubeVersion: the chart asks for the Kubernetes that has native
// sidecars, 1.29 or later.
func TestChartKubeVersion(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Validate(); err != nil {
		t.Fatal(err)
	}
	for v, ok := range map[string]bool{"v1.28.9": false, "v1.29.0": true, "v1.29.0-gke.1": true, "v1.37.2": true} {
		if got := chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, v); got != ok {
			t.Errorf("kubeVersion %q takes %s: %v, want %v", ch.Metadata.KubeVersion, v, got, ok)
		}
	}
}

// TestChartNotes: NOTES.txt names what the release made, and its kubectl
// commands fit the objects (the rules of the READMEs' commands).
func TestChartNotes(t *testing.T) {
	for _, tc := range []struct{ name, release, values string }{
		{"defaults", defaultRelease, ""},
		{"another release, the key given", "shop", "gossip: {key: " + jsonString(gossipKey(t)) + "}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := renderChart(t, tc.release, "default", tc.values)
			if err != nil {
				t.Fatal(err)
			}
			o, err := collectChart(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.notes, "deployment/"+o.deploy.Name) {
				t.Errorf("NOTES.txt does not name deployment/%s:\n%s", o.deploy.Name, r.notes)
			}
			n := 0
			for line := range strings.Lines(r.notes) {
				line = strings.TrimSpace(line)
				if !strings.HasPrefix(line, "kubectl ") {
					continue
				}
				n++
				for _, p := range commandProblems(line, o) {
					t.Errorf("NOTES.txt: %s: %s", line, p)
				}
			}
			if n == 0 {
				t.Errorf("NOTES.txt has no kubectl command:\n%s", r.notes)
			}
			t.Logf("%s", r.notes)
		})
	}
}

// valueRow matches a row of the chart README's table of values: the
// value's path, its default, what it does.
var valueRow = regexp.MustCompile("^\\| `([A-Za-z0-9_.]+)` \\| (.*?) \\| (.*) \\|$")

// TestChartValuesDocumented: every value of values.yaml has a comment
// there and a row in the chart's README.md (with its default, for a
// scalar or an empty list or map), the README documents no value that is
// not there, and values.schema.json knows exactly the same values.
func TestChartValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	type entry struct{ key, value *yaml.Node }
	values := map[string]entry{} // every key of values.yaml, by path
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if prefix != "" {
				p = prefix + "." + p
			}
			values[p] = entry{k, v}
			if v.Kind == yaml.MappingNode {
				walk(p, v)
			}
		}
	}
	walk("", doc.Content[0])

	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // path → default cell
	for line := range strings.Lines(string(readme)) {
		if m := valueRow.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("README.md: %s has two rows", m[1])
			}
			rows[m[1]] = m[2]
		}
	}
	if len(rows) < 20 {
		t.Fatalf("found %d rows of values in README.md: the table or the pattern is broken", len(rows))
	}
	documented := func(p string) bool {
		for q := p; ; {
			if _, ok := rows[q]; ok {
				return true
			}
			i := strings.LastIndex(q, ".")
			if i < 0 {
				return false
			}
			q = q[:i]
		}
	}
	for _, p := range slices.Sorted(maps.Keys(values)) {
		if v := values[p].value; v.Kind == yaml.MappingNode && len(v.Content) > 0 && !documented(p) {
			continue // a group of values: each of them needs its row
		}
		if !documented(p) {
			t.Errorf("values.yaml has %s, README.md has no row for it (or for what holds it)", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(rows)) {
		e, ok := values[p]
		if !ok {
			t.Errorf("README.md documents %s, which values.yaml does not have", p)
			continue
		}
		// The row's key and every key above it have a comment.
		for q := p; q != ""; {
			if strings.TrimSpace(values[q].key.HeadComment) == "" {
				t.Errorf("values.yaml: %s has no comment above it", q)
			}
			i := strings.LastIndex(q, ".")
			if i < 0 {
				break
			}
			q = q[:i]
		}
		want := ""
		switch v := e.value; {
		case v.Kind == yaml.ScalarNode && !strings.Contains(v.Value, "\n"):
			want = v.Value
			if v.Value == "" {
				want = `""`
			}
		case v.Kind == yaml.MappingNode && len(v.Content) == 0:
			want = "{}"
		case v.Kind == yaml.SequenceNode && len(v.Content) == 0:
			want = "[]"
		}
		if want != "" && rows[p] != "`"+want+"`" {
			t.Errorf("README.md: the default of %s is %s, values.yaml has `%s`", p, rows[p], want)
		}
	}

	// values.schema.json: the same paths, down to the values that take any
	// map (a Kubernetes structure, passed through).
	sb, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	type schema struct {
		Properties map[string]*schema `json:"properties"`
	}
	var s schema
	if err := json.Unmarshal(sb, &s); err != nil {
		t.Fatal(err)
	}
	inSchema := map[string]bool{}
	var walkSchema func(prefix string, s *schema)
	walkSchema = func(prefix string, s *schema) {
		for k, sub := range s.Properties {
			p := strings.TrimPrefix(prefix+"."+k, ".")
			inSchema[p] = true
			walkSchema(p, sub)
		}
	}
	walkSchema("", &s)
	for p := range inSchema {
		if p == "global" {
			continue // Helm's own, from a parent chart (TestChartAsSubchart)
		}
		if _, ok := values[p]; !ok {
			t.Errorf("values.schema.json has %s, values.yaml does not", p)
		}
	}
	for p := range rows {
		if !inSchema[p] {
			t.Errorf("README.md documents %s, values.schema.json does not have it", p)
		}
	}
}
