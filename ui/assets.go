package ui

import (
	"embed"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

// types are the content types of the files the page is made of.
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// Index returns the page served at GET /.
func Index() []byte {
	b, err := files.ReadFile("static/index.html")
	if err != nil {
		panic("ui: index.html is not embedded: " + err.Error()) // a build without the file is a bug
	}
	return b
}

// Lookup returns the file name (a bare file name, such as "app.js", as
// served under /ui/) and its content type; ok is false for a name that is
// not one of the page's files (a path with a slash or "..", a directory,
// an unknown extension).
func Lookup(name string) (body []byte, contentType string, ok bool) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return nil, "", false
	}
	ct, known := types[path.Ext(name)]
	if !known {
		return nil, "", false
	}
	b, err := files.ReadFile("static/" + name)
	if err != nil {
		return nil, "", false
	}
	return b, ct, true
}
