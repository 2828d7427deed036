package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// versionText renders what --version prints: the main module's version,
// path, VCS revision, commit time and whether the tree had uncommitted
// changes, and the Go version it was built with, from bi (ok false: the
// binary carries no build information). A field the build did not record
// is "unknown".
func versionText(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "obol agent: no build information in this binary\n"
	}
	setting := func(key string) string {
		for _, s := range bi.Settings {
			if s.Key == key && s.Value != "" {
				return s.Value
			}
		}
		return "unknown"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "obol agent %s\n", orUnknown(bi.Main.Version))
	fmt.Fprintf(&b, "module:   %s\n", orUnknown(bi.Main.Path))
	fmt.Fprintf(&b, "revision: %s\n", setting("vcs.revision"))
	fmt.Fprintf(&b, "time:     %s\n", setting("vcs.time"))
	fmt.Fprintf(&b, "modified: %s\n", setting("vcs.modified"))
	fmt.Fprintf(&b, "go:       %s\n", orUnknown(bi.GoVersion))
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
