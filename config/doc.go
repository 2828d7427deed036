// Package config is obol's configuration: the file schema (YAML, or JSON),
// its validation and its normalization.
//
// A Config maps resource names, NAMESPACE/NAME, to a Resource of one kind —
// tiers (Charon burst tiers), gcra (a token bucket), copies (a counting
// semaphore), adaptive (an adaptive queue window) or pacer (a client pacer
// for a rate-limited API elsewhere) — with optional
// per-domain Overrides that replace the default for one domain whole, and
// per-namespace modes. Parse, ParseResource and Load decode with a
// path-tracking walker: unknown keys, type errors and every Validate rule are
// all reported together as a *Problems, each with the path of the bad value.
// What they return is normalized (docs/semantics.md), so every consumer sees
// one canonical form, and its MarshalJSON renders that form back in the same
// schema. Config values are plain data: not safe for concurrent mutation.
//
// The files: document.go reads a file into a tree of YAML nodes and walks
// its sections; nodes.go is the walker (paths, lines, the readers of
// mappings, lists and scalars); suggest.go finds the "did you mean" of an
// unknown key. A resource's fields are one table, schema.go: an entry per
// field names its key, its kinds, whether overrides hold it, whether it is
// required, its value (values.go: how it is read, tested for being set,
// checked and rendered) and any rule beyond its value's own. The resource
// walker (document.go), the checks (validate.go) and the renderer
// (marshal.go) all go through it, and so do the key lists that messages
// quote. normalize.go fills in defaults; tiers.go reads the compact tier
// syntax; adaptive.go translates the kinds adaptive and pacer into
// package adaptive's configs.
//
// Each parameter of a kind has one owner, this package: it sets every
// default and validates every bound, and the engine (package local), the
// rate limit service (package rls) and package adaptive take the values it
// returns as they are, restating no default and clamping nothing. The
// defaults of the kinds adaptive and pacer are package adaptive's Default…
// constants, since adaptive is also a library used without a config file:
// normalization fills them in by calling adaptive's WithDefaults, the one
// function that does, through Resource.AdaptiveConfig and
// Resource.PacerConfig. Where a bound is the algorithm's own (the least
// min_window, the least multiplier) it is adaptive's constant too; a fuzz
// test holds every bound of this package at least as strict as adaptive's
// Validate, so that what this package accepts adaptive accepts.
//
// Adding a resource field is: its struct field in Resource (and in
// Override, if overrides hold it), with a doc comment that gives its unit,
// what zero or absent means and its trade-off; one entry in
// resourceFields, in the place the struct declares it (a test holds the
// two together); its default, if it has one, in Resource.Normalize (a kind
// adaptive or pacer field: in adaptive.go's translation, its default being
// package adaptive's); and its
// line in the docs of its kind and in default.yaml when a new user should
// see it. A rule that looks at other fields is a check function the entry
// names, beside the others in validate.go.
package config
