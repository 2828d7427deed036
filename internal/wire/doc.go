// Package wire is the root of the agent's wire layer, which the agent (api)
// and the Go client share:
//
//   - jsonwire: the JSON lexer under the agent's strict reader of request
//     bodies and the client's lenient reader of replies, and the JSON
//     appenders;
//   - mpwire: the typed MessagePack reader (the agent's bodies; made to
//     serve the gossip packet codec too) and the MessagePack appenders;
//   - replies: the Writer of replies, which appends JSON or MessagePack
//     with the same members in the same order; each reply's one list of
//     fields, with its writer and the client's reader of it.
//
// This package holds what the strict readers of both formats share: the
// Reader interface they implement, over which each request body has one
// decode function, and FieldError, the client error about one field of a
// body they return, with the helpers that word it.
//
// These packages are internal: they are shared by obol's own packages.
package wire
