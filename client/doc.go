// Package client is the Go client of the obol agent: rate decisions
// (Request, Check, Batch, Refund), copy-limited holds (Reserve, Release,
// Transfer, Seize), Charon's pseudo-atomic Multi, HTTP middleware for
// net/http and fasthttp, and client pacing for calls to a rate-limited API
// elsewhere (Pace, Observe, PacedTransport).
//
// The agent runs beside the application; the client asks it over its Unix
// socket (or loopback HTTP) with JSON and small timeouts. It fails open: an
// agent that is gone, hung (past Config.Timeout, 20 ms) or answering 5xx
// gives no error but a Degraded grant of min_copies, counted in Stats and
// logged at most once a minute. Errors are for client errors only (*APIError,
// matched with errors.Is against ErrUnknownResource, ErrWrongKind, …). A kill
// switch (Config.KillSwitch, OBOL_KILL_SWITCH=1) turns rejections into grants
// marked Killed. MaxWait retries a rejection with jittered exponential
// backoff, never before the agent's retry_after. Holds belong to one session
// per client, opened on first use and kept alive in the background; Close
// ends it, which releases every copy. A Client is safe for concurrent use.
package client
