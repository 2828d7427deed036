// Package api serves the agent's local HTTP API (the wire contract is
// API.md) over a decision engine (package local), with fasthttp.
//
// A Server holds the engine behind an atomic pointer (a reload swaps it) and
// an injected clock whose reading every handler passes to the engine. One
// route table (routes.go) maps method and path to a handler; there is one
// handler file per feature: rate.go, copies.go, simulate.go, ops.go.
// Bodies are JSON, read strictly by a small reader (jsonread.go): unknown
// fields, wrong types, fractions, out-of-range numbers and oversized names
// are 400 bad_request with a message naming the field. A body may be at most
// 64 KiB (16 MiB on /v1/simulate); over that it is 413 too_large. Replies of
// the hot endpoints are appended by hand into pooled buffers.
//
// Every error is {"error": {"code", "message"}}. Besides API.md's codes, an
// unknown path is 404 with code "not_found", and a known path asked with
// another method is 405 bad_request naming the allowed methods (and an Allow
// header). Durations in replies are whole milliseconds, rounded up; a
// retry_after_ms of -1 means no wait would let the request through.
//
// Listen binds a Unix socket (mode 0660) and a loopback TCP address; Serve
// serves both until its context is done, then stops gracefully.
// POST /v1/batch and MessagePack bodies are not served yet (see routes.go and
// requestBody).
package api
