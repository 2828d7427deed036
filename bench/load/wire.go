package main

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// wire.go is the generator's own HTTP/1.1 on the load path: every request is
// encoded once, before the phase, into the exact bytes one write sends, and a
// reply is parsed no further than its status line and the three headers the
// generator needs (Content-Length, Content-Type, Connection). The body is
// not copied: it is a slice of the connection's read buffer.

// encodeRequest returns the whole POST request of scenario sc carrying body,
// as it goes on the wire.
func encodeRequest(sc scenario, body []byte) []byte {
	ct := sc.enc.contentType()
	b := make([]byte, 0, 128+len(body))
	b = append(b, "POST "...)
	b = append(b, sc.path()...)
	b = append(b, " HTTP/1.1\r\nHost: localhost\r\nContent-Type: "...)
	b = append(b, ct...)
	b = append(b, "\r\nAccept: "...)
	b = append(b, ct...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// encodeRequests encodes every body of sc.
func encodeRequests(sc scenario, bodies [][]byte) [][]byte {
	out := make([][]byte, len(bodies))
	for i, body := range bodies {
		out[i] = encodeRequest(sc, body)
	}
	return out
}

// maxReplyHeader and maxReplyBody bound a reply: more is an error, not a
// reason to grow a buffer without end.
const (
	maxReplyHeader = 16 << 10
	maxReplyBody   = 64 << 20
)

// reply is a parsed HTTP/1.1 response. contentType and body are slices of
// the parsed buffer.
type reply struct {
	status      int
	contentType []byte
	body        []byte
	close       bool // the server closes the connection after it
}

// errWire is the class of malformed replies.
var errWire = errors.New("malformed reply")

func wireErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errWire, fmt.Sprintf(format, args...))
}

var (
	crlf       = []byte("\r\n")
	headerEnd  = []byte("\r\n\r\n")
	httpPrefix = []byte("HTTP/1.")
)

// parseReply parses one response at the start of b. It returns the reply
// and its length in bytes; n == 0 with a nil error means b does not hold a
// whole reply yet. want is how many bytes b must hold before it can (0 when
// the header is not complete): a hint for the size of the read buffer.
func parseReply(b []byte) (r reply, n, want int, err error) {
	end := bytes.Index(b, headerEnd)
	if end > maxReplyHeader {
		return r, 0, 0, wireErr("header longer than %d bytes", maxReplyHeader)
	}
	if end < 0 {
		if len(b) >= maxReplyHeader+len(headerEnd) {
			return r, 0, 0, wireErr("header longer than %d bytes", maxReplyHeader)
		}
		// Fail early on what cannot become a reply.
		if m := min(len(b), len(httpPrefix)); !bytes.Equal(b[:m], httpPrefix[:m]) {
			return r, 0, 0, wireErr("status line %q", benchkit.Snippet(b))
		}
		return r, 0, 0, nil
	}
	head := b[:end]
	line, rest, _ := bytes.Cut(head, crlf)
	// "HTTP/1.1 200 OK": version, a space, three digits, then a space or
	// nothing.
	if len(line) < 12 || !bytes.HasPrefix(line, httpPrefix) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return r, 0, 0, wireErr("status line %q", benchkit.Snippet(line))
	}
	minor := line[7]
	if minor != '0' && minor != '1' {
		return r, 0, 0, wireErr("status line %q", benchkit.Snippet(line))
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return r, 0, 0, wireErr("status line %q", benchkit.Snippet(line))
		}
	}
	r.status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if r.status < 200 {
		return r, 0, 0, wireErr("interim status %d: the generator never asks for one", r.status)
	}
	r.close = minor == '0' // HTTP/1.0: no keep-alive unless said (the generator does not ask)

	length := -1
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, crlf)
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok || len(name) == 0 || name[0] == ' ' || name[0] == '\t' {
			return r, 0, 0, wireErr("header line %q", benchkit.Snippet(h))
		}
		value = bytes.Trim(value, " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			v, ok := parseLength(value)
			if !ok {
				return r, 0, 0, wireErr("Content-Length %q", benchkit.Snippet(value))
			}
			if length >= 0 && v != length {
				return r, 0, 0, wireErr("two Content-Lengths, %d and %d", length, v)
			}
			length = v
		case bytes.EqualFold(name, []byte("Content-Type")):
			r.contentType = value
		case bytes.EqualFold(name, []byte("Connection")):
			r.close = r.close || hasToken(value, "close")
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("identity")) {
				return r, 0, 0, wireErr("Transfer-Encoding %q is not supported", benchkit.Snippet(value))
			}
		}
	}
	start := end + len(headerEnd)
	if r.status == 204 || r.status == 304 {
		length = 0
	}
	if length < 0 {
		return r, 0, 0, wireErr("status %d without Content-Length", r.status)
	}
	if length > maxReplyBody {
		return r, 0, 0, wireErr("Content-Length %d over the limit %d", length, maxReplyBody)
	}
	total := start + length
	if len(b) < total {
		return reply{}, 0, total, nil
	}
	r.body = b[start:total:total]
	return r, total, total, nil
}

// parseLength parses a Content-Length value: decimal digits only, at most
// nine of them (the limit is far below).
func parseLength(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// hasToken reports whether the comma-separated header value holds token
// (case-insensitive).
func hasToken(value []byte, token string) bool {
	for len(value) > 0 {
		var t []byte
		t, value, _ = bytes.Cut(value, []byte(","))
		if bytes.EqualFold(bytes.Trim(t, " \t"), []byte(token)) {
			return true
		}
	}
	return false
}
