package ui

import (
	"bytes"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		name, ct string
		ok       bool
	}{
		{name: "app.js", ct: "text/javascript; charset=utf-8", ok: true},
		{name: "style.css", ct: "text/css; charset=utf-8", ok: true},
		{name: "index.html", ct: "text/html; charset=utf-8", ok: true},
		{name: "favicon.svg", ct: "image/svg+xml", ok: true},
		{name: "", ct: "", ok: false},
		{name: "nope.js", ct: "", ok: false},
		{name: "../assets.go", ct: "", ok: false},
		{name: "static/app.js", ct: "", ok: false},
		{name: `..\app.js`, ct: "", ok: false},
		{name: ".hidden.js", ct: "", ok: false},
		{name: "assets.go", ct: "", ok: false},
	} {
		body, ct, ok := Lookup(tc.name)
		if ok != tc.ok || ct != tc.ct || ok == (len(body) == 0) {
			t.Errorf("Lookup(%q) = %d bytes, %q, %v; want %q, %v", tc.name, len(body), ct, ok, tc.ct, tc.ok)
		}
	}
	if !bytes.Contains(Index(), []byte(`<script src="/ui/app.js">`)) {
		t.Error("Index does not load app.js")
	}
}

// TestIndexFilesExist: every /ui/ file the page names is embedded.
func TestIndexFilesExist(t *testing.T) {
	page := string(Index())
	n := 0
	for _, part := range strings.Split(page, `"/ui/`)[1:] {
		name := part[:strings.IndexByte(part, '"')]
		if _, _, ok := Lookup(name); !ok {
			t.Errorf("the page names /ui/%s, which is not embedded", name)
		}
		n++
	}
	if n < 8 {
		t.Errorf("the page names %d files, want the stylesheet, the icon and six scripts", n)
	}
}

// FuzzLookup: no name outside the page's own files is served.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"app.js", "../go.mod", "static/app.js", "", "a/b.css", ".js"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		body, _, ok := Lookup(name)
		if ok && (strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") || len(body) == 0) {
			t.Fatalf("Lookup(%q) served %d bytes", name, len(body))
		}
	})
}
