package api

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// reader is a strict JSON reader over one request body. It reads objects of
// known fields without reflection and without allocating on the success path:
// a string without escapes is returned as a sub-slice of the body, one with
// escapes is unescaped into a caller-owned scratch buffer. Every error it
// returns is a *fieldError naming the value being read.
type reader struct {
	b []byte
	i int
	// ascii is true when the last string readString returned was all
	// ASCII, without escapes: its UTF-8 needs no check.
	ascii bool
}

// maxDepth bounds the nesting skipValue accepts (a raw resource config is a
// few levels deep); deeper input is refused rather than recursed into.
const maxDepth = 32

func (r *reader) ws() {
	if r.i < len(r.b) && r.b[r.i] > ' ' {
		return // the common case, compact JSON
	}
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// syntax is the error for malformed JSON met while reading field.
func (r *reader) syntax(field, what string) error {
	return &fieldError{field: field, msg: fmt.Sprintf("invalid JSON at byte %d: %s", r.i, what)}
}

// eof reports whether the body ended; it assumes ws was called.
func (r *reader) eof() bool { return r.i >= len(r.b) }

// openObject consumes the '{' of an object.
func (r *reader) openObject(field string) error {
	r.ws()
	if r.eof() {
		return r.syntax(field, "unexpected end of body, expected an object")
	}
	if r.b[r.i] != '{' {
		return &fieldError{field: field, msg: "must be a JSON object, got " + r.describe()}
	}
	r.i++
	return nil
}

// nextKey reads the next key of an object whose '{' was consumed, and the ':'
// after it. It returns ok false at the closing '}' (consumed). n is the number
// of keys read so far; scratch receives the key when it has escapes.
func (r *reader) nextKey(field string, n int, scratch *[]byte) (key []byte, ok bool, err error) {
	r.ws()
	if r.eof() {
		return nil, false, r.syntax(field, "unexpected end of body inside an object")
	}
	c := r.b[r.i]
	if c == '}' {
		r.i++
		return nil, false, nil
	}
	if n > 0 {
		if c != ',' {
			return nil, false, r.syntax(field, "expected ',' or '}' after a field")
		}
		r.i++
		r.ws()
		if r.eof() || r.b[r.i] != '"' {
			return nil, false, r.syntax(field, "expected a field name after ','")
		}
	} else if c != '"' {
		return nil, false, r.syntax(field, "expected a field name or '}'")
	}
	key, err = r.readString(field, scratch)
	if err != nil {
		return nil, false, err
	}
	r.ws()
	if r.eof() || r.b[r.i] != ':' {
		return nil, false, r.syntax(field, "expected ':' after a field name")
	}
	r.i++
	return key, true, nil
}

// end checks that nothing but whitespace follows the top-level value.
func (r *reader) end() error {
	r.ws()
	if !r.eof() {
		return r.syntax("body", "unexpected data after the JSON object")
	}
	return nil
}

// str reads a string value of field.
func (r *reader) str(field string, scratch *[]byte) ([]byte, error) {
	r.ws()
	if r.eof() {
		return nil, r.syntax(field, "unexpected end of body, expected a value")
	}
	if r.b[r.i] != '"' {
		if !r.valueStart() {
			return nil, r.syntax(field, "expected a value")
		}
		return nil, &fieldError{field: field, msg: "must be a string, got " + r.describe()}
	}
	return r.readString(field, scratch)
}

// integer reads an integer value of field in [lo, hi]. A number with an
// exponent or a decimal point is accepted when its value is a whole number
// (1e3, 2.0); one with a fraction, out of range, or not a number is refused.
func (r *reader) integer(field string, lo, hi int64) (int64, error) {
	r.ws()
	if r.eof() {
		return 0, r.syntax(field, "unexpected end of body, expected a value")
	}
	c := r.b[r.i]
	if c != '-' && (c < '0' || c > '9') {
		if !r.valueStart() {
			return 0, r.syntax(field, "expected a value")
		}
		return 0, rangeError(field, lo, hi, r.describe())
	}
	if v, end, ok := smallInt(r.b, r.i); ok {
		if v >= lo && v <= hi {
			r.i = end
			return v, nil
		}
	}
	start := r.i
	end, ok := scanNumber(r.b, r.i)
	if !ok {
		r.i = end
		return 0, r.syntax(field, "malformed number")
	}
	r.i = end
	v, ok := exactInt(r.b[start:end])
	if !ok || v < lo || v > hi {
		return 0, rangeError(field, lo, hi, quoteSnippet(r.b[start:end]))
	}
	return v, nil
}

func rangeError(field string, lo, hi int64, got string) error {
	return &fieldError{field: field, msg: fmt.Sprintf("must be an integer in [%d, %d], got %s", lo, hi, got)}
}

// smallInt is the fast path of integer: a plain non-negative decimal of at
// most 18 digits without a leading zero, ended by a delimiter. ok is false
// for anything else (the caller then takes the general path).
func smallInt(b []byte, i int) (v int64, end int, ok bool) {
	start := i
	for i < len(b) && i-start < 18 {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		v = v*10 + int64(d)
		i++
	}
	if i == start || i >= len(b) || (b[start] == '0' && i-start > 1) {
		return 0, i, false
	}
	switch b[i] {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return v, i, true
	}
	return 0, i, false
}

// valueStart reports whether the byte at r.i can start a JSON value.
func (r *reader) valueStart() bool {
	switch c := r.b[r.i]; {
	case c == '"' || c == '{' || c == '[' || c == '-' || c == 't' || c == 'f' || c == 'n':
		return true
	case c >= '0' && c <= '9':
		return true
	}
	return false
}

// describe renders the value at r.i for an error message, without consuming it.
func (r *reader) describe() string {
	if r.eof() {
		return "nothing"
	}
	switch c := r.b[r.i]; c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		end := r.i + 1
		for end < len(r.b) && r.b[end] != '"' {
			if r.b[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(r.b) {
			end = len(r.b) - 1
		}
		return "string " + quoteSnippet(r.b[r.i:end+1])
	case 't', 'f', 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if hasPrefix(r.b[r.i:], lit) {
				return lit
			}
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			end, _ := scanNumber(r.b, r.i)
			return quoteSnippet(r.b[r.i:end])
		}
	}
	return "invalid JSON"
}

func hasPrefix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[:len(s)]) == s
}

