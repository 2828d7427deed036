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
// What they return is normalized (SEMANTICS.md), so every consumer sees one
// canonical form, and its MarshalJSON renders that form back in the same
// schema. Config values are plain data: not safe for concurrent mutation.
package config
