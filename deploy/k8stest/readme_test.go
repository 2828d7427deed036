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

// readmes are the documents whose kubectl commands must fit the manifests.
var readmes = []string{
	filepath.Join("..", "sidecar", "README.md"),
	filepath.Join("..", "sidecar", "kubernetes", "README.md"),
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

// TestReadmeCommands: the shell commands of the Kubernetes walk-through
// name what the manifests define: the containers (-c), the workloads
// (deployment/NAME), the labels (-l), the ports forwarded, the socket, the
// Secret and the files of the repository.
func TestReadmeCommands(t *testing.T) {
	o, err := build(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := pod(o)
	c := sidecar(ps)
	f := flagValues(c.Args)
	containers := map[string]bool{}
	for _, ct := range append(append([]corev1.Container{}, ps.InitContainers...), ps.Containers...) {
		containers[ct.Name] = true
	}
	httpPort, err := portOf(f["http"])
	if err != nil {
		t.Fatal(err)
	}
	statusPort, err := portOf(f["status-http"])
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"deployment": o.deploy.Name, "service": o.svc.Name, "secret": o.secret.Name, "configmap": o.cm.Name}
	root := repoRoot(t)
	commands := 0
	for _, file := range readmes {
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
				if strings.Contains(line, "kubectl ") {
					for _, m := range containerArg.FindAllStringSubmatch(line, -1) {
						if !containers[m[1]] {
							t.Errorf("%s: no container %q in the pod", where, m[1])
						}
					}
					for _, m := range workloadArg.FindAllStringSubmatch(line, -1) {
						if want, ok := names[m[1]]; ok && m[2] != want {
							t.Errorf("%s: %s/%s, but the %s is %q", where, m[1], m[2], m[1], want)
						}
					}
					for _, m := range selectorArg.FindAllStringSubmatch(line, -1) {
						sel, err := labels.Parse(m[1])
						if err != nil || !sel.Matches(labels.Set(o.deploy.Spec.Template.Labels)) {
							t.Errorf("%s: -l %s does not select the pods (%v)", where, m[1], err)
						}
					}
					if strings.Contains(line, "port-forward") {
						for _, m := range forwardArg.FindAllStringSubmatch(line, -1) {
							if m[1] != fmt.Sprint(httpPort) && m[1] != fmt.Sprint(statusPort) {
								t.Errorf("%s: port %s is neither the agent's --http port %d nor its --status-http port %d", where, m[1], httpPort, statusPort)
							}
						}
					}
				}
				for _, m := range socketArg.FindAllStringSubmatch(line, -1) {
					if m[1] != f["socket"] {
						t.Errorf("%s: socket %s is not the agent's --socket %s", where, m[1], f["socket"])
					}
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
