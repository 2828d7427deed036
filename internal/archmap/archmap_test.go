package archmap

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is the module's path; the map names packages relative to it.
const module = "github.com/obol-dev/obol"

// listed is one package as `go list -json` reports it.
type listed struct {
	ImportPath string
	Dir        string
	Imports    []string
	Deps       []string
}

// goList runs `go list -json ./...` at the module's root and returns its
// packages by path relative to the module, and the root.
func goList(t *testing.T) (map[string]listed, string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./...: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string]listed{}
	d := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := d.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		pkgs[rel(p.ImportPath)] = p
	}
	return pkgs, root
}

// rel is path relative to the module; "" for a package outside it.
func rel(path string) string {
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return ""
}

// arrowRE splits a map line: a package, then optionally an arrow and the
// packages it imports, comma-separated.
var arrowRE = regexp.MustCompile(`^(\S+)\s*(?:(?:→|->)\s*(.*))?$`)

// docMap parses the package map of docs/architecture.md: the first ```text block
// after the heading "## The package map". It returns the packages in the
// order of the map and each one's arrows; problems are the lines it could
// not read.
func docMap(doc string) (order []string, arrows map[string][]string, problems []string) {
	arrows = map[string][]string{}
	_, after, ok := strings.Cut(doc, "\n## The package map\n")
	if !ok {
		return nil, nil, []string{`no heading "## The package map"`}
	}
	_, block, ok := strings.Cut(after, "```text\n")
	if !ok {
		return nil, nil, []string{"no ```text block after the heading"}
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		return nil, nil, []string{"the ```text block does not end"}
	}
	for i, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := arrowRE.FindStringSubmatch(line)
		if m == nil {
			problems = append(problems, fmt.Sprintf("map line %d: %q is not `package` or `package → package, ...`", i+1, line))
			continue
		}
		pkg := m[1]
		if _, dup := arrows[pkg]; dup {
			problems = append(problems, fmt.Sprintf("map line %d: %s is drawn twice", i+1, pkg))
			continue
		}
		order = append(order, pkg)
		arrows[pkg] = []string{}
		if m[2] != "" {
			for _, to := range strings.Split(m[2], ",") {
				arrows[pkg] = append(arrows[pkg], strings.TrimSpace(to))
			}
		}
	}
	return order, arrows, problems
}

// TestPackageMap compares the package map of docs/architecture.md with the
// module's packages and their imports.
func TestPackageMap(t *testing.T) {
	pkgs, root := goList(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	order, drawn, problems := docMap(string(doc))
	for _, p := range problems {
		t.Errorf("docs/architecture.md: %s", p)
	}
	if len(order) == 0 {
		t.Fatal("docs/architecture.md: the package map lists no package")
	}
	pos := map[string]int{}
	for i, p := range order {
		pos[p] = i
	}
	var missing, extra []string
	for p := range pkgs {
		if _, ok := drawn[p]; !ok {
			missing = append(missing, p)
		}
	}
	for _, p := range order {
		if _, ok := pkgs[p]; !ok {
			extra = append(extra, p)
		}
	}
	slices.Sort(missing)
	for _, p := range missing {
		t.Errorf("docs/architecture.md: package %s is missing from the map", p)
	}
	for _, p := range extra {
		t.Errorf("docs/architecture.md: the map draws package %s, which go list does not know", p)
	}
	for _, p := range order {
		l, ok := pkgs[p]
		if !ok {
			continue
		}
		var real []string
		for _, imp := range l.Imports {
			if r := rel(imp); r != "" {
				real = append(real, r)
			}
		}
		for _, to := range real {
			if !slices.Contains(drawn[p], to) {
				t.Errorf("docs/architecture.md: the arrow %s → %s is missing (%s imports %s)", p, to, p, to)
			}
		}
		for _, to := range drawn[p] {
			switch {
			case !slices.Contains(real, to):
				t.Errorf("docs/architecture.md: the map draws %s → %s, but %s does not import %s", p, to, p, to)
			case drawn[to] != nil && pos[to] <= pos[p]:
				t.Errorf("docs/architecture.md: the arrow %s → %s runs up the map (%s is drawn above %s)", p, to, to, p)
			}
		}
	}
}

// TestNoMemberlistBelowTheAgent: api and local link no memberlist, and local
// no net, as the map's page says.
func TestNoMemberlistBelowTheAgent(t *testing.T) {
	pkgs, _ := goList(t)
	for _, c := range []struct{ pkg, dep string }{
		{"api", "github.com/hashicorp/memberlist"},
		{"local", "github.com/hashicorp/memberlist"},
		{"local", "net"},
	} {
		l, ok := pkgs[c.pkg]
		if !ok {
			t.Errorf("go list does not know %s", c.pkg)
			continue
		}
		if slices.Contains(l.Deps, c.dep) {
			t.Errorf("%s links %s (go list -deps ./%s)", c.pkg, c.dep, c.pkg)
		}
	}
}

// contractRE matches the names of documents kept outside the repository
// that comments used to send readers to.
var contractRE = regexp.MustCompile(`\b(API|SEMANTICS|DESIGN)\.md\b`)

// mdRefRE matches a reference to a Markdown file: a path ending in .md,
// optionally followed by an anchor.
var mdRefRE = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)

