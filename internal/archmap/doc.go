// Package archmap holds no code: its test checks docs/architecture.md's
// package map against the module's packages as `go list` reports them
// (every package, every arrow, every arrow pointing down the map), checks
// that api and local link no memberlist, and checks that no Go comment or
// Markdown doc sends readers to a file outside the repository.
//
// Run it with `go test ./internal/archmap`; a failure names each missing or
// extra package and arrow, or each file and line with an outside reference.
package archmap
