package client

import (
	"errors"
	"strconv"
)

// Sentinel errors a caller branches on with errors.Is. An error the agent
// returns is an *APIError whose Is matches the sentinel of its code; an
// error the client finds before asking (a negative copies, say) wraps the
// sentinel with %w and names the bad value.
var (
	// ErrBadRequest: a malformed request, a missing or invalid field
	// (code bad_request).
	ErrBadRequest = errors.New("client: bad request")
	// ErrCostOverBurst: a gcra request for more copies than the bucket's
	// burst (code cost_over_burst).
	ErrCostOverBurst = errors.New("client: cost over burst")
	// ErrUnknownResource: no config for the resource, and its namespace does
	// not allow unconfigured ones (code unknown_resource).
	ErrUnknownResource = errors.New("client: unknown resource")
	// ErrUnknownHold: the hold is unknown, released, or its session ended
	// (code unknown_hold).
	ErrUnknownHold = errors.New("client: unknown hold")
	// ErrUnknownSession: the session is unknown, ended or expired (code
	// unknown_session).
	ErrUnknownSession = errors.New("client: unknown session")
	// ErrUnknownTransfer: the transfer is unknown, seized or expired (code
	// unknown_transfer).
	ErrUnknownTransfer = errors.New("client: unknown transfer")
	// ErrWrongKind: a rate call on a copies resource, or the reverse (code
	// wrong_kind).
	ErrWrongKind = errors.New("client: wrong kind")
	// ErrOverRelease: releasing or transferring more copies than the hold
	// has (code over_release).
	ErrOverRelease = errors.New("client: over release")
	// ErrTooLarge: a body or batch over the agent's limit (code too_large).
	ErrTooLarge = errors.New("client: too large")
	// ErrNotFound: the agent serves no such path, e.g. an agent older than
	// the call (code not_found).
	ErrNotFound = errors.New("client: not found")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client: closed")
	// ErrUnknownTicket: a settle ticket never issued, expired or settled
	// long ago (code unknown_ticket).
	ErrUnknownTicket = errors.New("client: unknown ticket")
	// ErrAlreadySettled: a settle ticket settled before (code
	// already_settled).
	ErrAlreadySettled = errors.New("client: already settled")
	// ErrTooMany: an agent's cap is full (sessions, holds, transfers,
	// settle tickets, kept resets) (code too_many).
	ErrTooMany = errors.New("client: too many")
	// ErrBadLimit: a limit set by the request (WithLimit) the agent
	// refuses: invalid, or its namespace does not allow one (code
	// bad_limit).
	ErrBadLimit = errors.New("client: bad limit")
)

// codeErrors maps the wire contract's error codes to their sentinels.
var codeErrors = map[string]error{
	"bad_request":      ErrBadRequest,
	"cost_over_burst":  ErrCostOverBurst,
	"unknown_resource": ErrUnknownResource,
	"unknown_hold":     ErrUnknownHold,
	"unknown_session":  ErrUnknownSession,
	"unknown_transfer": ErrUnknownTransfer,
	"wrong_kind":       ErrWrongKind,
	"over_release":     ErrOverRelease,
	"too_large":        ErrTooLarge,
	"not_found":        ErrNotFound,
	"unknown_ticket":   ErrUnknownTicket,
	"already_settled":  ErrAlreadySettled,
	"too_many":         ErrTooMany,
	"bad_limit":        ErrBadLimit,
}

// APIError is a client error the agent returned: a 4xx reply
// {"error": {"code", "message"}}. Match it with errors.As, or its code with
// errors.Is and the sentinel of that code (ErrUnknownResource for
// "unknown_resource", …). A 5xx reply is never an APIError: the client fails
// open instead (see Decision.Degraded).
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the error code of the wire contract, e.g. "wrong_kind"; ""
	// when the reply carried none (not the agent's error format).
	Code string
	// Message names the bad value and what was expected.
	Message string
}

// Error returns "client: <code> (<status>): <message>".
func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = "error"
	}
	return "client: " + code + " (" + strconv.Itoa(e.Status) + "): " + e.Message
}

// Is reports whether target is the sentinel of e's code.
func (e *APIError) Is(target error) bool {
	s, ok := codeErrors[e.Code]
	return ok && s == target
}
