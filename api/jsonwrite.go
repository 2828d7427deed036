package api

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/obol-dev/obol/local"
)

// The replies of the hot endpoints are written by hand with these appenders
// into pooled buffers, so that encoding a reply allocates nothing.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Control characters are escaped,
// and bytes that are not valid UTF-8 become U+FFFD, so the output is always
// valid JSON whatever s holds (names echoed from a request may hold anything).
func appendString[S ~string | ~[]byte](b []byte, s S) []byte {
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

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// ceilMs returns d in whole milliseconds, rounded up; 0 for d ≤ 0.
func ceilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := d / time.Millisecond
	if d%time.Millisecond != 0 {
		q++
	}
	return int64(q)
}

// ceilSec returns d in whole seconds, rounded up; 0 for d ≤ 0.
func ceilSec(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := d / time.Second
	if d%time.Second != 0 {
		q++
	}
	return int64(q)
}

// retryMs renders a RetryAfter: local.Never is -1, anything else is rounded
// up to the millisecond.
func retryMs(d time.Duration) int64 {
	if d == local.Never {
		return -1
	}
	return ceilMs(d)
}

// appendField appends ,"name": (or "name": for the first field, when b ends
// with '{').
func appendField(b []byte, name string) []byte {
	if len(b) > 0 && b[len(b)-1] != '{' && b[len(b)-1] != '[' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

func appendIntField(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(appendField(b, name), v, 10)
}

func appendBoolField(b []byte, name string, v bool) []byte {
	return appendBool(appendField(b, name), v)
}

func appendStringField[S ~string | ~[]byte](b []byte, name string, v S) []byte {
	return appendString(appendField(b, name), v)
}
