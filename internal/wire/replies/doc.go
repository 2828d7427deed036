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
// DecisionField the lookup a reader of replies uses: the agent writes it,
// the Go client reads it.
package replies
