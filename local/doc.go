// Package local is obol's decision engine: it answers, from memory, whether a
// use of a resource on behalf of a domain may go ahead.
//
// One pure file per algorithm: tiers.go (Charon's burst tiers), gcra.go
// (Boulder's GCRA) and copies.go (counting semaphores with sessions);
// adaptive.go and pacer.go put package adaptive's queue window and client
// pacer behind the engine's registry, one per resource and agent. Every
// decision takes its instant as an argument, like x/time/rate's AllowN; the
// package reads no clock, does no I/O and logs nothing. The server passes the
// current time, tests and /v1/simulate pass virtual time.
//
// Keys (resource, domain) live in a sharded store: 256 shards, each a map
// behind its own mutex. A key whose state has fully reset is dropped by Step,
// so memory follows the number of active keys; a resource tracks at most
// max_keys keys, and a new key past that is granted leniently and counted in
// Stats. The tiers algorithm keeps times in whole milliseconds (the API's
// unit); gcra keeps nanoseconds, as Boulder does.
package local
