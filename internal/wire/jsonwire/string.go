package jsonwire

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// ReadString reads the string at I (which is '"'). Without escapes it
// returns a sub-slice of the text; with escapes it appends the unescaped
// string to *scratch and returns it (the bytes *scratch held before stay as
// they are, so that the strings read before stay valid). Raw control
// characters and malformed
// escapes are refused; a \u escape that is half of a surrogate pair without
// its other half is refused too, or read as U+FFFD with LoneSurrogates. The
// bytes are not checked for valid UTF-8: callers that need it check, unless
// ASCII says the string is all ASCII.
//
// The scan looks at eight bytes at a time for a quote, a backslash or a
// control character, and notes the bytes of multi-byte sequences.
func (l *Lexer) ReadString(field string, scratch *[]byte) ([]byte, error) {
	l.I++ // opening quote
	start := l.I
	b := l.B
	var high uint64 // the bytes >= 0x80 seen, in the top bit of each lane
	i := l.I
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
			l.I = i + 1
			l.ASCII = high&lanesHigh == 0
			return b[start:i], nil
		case c == '\\':
			l.I = i
			l.ASCII = false
			return l.readEscaped(field, start, scratch)
		case c < 0x20:
			l.I = i
			return nil, l.Syntax(field, "control character in a string")
		}
		high |= uint64(c)
		i++
	}
	l.I = i
	return nil, l.Syntax(field, "unterminated string")
}

const (
	lanesLow  = 0x0101010101010101
	lanesHigh = 0x8080808080808080
)

// special returns a non-zero value when one of the eight bytes of w (one
// per lane, the first byte in the lowest) is a quote, a backslash or a
// control character (< 0x20): the top bit of the lane of each such byte is
// set. (The "has a zero byte" trick: a borrow can also flag a lane above a
// flagged one, so only the lowest flag is exact, which is all ReadString
// uses.)
func special(w uint64) uint64 {
	q := w ^ (lanesLow * '"')
	bs := w ^ (lanesLow * '\\')
	zq := (q - lanesLow) &^ q
	zb := (bs - lanesLow) &^ bs
	ctl := (w - lanesLow*0x20) &^ w
	return (zq | zb | ctl) & lanesHigh
}

func (l *Lexer) readEscaped(field string, start int, scratch *[]byte) ([]byte, error) {
	from := len(*scratch)
	out := append(*scratch, l.B[start:l.I]...)
	for l.I < len(l.B) {
		c := l.B[l.I]
		switch {
		case c == '"':
			l.I++
			*scratch = out
			return out[from:len(out):len(out)], nil
		case c < 0x20:
			return nil, l.Syntax(field, "control character in a string")
		case c != '\\':
			out = append(out, c)
			l.I++
			continue
		}
		// c == '\\'
		if l.I+1 >= len(l.B) {
			l.I++
			return nil, l.Syntax(field, "unterminated string")
		}
		e := l.B[l.I+1]
		l.I += 2
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
			ru, err := l.escapedRune(field)
			if err != nil {
				return nil, err
			}
			out = utf8.AppendRune(out, ru)
		default:
			return nil, l.Syntax(field, fmt.Sprintf("invalid escape \\%c", e))
		}
	}
	return nil, l.Syntax(field, "unterminated string")
}

// escapedRune reads the rest of a \u escape, whose "\u" was consumed, and
// the low half that must follow a high surrogate.
func (l *Lexer) escapedRune(field string) (rune, error) {
	ru, ok := l.hex4()
	if !ok {
		return 0, l.Syntax(field, "malformed \\u escape")
	}
	if !utf16.IsSurrogate(ru) {
		return ru, nil
	}
	if ru < 0xDC00 && l.I+1 < len(l.B) && l.B[l.I] == '\\' && l.B[l.I+1] == 'u' {
		at := l.I
		l.I += 2
		lo, ok := l.hex4()
		if !ok {
			return 0, l.Syntax(field, "malformed \\u escape")
		}
		if pair := utf16.DecodeRune(ru, lo); pair != utf8.RuneError {
			return pair, nil
		}
		if l.LoneSurrogates {
			l.I = at // the next escape is read on its own
			return utf8.RuneError, nil
		}
	} else if l.LoneSurrogates {
		return utf8.RuneError, nil
	}
	return 0, l.Syntax(field, "unpaired surrogate in a \\u escape")
}

func (l *Lexer) hex4() (rune, bool) {
	if l.I+4 > len(l.B) {
		l.I = len(l.B)
		return 0, false
	}
	var v rune
	for _, c := range l.B[l.I : l.I+4] {
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
	l.I += 4
	return v, true
}
