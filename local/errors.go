package local

import "errors"

// Sentinel errors a caller branches on. Errors returned by the engine wrap one
// of these with %w and name the bad value and the expected form.
var (
	ErrUnknownResource = errors.New("local: unknown resource")
	ErrWrongKind       = errors.New("local: wrong kind")
	ErrBadRequest      = errors.New("local: bad request")
	ErrCostOverBurst   = errors.New("local: cost over burst")
	ErrUnknownHold     = errors.New("local: unknown hold")
	ErrUnknownSession  = errors.New("local: unknown session")
	ErrUnknownTransfer = errors.New("local: unknown transfer")
	ErrOverRelease     = errors.New("local: over release")
	// ErrTooMany is a full cap on the objects an agent keeps for its
	// clients (Caps): sessions, holds, transfers.
	ErrTooMany = errors.New("local: too many")
	// ErrBadLimit is a limit set by a request that is not valid, or that
	// its namespace does not allow (requested.go).
	ErrBadLimit = errors.New("local: bad limit")
)