// quoteSnippet renders at most 40 bytes of raw input for an error message.
func quoteSnippet(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// scanNumber scans a JSON number starting at i and returns its end. ok is
// false when the text is not a number of the JSON grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; end is then where it failed.
func scanNumber(b []byte, i int) (end int, ok bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return j, false
		}
		i = j
	}
	// A number must end at a delimiter: "12abc" is not a number.
	if i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r', ',', '}', ']':
		default:
			return i, false
		}
	}
	return i, true
}

// exactInt returns the value of a JSON number token when it is a whole number
// of magnitude at most 1e18; ok is false otherwise (a fraction, or too large).
func exactInt(tok []byte) (int64, bool) {
	i := 0
	neg := false
	if tok[0] == '-' {
		neg = true
		i++
	}
	var mant uint64
	nd := 0  // significant digits in mant
	exp := 0 // decimal exponent applied to mant
	add := func(d byte) bool {
		if mant == 0 && d == '0' {
			return true
		}
		if nd >= 18 {
			return false
		}
		mant = mant*10 + uint64(d-'0')
		nd++
		return true
	}
	for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
		if !add(tok[i]) {
			return 0, false
		}
		i++
	}
	if i < len(tok) && tok[i] == '.' {
		i++
		fracEnd := i
		for fracEnd < len(tok) && tok[fracEnd] >= '0' && tok[fracEnd] <= '9' {
			fracEnd++
		}
		last := fracEnd // trailing zeros of the fraction change nothing
		for last > i && tok[last-1] == '0' {
			last--
		}
		for ; i < last; i++ {
			if !add(tok[i]) {
				return 0, false
			}
			exp--
		}
		i = fracEnd
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		eneg := false
		if tok[i] == '+' || tok[i] == '-' {
			eneg = tok[i] == '-'
			i++
		}
		e := 0
		for ; i < len(tok); i++ {
			if e < 1_000_000 {
				e = e*10 + int(tok[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if mant == 0 {
		return 0, true
	}
	for exp < 0 {
		if mant%10 != 0 {
			return 0, false
		}
		mant /= 10
		exp++
	}
	for ; exp > 0; exp-- {
		if mant > 1e17 {
			return 0, false
		}
		mant *= 10
	}
	if mant > 1e18 {
		return 0, false
	}
	if neg {
		return -int64(mant), true
	}
	return int64(mant), true
}

// readString reads the string at r.i (which is '"'). Without escapes it
// returns a sub-slice of the body; with escapes it unescapes into *scratch.
// Raw control characters and malformed escapes are refused; a \u escape that
// is half of a surrogate pair without its other half is refused too. The
// bytes are not checked for valid UTF-8: callers that need it check, unless
// r.ascii says the string is all ASCII.
//
// The scan looks at eight bytes at a time for a quote, a backslash or a
// control character, and notes the bytes of multi-byte sequences.
func (r *reader) readString(field string, scratch *[]byte) ([]byte, error) {
	r.i++ // opening quote
	start := r.i
	b := r.b
	var high uint64 // the bytes >= 0x80 seen, in the top bit of each lane
	i := r.i
	for i+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[i:])
		if m := special(w); m != 0 {
			// The lowest lane flagged is the first special byte (the
			// trick's false positives are only above a true one): step to
			// it, and let the loop below handle it.
			n := bits.TrailingZeros64(m) >> 3
			high |= w & (1<<(8*n) - 1)
			i += n
			break
		}
		high |= w
		i += 8
	}
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			r.i = i + 1
			r.ascii = high&lanesHigh == 0
			return b[start:i], nil
		case c == '\\':
			r.i = i
			r.ascii = false
			return r.readEscaped(field, start, scratch)
		case c < 0x20:
			r.i = i
			return nil, r.syntax(field, "control character in a string")
		}
		high |= uint64(c)
		i++
	}
	r.i = i
	return nil, r.syntax(field, "unterminated string")
}

