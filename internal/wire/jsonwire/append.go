package jsonwire

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. '"', '\' and control characters
// are escaped (\n, \r and \t by name, the others as \u00XX), and bytes that
// are not valid UTF-8 become \ufffd, so the output is always valid JSON
// whatever s holds (names echoed from a request may hold anything).
func AppendString[S ~string | ~[]byte](b []byte, s S) []byte {
	return appendString(b, s, true)
}

// AppendStringAsIs is AppendString that leaves bytes that are not valid
// UTF-8 as they are: for a request whose receiver should refuse them,
// naming the field, rather than read another name.
func AppendStringAsIs[S ~string | ~[]byte](b []byte, s S) []byte {
	return appendString(b, s, false)
}

func appendString[S ~string | ~[]byte](b []byte, s S, replace bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		if !replace {
			i++
			continue
		}
		end := min(i+utf8.UTFMax, len(s))
		r, size := utf8.DecodeRuneInString(string(s[i:end])) // a short non-escaping conversion: no allocation
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
