package wire

import "fmt"

// FieldError is a client error about one field of a request body (or of a
// query): its message reads "field: what is wrong". A body that is not
// well-formed is reported about the field being read ("body" for the body
// itself).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// RangeError is the error for a value of field that is not an integer in
// [lo, hi]; got renders the value.
func RangeError(field string, lo, hi int64, got string) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf("must be an integer in [%d, %d], got %s", lo, hi, got)}
}

// Snippet renders at most 40 bytes of raw input for an error message.
func Snippet(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// Reader reads a request body value by value, strictly: *jsonwire.Lexer
// reads JSON and *mpwire.Reader MessagePack, with the same rules and the
// same errors, each a *FieldError naming the value being read (and, for a
// body that is not well-formed, the byte where it fails). Every body is
// decoded by one function over a Reader, whatever its format. An object's
// members and an array's elements are read in turn, nested ones one level
// at a time.
type Reader interface {
	// Empty reports whether the body is empty, which reads as an empty
	// object.
	Empty() bool
	// Object begins an object (a map) of field; Key then reads its
	// members' names in turn, ok false after the last.
	Object(field string) error
	Key(field string, scratch *[]byte) (key []byte, ok bool, err error)
	// Array begins an array of field and returns its length when the
	// format writes it first (-1 when not); Elem then moves to each element
	// in turn, false after the last.
	Array(field string) (n int, err error)
	Elem(field string) (bool, error)
	// Str reads a string value of field; ascii reports it known to be all
	// ASCII. A string is a sub-slice of the body, or, when it must be
	// unescaped, appended to *scratch: either way it stays valid while the
	// body and *scratch's bytes do.
	Str(field string, scratch *[]byte) (s []byte, ascii bool, err error)
	// Integer reads an integer value of field in [lo, hi]; a number of
	// whole value written otherwise (2.0, 1e3) counts as one.
	Integer(field string, lo, hi int64) (int64, error)
	// Boolean reads a value of field that is true or false.
	Boolean(field string) (bool, error)
	// Mark returns where the reader is; SkipFrom moves back there and steps
	// over the value found, checking it (as a value nested one level in
	// the body): how a batch item refused alone is stepped over.
	Mark() Mark
	SkipFrom(m Mark, field string) error
	// End checks that nothing follows the body's value.
	End() error
}

// Mark is a place in a body, with the nesting a Reader keeps there.
type Mark struct{ at, depth int }

// NewMark returns the Mark of offset at with nesting depth: for the
// Readers.
func NewMark(at, depth int) Mark { return Mark{at, depth} }

// At returns m's offset and nesting depth.
func (m Mark) At() (at, depth int) { return m.at, m.depth }