const (
	lanesLow  = 0x0101010101010101
	lanesHigh = 0x8080808080808080
)

// special returns a non-zero value when one of the eight bytes of w (one
// per lane, the first byte in the lowest) is a quote, a backslash or a
// control character (< 0x20): the top bit of the lane of each such byte is
// set. (The "has a zero byte" trick: a borrow can also flag a lane above a
// flagged one, so only the lowest flag is exact, which is all readString
// uses.)
func special(w uint64) uint64 {
	q := w ^ (lanesLow * '"')
	bs := w ^ (lanesLow * '\\')
	zq := (q - lanesLow) &^ q
	zb := (bs - lanesLow) &^ bs
	ctl := (w - lanesLow*0x20) &^ w
	return (zq | zb | ctl) & lanesHigh
}

func (r *reader) readEscaped(field string, start int, scratch *[]byte) ([]byte, error) {
	out := append((*scratch)[:0], r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			*scratch = out[:0] // keep the grown buffer for the next request
			return out, nil
		case c < 0x20:
			return nil, r.syntax(field, "control character in a string")
		case c != '\\':
			out = append(out, c)
			r.i++
			continue
		}
		// c == '\\'
		if r.i+1 >= len(r.b) {
			r.i++
			return nil, r.syntax(field, "unterminated string")
		}
		e := r.b[r.i+1]
		r.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			ru, ok := r.hex4()
			if !ok {
				return nil, r.syntax(field, "malformed \\u escape")
			}
			if utf16.IsSurrogate(ru) {
				if ru >= 0xDC00 || r.i+1 >= len(r.b) || r.b[r.i] != '\\' || r.b[r.i+1] != 'u' {
					return nil, r.syntax(field, "unpaired surrogate in a \\u escape")
				}
				r.i += 2
				lo, ok := r.hex4()
				if !ok {
					return nil, r.syntax(field, "malformed \\u escape")
				}
				ru = utf16.DecodeRune(ru, lo)
				if ru == utf8.RuneError {
					return nil, r.syntax(field, "unpaired surrogate in a \\u escape")
				}
			}
			out = utf8.AppendRune(out, ru)
		default:
			return nil, r.syntax(field, fmt.Sprintf("invalid escape \\%c", e))
		}
	}
	return nil, r.syntax(field, "unterminated string")
}

func (r *reader) hex4() (rune, bool) {
	if r.i+4 > len(r.b) {
		r.i = len(r.b)
		return 0, false
	}
	var v rune
	for _, c := range r.b[r.i : r.i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	r.i += 4
	return v, true
}

// skipValue reads and validates any JSON value of field, returning its raw
// bytes. It is for values handed whole to another parser (a resource config).
func (r *reader) skipValue(field string, depth int) ([]byte, error) {
	r.ws()
	if r.eof() {
		return nil, r.syntax(field, "unexpected end of body, expected a value")
	}
	if depth > maxDepth {
		return nil, r.syntax(field, fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	start := r.i
	var scratch []byte
	switch c := r.b[r.i]; {
	case c == '{':
		r.i++
		for n := 0; ; n++ {
			_, ok, err := r.nextKey(field, n, &scratch)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			if _, err := r.skipValue(field, depth+1); err != nil {
				return nil, err
			}
		}
	case c == '[':
		r.i++
		for n := 0; ; n++ {
			more, err := r.nextElem(field, n)
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
			if _, err := r.skipValue(field, depth+1); err != nil {
				return nil, err
			}
		}
	case c == '"':
		if _, err := r.readString(field, &scratch); err != nil {
			return nil, err
		}
	case c == '-' || (c >= '0' && c <= '9'):
		end, ok := scanNumber(r.b, r.i)
		r.i = end
		if !ok {
			return nil, r.syntax(field, "malformed number")
		}
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if hasPrefix(r.b[r.i:], lit) {
				r.i += len(lit)
				return r.b[start:r.i], nil
			}
		}
		return nil, r.syntax(field, "expected a value")
	}
	return r.b[start:r.i], nil
}

// openArray consumes the '[' of an array.
func (r *reader) openArray(field string) error {
	r.ws()
	if r.eof() {
		return r.syntax(field, "unexpected end of body, expected an array")
	}
	if r.b[r.i] != '[' {
		if !r.valueStart() {
			return r.syntax(field, "expected a value")
		}
		return &fieldError{field: field, msg: "must be an array, got " + r.describe()}
	}
	r.i++
	return nil
}

// nextElem positions the reader at the next element of an array whose '['
// was consumed; it returns false at the closing ']' (consumed). n is the
// number of elements read so far.
func (r *reader) nextElem(field string, n int) (bool, error) {
	r.ws()
	if r.eof() {
		return false, r.syntax(field, "unexpected end of body inside an array")
	}
	c := r.b[r.i]
	if c == ']' {
		r.i++
		return false, nil
	}
	if n > 0 {
		if c != ',' {
			return false, r.syntax(field, "expected ',' or ']' after an element")
		}
		r.i++
		r.ws()
		if r.eof() || r.b[r.i] == ']' {
			return false, r.syntax(field, "expected an element after ','")
		}
	}
	return true, nil
}
