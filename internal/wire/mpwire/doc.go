// Package mpwire is the MessagePack of the agent's wire: one typed reader
// of MessagePack values over a byte slice, and the appenders of replies.
//
// Reader has two layers. The typed layer (Peek, MapLen, ArrayLen, StrLen,
// BytesLen, Take, ReadStr, Int, Uint, Float, Bool, Nil, ExtHeader) reads
// one value of the type asked for, checking its code first (nil is not 0,
// an extension is not a map, a uint64 above MaxInt64 is not an int64), and
// returns a sentinel error (ErrType, ErrRange or ErrTruncated) so that
// each caller words its own messages; it never allocates, and a string is
// a sub-slice of the input. The strict layer on top is the agent's reader
// of request bodies, a wire.Reader (Object, Key, Array, Elem, Str, Integer,
// SkipFrom, End; with Skip and AppendJSON): a map with the JSON field
// names, read with the JSON reader's rules (a float of whole value counts
// as an integer, binary data is not a string) and errors, each a
// *wire.FieldError naming the value being read.
//
// The Append functions write MessagePack values in their shortest form, as
// github.com/vmihailenco/msgpack/v5's Encoder does, for the replies of the
// request path, where the library measured slower (append.go says by how
// much and how to measure it); AppendFromJSON transcodes a JSON value with
// the library itself, which measured as fast there.
package mpwire
