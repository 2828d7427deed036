package k8stest

// The kustomize base in deploy/sidecar/kubernetes: built as kubectl
// apply -k builds it and checked by the rules of checks_test.go.

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizeDir is the kustomize base users apply.
var kustomizeDir = filepath.Join("..", "sidecar", "kubernetes")

// gossipKey returns a fresh key, as the README has users make it.
func gossipKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b) + "\n"
}

// kustomize builds the base in dir with kustomize's library (what kubectl
// apply -k runs), on an in-memory copy in which replace's files (name →
// content) are written over the originals, and returns each object as YAML.
func kustomize(t *testing.T, dir string, replace map[string]string) ([][]byte, error) {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile("/base/"+e.Name(), b); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range replace {
		if err := fsys.WriteFile("/base/"+name, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, "/base")
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	var docs [][]byte
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		docs = append(docs, y)
	}
	return docs, nil
}

// build kustomizes the base (with a generated gossip key) and decodes it.
func build(t *testing.T, replace map[string]string) (objects, error) {
	t.Helper()
	files := map[string]string{"gossip.key": gossipKey(t)}
	for k, v := range replace {
		files[k] = v
	}
	docs, err := kustomize(t, kustomizeDir, files)
	if err != nil {
		return objects{}, err
	}
	return collect(docs)
}

// TestManifests builds the base as kubectl apply -k does, decodes every
// object strictly into the API types and checks the sidecar's invariants.
func TestManifests(t *testing.T) {
	o, err := build(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range check(o) {
		t.Error(e)
	}
	if img := sidecar(&o.deploy.Spec.Template.Spec).Image; img != "localhost/obol:dev" {
		t.Errorf("the agent's image after kustomize is %q, want localhost/obol:dev (the images: entry)", img)
	}
}

// TestManifestFiles decodes every document of every manifest file on its
// own, strictly, and checks that the kustomization lists each one.
func TestManifestFiles(t *testing.T) {
	entries, err := os.ReadDir(kustomizeDir)
	if err != nil {
		t.Fatal(err)
	}
	kust, err := os.ReadFile(filepath.Join(kustomizeDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".yaml") || name == "kustomization.yaml" || name == "config.yaml" {
			continue
		}
		if !regexp.MustCompile(`(?m)^\s*-\s*` + regexp.QuoteMeta(name) + `\s*$`).Match(kust) {
			t.Errorf("%s is not listed in kustomization.yaml", name)
		}
		b, err := os.ReadFile(filepath.Join(kustomizeDir, name))
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitYAML(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, doc := range docs {
			if _, err := decodeStrict(doc); err != nil {
				t.Errorf("%s, document %d: %v", name, i+1, err)
			}
			n++
		}
	}
	if n < 3 {
		t.Errorf("decoded %d documents, want the Deployment, the Service and the PodDisruptionBudget at least", n)
	}
}

// TestStrictDecoding: a misspelt or unknown field, or an unknown key in the
// kustomization, fails the build or the decoding, naming it.
func TestStrictDecoding(t *testing.T) {
	deploy, err := os.ReadFile(filepath.Join(kustomizeDir, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kust, err := os.ReadFile(filepath.Join(kustomizeDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, from, to, want string
	}{
		// encoding/json would take this one: field names match without case.
		{"misspelt case", "deployment.yaml", "          restartPolicy: Always\n", "          restartpolicy: Always\n", `unknown field "spec.template.spec.initContainers[0].restartpolicy"`},
		{"unknown field", "deployment.yaml", "          readinessProbe:\n", "          readinessProbe:\n            initialDelay: 5\n", `unknown field "spec.template.spec.initContainers[0].readinessProbe.initialDelay"`},
		{"duplicate field", "deployment.yaml", "      enableServiceLinks: false\n", "      enableServiceLinks: false\n      enableServiceLinks: true\n", "enableServiceLinks"},
		{"unknown kustomization key", "kustomization.yaml", "resources:", "resourcez:", "resourcez"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := string(deploy)
			if tc.file == "kustomization.yaml" {
				src = string(kust)
			}
			if !strings.Contains(src, tc.from) {
				t.Fatalf("%s does not contain %q", tc.file, tc.from)
			}
			_, err := build(t, map[string]string{tc.file: strings.Replace(src, tc.from, tc.to, 1)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}
