// Package jsonwire is the JSON of the agent's wire: one lexer under the
// agent's strict reader of request bodies and the Go client's lenient
// reader of replies, and the string appenders of both.
//
// The Lexer reads a text in place, without reflection and without
// allocating on the success path: a string without escapes is a sub-slice
// of the text, one with escapes is unescaped onto a caller-owned scratch
// buffer. Its errors are *wire.FieldError naming the value being read, with
// the byte offset of a syntax error. The strict reading is the agent's, a
// wire.Reader (Object, Key, Array, Elem, Str, Integer, End; SkipValue checks
// any value): nothing but a string is a string, and an integer is a whole
// number in a range, 2.0 and 1e3 included. A lenient reader keeps to the
// grammar and the string rules (ReadString, SkipValue) and chooses the rest:
// the client skips unknown fields, takes the last of duplicates and reads
// integers written as integers (PlainInt). The one option is LoneSurrogates:
// a \u escape of half a surrogate pair then reads as U+FFFD, as
// encoding/json reads it, instead of failing.
//
// AppendString is the agent's string rule (invalid UTF-8 becomes U+FFFD),
// AppendStringAsIs the client's (left for the agent to refuse).
package jsonwire
