// Package replies writes the agent's replies, JSON or MessagePack, with one
// write function per reply: the same members in the same order in both
// formats, integers as integers, booleans as booleans.
//
// A Writer is a format and nothing else, a small value: each method appends
// one part of a reply (an object's header, a key, a value) to the buffer it
// is given and returns it, switching on the format. The switch is a
// predictable branch inside methods small enough to be inlined, so that a
// key, a constant in its JSON form (Key), is copied as a constant. (A Writer
// interface with a JSON and a MessagePack implementation, called per value,
// measured about twice as slow on the decision reply, and a generic writer
// no faster: Go calls the methods of a type parameter through a
// dictionary.)
//
// Decision is a rate decision as its reply carries it, AppendDecision its
// one writer (the order of its fields and when each is present) and
// Decision.Field the lookup its reader uses. The replies of the copies
// endpoints (Reservation, Seized, a release, a transfer, a session), the
// error object and the replies of one integer member (AppendInt: a refund's
// remaining, an ended session's released) have their writer beside their
// reader in holds.go, over one list of member names. The few members the
// agent writes itself (a pacing reply's wait_ms and remaining, a batch's
// responses) take their keys from here (KeyWaitMs, KeyRemaining,
// KeyResponses).
//
// The Read functions (read.go) are the Go client's readers of the JSON
// replies, lenient where the contract lets the agent grow (unknown members
// are skipped), strict on the shape; what one cannot read is ErrMalformed.
// So the agent's writer and the client's reader of a reply name its members
// in one place, and the round-trip tests hold them to each other.
package replies