// outsideRefs returns the lines of text (a file at path, relative to the
// module's root) that send readers outside the repository: a contract
// document's name, or a path to a Markdown file that exists neither
// relative to the file, nor to the root, nor in docs/ (a page named bare).
// exists reports whether a path relative to the root is in the repository.
func outsideRefs(path string, text []byte, exists func(string) bool) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := contractRE.FindString(line); m != "" {
			out = append(out, fmt.Sprintf("%s:%d: names %s, a document outside the repository; restate it or point at docs/", path, n, m))
			continue
		}
		for _, loc := range mdRefRE.FindAllStringIndex(line, -1) {
			ref := line[loc[0]:loc[1]]
			if word := lastWord(line[:loc[0]]) + ref; strings.Contains(word, "://") {
				continue // a URL: a page on the web, not a file
			}
			if strings.HasPrefix(ref, "/") {
				out = append(out, fmt.Sprintf("%s:%d: %s is an absolute path, outside the repository", path, n, ref))
				continue
			}
			if !exists(filepath.Join(filepath.Dir(path), ref)) && !exists(ref) && !exists(filepath.Join("docs", ref)) {
				out = append(out, fmt.Sprintf("%s:%d: %s is not a file of the repository", path, n, ref))
			}
		}
	}
	return out
}

// lastWord is the text after s's last space, bracket or parenthesis.
func lastWord(s string) string {
	return s[strings.LastIndexAny(s, " \t([<\"'`")+1:]
}

// TestNoReferenceOutsideTheRepository: no Go file and no Markdown doc of
// the module sends readers to a file outside it.
func TestNoReferenceOutsideTheRepository(t *testing.T) {
	_, root := goList(t)
	exists := func(p string) bool {
		p = filepath.Clean(p)
		if p == ".." || strings.HasPrefix(p, "../") {
			return false
		}
		_, err := os.Stat(filepath.Join(root, p))
		return err == nil
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".md") {
			return nil
		}
		text, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		if filepath.ToSlash(r) == "internal/archmap/archmap_test.go" {
			return nil // this file: its table names outside files on purpose (TestOutsideRefs)
		}
		for _, msg := range outsideRefs(filepath.ToSlash(r), text, exists) {
			t.Error(msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// contract is the file name of a contract document kept outside the
// repository.
func contract(name string) string { return name + ".md" }

// The checks themselves: what outsideRefs flags and what it lets pass.
func TestOutsideRefs(t *testing.T) {
	exists := func(p string) bool {
		return slices.Contains([]string{"docs/api.md", "README.md", "bench/scale/README.md"}, filepath.ToSlash(filepath.Clean(p)))
	}
	for _, tc := range []struct {
		path, line string
		flagged    bool
	}{
		// The contract's file names are put together here, so that this
		// file cites none of them itself.
		{"api/x.go", "// see " + contract("API") + " for the codes", true},
		{"api/x.go", "// the rules of " + contract("SEMANTICS") + " §3", true},
		{"README.md", "as " + contract("DESIGN") + " says", true},
		{"api/x.go", "// see /srv/contract/api.md", true},
		{"api/x.go", "// see ../../elsewhere/notes.md", true},
		{"api/x.go", "// see missing.md", true},
		{"api/x.go", "// see docs/api.md", false},
		{"docs/x.md", "[the API](api.md#routes)", false},
		{"api/x.go", "// the API (api.md)", false},
		{"bench/scale/main.go", "// see README.md", false},
		{"api/x.go", "// https://github.com/hashicorp/memberlist/blob/master/README.md", false},
		{"api/x.go", "// no reference here", false},
	} {
		got := outsideRefs(tc.path, []byte(tc.line+"\n"), exists)
		if (len(got) > 0) != tc.flagged {
			t.Errorf("%s %q: %q, flagged %v", tc.path, tc.line, got, tc.flagged)
		}
	}
}

// docMap reads the map's lines and names the ones it cannot read.
func TestDocMap(t *testing.T) {
	doc := "# x\n\n## The package map\n\ntext\n\n```text\ncmd/agent → api, local\napi -> local\nlocal\n\napi\nbad line here\n```\n"
	order, arrows, problems := docMap(doc)
	if !slices.Equal(order, []string{"cmd/agent", "api", "local"}) || !slices.Equal(arrows["cmd/agent"], []string{"api", "local"}) ||
		!slices.Equal(arrows["api"], []string{"local"}) || len(arrows["local"]) != 0 {
		t.Errorf("order %v, arrows %v", order, arrows)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "api is drawn twice") || !strings.Contains(problems[1], `"bad line here"`) {
		t.Errorf("problems %q", problems)
	}
	if _, _, problems := docMap("# no map\n"); len(problems) != 1 {
		t.Errorf("no map: %q", problems)
	}
}
