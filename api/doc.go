// Package api serves the agent's local HTTP API (the wire contract is
// docs/api.md) over a decision engine (package local), with fasthttp.
//
// A Server holds the engine behind an atomic pointer (a reload swaps it) and
// an injected clock whose reading every handler passes to the engine. One
// route table (routes.go) maps method and path to a handler; there is one
// handler file per feature: rate.go, check.go (with ratelimit.go, its
// RateLimit fields), batch.go, copies.go, adaptive.go, pacer.go,
// simulate.go, ops.go, agentstatus.go (GET /v1/status).
//
// Bodies are JSON, or MessagePack when the Content-Type is
// application/msgpack (application/x-msgpack too): a map with the JSON
// field names. Each body has one decode function over a wire.Reader, which
// the JSON lexer (internal/wire/jsonwire) and the MessagePack reader
// (internal/wire/mpwire) implement alike, and every field is checked by one
// table (fields.go, bodyread.go): unknown or duplicate fields, wrong types,
// fractions, out-of-range numbers, invalid UTF-8 and oversized names are
// 400 bad_request with a message naming the field. In MessagePack a float
// of whole value counts as an integer, as 2.0 does in JSON, and binary data
// is not a string. An empty body reads as an empty object. A body may be at
// most 64 KiB (16 MiB on /v1/simulate); over that it is 413 too_large, in
// either encoding.
//
// A reply is MessagePack when the Accept header lists application/msgpack
// (with a q not below application/json's), else JSON, whatever the body
// was: the same fields in the same order, integers as MessagePack integers,
// booleans as booleans. Each reply has one write function over a
// replies.Writer (internal/wire/replies), which appends either format into
// the call's pooled buffer; a handler ends with c.reply(ctx, writeX(...))
// (replies.go). The replies the Go client reads (the decision, a batch's
// and each copies endpoint's, the error object, a refund's, a pacing's
// wait) are written by package replies (AppendDecision, AppendReservation,
// AppendError, ...), beside the client's reader of each; the handlers
// here only convert the engine's values. The operations endpoints render JSON, which
// the router transcodes when MessagePack is asked for.
//
// POST /v1/batch takes {"requests": [...]}, at most 1000 requests with the
// fields of /v1/request, and answers {"responses": [...]} in order, each
// request decided alone as if sent alone, each response a decision or an
// {"error"} of its own. Only a malformed envelope fails the whole batch
// (400), and the body is read whole before the first decision, so such a
// batch spends nothing. More than 1000 requests, or a body over 64 KiB, is
// 413 too_large: a client splits its batch. A batch allocates nothing per
// item (pooled items, arena and reply buffer; one reused Decision).
//
// Every error is {"error": {"code", "message"}}. Besides docs/api.md's codes, an
// unknown path is 404 with code "not_found", and a known path asked with
// another method is 405 bad_request naming the allowed methods (and an Allow
// header). Durations in replies are whole milliseconds, rounded up; a
// retry_after_ms of -1 means no wait would let the request through.
//
// Listen binds a Unix socket (mode 0660) and a loopback TCP address; Serve
// serves both until its context is done, then stops gracefully.
package api
