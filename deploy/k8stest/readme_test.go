package k8stest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// readmes are the documents whose kubectl commands must fit the manifests:
// the base's walk-through, and the chart's README with the chart's default
// render (installed as example-app).
var readmes = []struct {
	file   string
	source string // a name in sources
}{
	{filepath.Join("..", "sidecar", "README.md"), "base"},
	{filepath.Join("..", "sidecar", "kubernetes", "README.md"), "base"},
	{filepath.Join("..", "sidecar", "helm", "obol", "README.md"), "chart"},
}

var (
	shellBlock   = regexp.MustCompile("(?ms)^\\s*```sh\n(.*?)^\\s*```")
	containerArg = regexp.MustCompile(`\s-c\s+(\S+)`)
	workloadArg  = regexp.MustCompile(`\b(deployment|pod|service|secret|configmap)/([A-Za-z0-9$"{}_.-]+)`)
	selectorArg  = regexp.MustCompile(`\s-l\s+(\S+)`)
	forwardArg   = regexp.MustCompile(`\b\d+:(\d+)\b`)
	socketArg    = regexp.MustCompile(`--unix-socket\s+(\S+)`)
	repoPath     = regexp.MustCompile(`\b(?:deploy|cmd)/[A-Za-z0-9_./-]+`)
)

// commandProblems returns how a shell command line does not fit the
// objects o: a kubectl command's containers (-c), workloads
// (deployment/NAME and the like), label selectors (-l) and forwarded ports,
// and the socket of any command.
func commandProblems(line string, o objects) []string {
	ps := pod(o)
	c := sidecar(ps)
	f := flagValues(c.Args)
	containers := map[string]bool{}
	for _, ct := range append(append([]corev1.Container{}, ps.InitContainers...), ps.Containers...) {
		containers[ct.Name] = true
	}
	httpPort, _ := portOf(f["http"])
	statusPort, _ := portOf(f["status-http"])
	names := map[string]string{"deployment": o.deploy.Name, "service": o.svc.Name, "secret": o.secret.Name, "configmap": o.cm.Name}
	var out []string
	if strings.Contains(line, "kubectl ") {
		for _, m := range containerArg.FindAllStringSubmatch(line, -1) {
			if !containers[m[1]] {
				out = append(out, fmt.Sprintf("no container %q in the pod", m[1]))
			}
		}
		for _, m := range workloadArg.FindAllStringSubmatch(line, -1) {
			if want, ok := names[m[1]]; ok && m[2] != want {
				out = append(out, fmt.Sprintf("%s/%s, but the %s is %q", m[1], m[2], m[1], want))
			}
		}
		for _, m := range selectorArg.FindAllStringSubmatch(line, -1) {
			sel, err := labels.Parse(m[1])
			if err != nil || !sel.Matches(labels.Set(o.deploy.Spec.Template.Labels)) {
				out = append(out, fmt.Sprintf("-l %s does not select the pods (%v)", m[1], err))
			}
		}
		if strings.Contains(line, "port-forward") {
			for _, m := range forwardArg.FindAllStringSubmatch(line, -1) {
				if m[1] != fmt.Sprint(httpPort) && m[1] != fmt.Sprint(statusPort) {
					out = append(out, fmt.Sprintf("port %s is neither the agent's --http port %d nor its --status-http port %d", m[1], httpPort, statusPort))
				}
			}
		}
	}
	for _, m := range socketArg.FindAllStringSubmatch(line, -1) {
		if m[1] != f["socket"] {
			out = append(out, fmt.Sprintf("socket %s is not the agent's --socket %s", m[1], f["socket"]))
		}
	}
	return out
}

// TestReadmeCommands: the shell commands of the Kubernetes walk-through
// and of the chart's README name what the manifests define
// (commandProblems) and files of the repository.
func TestReadmeCommands(t *testing.T) {
	built := map[string]objects{}
	for _, src := range sources {
		o, err := src.build(t)
		if err != nil {
			t.Fatal(err)
		}
		built[src.name] = o
	}
	root := repoRoot(t)
	commands := 0
	for _, readme := range readmes {
		file := readme.file
		o := built[readme.source]
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range shellBlock.FindAllStringSubmatch(string(b), -1) {
			for line := range strings.Lines(block[1]) {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				commands++
				where := fmt.Sprintf("%s: %s", filepath.Base(filepath.Dir(file))+"/"+filepath.Base(file), line)
				for _, p := range commandProblems(line, o) {
					t.Errorf("%s: %s", where, p)
				}
				for _, p := range repoPath.FindAllString(line, -1) {
					p = strings.TrimSuffix(p, "/...") // a Go package pattern names its directory
					if p == "deploy/sidecar/kubernetes/gossip.key" || strings.HasPrefix(p, "deploy/sidecar/build-image") {
						continue // made by the user; the image part's script
					}
					if _, err := os.Stat(filepath.Join(root, p)); err != nil {
						t.Errorf("%s: %s is not in the repository", where, p)
					}
				}
			}
		}
	}
	if commands < 10 {
		t.Errorf("found %d commands in the READMEs: the extraction is broken", commands)
	}
}
