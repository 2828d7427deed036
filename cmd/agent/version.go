package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version is the release this binary was stamped with at link time
// (go build -ldflags "-X main.version=v0.5.0", as deploy/sidecar/build-image
// does); empty in a plain go build, where --version shows the module's
// version from the build information instead.
var version string

// versionText renders what --version prints: the version (stamped when not
// empty, else the main module's), the module path, VCS revision, commit
// time and whether the tree had uncommitted changes, and the Go version it
// was built with, from bi (ok false: the binary carries no build
// information). A field the build did not record is "unknown".
func versionText(stamped string, bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		if stamped != "" {
			return "obol agent " + stamped + "\n"
		}
		return "obol agent: no build information in this binary\n"
	}
	v := bi.Main.Version
	if stamped != "" {
		v = stamped
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
	fmt.Fprintf(&b, "obol agent %s\n", orUnknown(v))
	fmt.Fprintf(&b, "module:   %s\n", orUnknown(bi.Main.Path))
	fmt.Fprintf(&b, "revision: %s\n", setting("vcs.revision"))
	fmt.Fprintf(&b, "time:     %s\n", setting("vcs.time"))
	fmt.Fprintf(&b, "modified: %s\n", setting("vcs.modified"))
	fmt.Fprintf(&b, "go:       %s\n", orUnknown(bi.GoVersion))
	return b.String()
}

// buildOf returns the version and the VCS revision GET /v1/status shows:
// the stamped version, else the main module's, and the revision the build
// recorded; "" for what bi (ok false: none) does not say.
func buildOf(stamped string, bi *debug.BuildInfo, ok bool) (version, revision string) {
	version = stamped
	if !ok || bi == nil {
		return version, ""
	}
	if version == "" {
		version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	return version, revision
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
