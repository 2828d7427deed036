// Package wire is the root of the agent's wire layer, which the agent (api),
// the Go client and the load generator share:
//
//   - jsonwire: the JSON lexer under the agent's strict reader of request
//     bodies and the client's lenient reader of replies, and the JSON
//     appenders;
//   - mpwire: the typed MessagePack reader (the agent's bodies; made to
//     serve the gossip packet codec too) and the MessagePack appenders;
//   - replies: the Writer of replies, which appends JSON or MessagePack
//     with the same members in the same order, and the decision reply, the
//     one list of its fields.
//
// This package holds what the readers of both formats return: FieldError,
// the client error about one field of a body, with the helpers that word
// it.
//
// These packages are internal: they are shared by obol's own packages.
package wire
