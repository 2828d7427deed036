// Package local is obol's decision engine: it answers, from memory, whether a
// use of a resource on behalf of a domain may go ahead.
//
// engine.go is the registry and the dispatch: it maps each resource to the
// state of its kind behind one small interface (kind.go). Each kind has one
// pure file of rules, with no clock, no lock and no I/O: tiers.go (Charon's
// burst tiers, with the merge of peers' hits and entries; tierswait.go and
// window.go beside it), gcra.go and gcraidle.go (Boulder's GCRA), copies.go
// (counting semaphores), adaptive.go and pacer.go (package adaptive's queue
// window and client pacer, one per resource and agent); and one _res.go
// file that keeps its storage, locks and recording. book.go holds the
// sessions, holds and transfers of the copy-limited kind. Every decision
// takes its instant as an argument, like x/time/rate's AllowN; the package
// reads no clock, does no I/O and logs nothing. The server passes the
// current time, tests and /v1/simulate pass virtual time.
//
// Keys (resource, domain) live in a sharded store: 256 shards, each a map
// behind its own mutex. A key whose state has fully reset is dropped by
// Step, so memory follows the number of active keys; a resource tracks at
// most max_keys keys: a new key past that takes the place of a fully reset
// one, or else is decided on one of the resource's overflow states, shared
// by hash (still limited, maybe over-counted, never under-counted), and
// counted in Stats. The tiers algorithm keeps times in whole milliseconds
// (the API's unit); gcra keeps nanoseconds, as Boulder does.
//
// The engine knows no network. Attach joins it to a Cluster (package
// reconcile's implements it): the engine registers each resource with it,
// once, with what the cluster needs to know of the resource (ClusterSpec)
// and the applier of its peers' records, and gets back the resource's
// Recorder, on which it records what it commits; the cluster applies its
// peers' counts, tier entries and holds through the engine's Applier
// methods (cluster.go).
package local
