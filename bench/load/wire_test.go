package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestEncodeRequest(t *testing.T) {
	for _, sc := range []scenario{requestJSON, requestMsgpack, batchJSON} {
		body := []byte(`{"resource":"bench/gcra","domain":"user-1","copies":1,"min_copies":1}`)
		raw := encodeRequest(sc, body)
		// The standard library reads it as the request fasthttp used to send.
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatalf("%s: %v\n%s", sc, err, raw)
		}
		got, _ := io.ReadAll(req.Body)
		ct := sc.enc.contentType()
		if req.Method != "POST" || req.URL.Path != sc.path() || req.Host != "localhost" || req.ProtoMinor != 1 ||
			req.Header.Get("Content-Type") != ct || req.Header.Get("Accept") != ct ||
			req.ContentLength != int64(len(body)) || !bytes.Equal(got, body) || req.Close {
			t.Errorf("%s: %s %s host %q, headers %v, length %d, body %q", sc, req.Method, req.URL, req.Host, req.Header, req.ContentLength, got)
		}
	}
}

func TestParseReply(t *testing.T) {
	const okHead = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n"
	const okBody = `{"granted":1,"remaining":3}`
	const whole = -1
	type want struct {
		status int
		ctype  string
		body   string
		close  bool
		n      int    // 0: incomplete or an error; whole: all of the input
		need   int    // the want hint when incomplete
		err    string // a substring of the error; "" for none
	}
	for _, tc := range []struct {
		name string
		in   string
		want want
	}{
		{name: "whole", in: okHead + okBody, want: want{status: 200, ctype: "application/json", body: okBody, n: len(okHead) + len(okBody), need: len(okHead) + len(okBody)}},
		{name: "empty", in: "", want: want{}},
		{name: "status line only", in: "HTTP/1.1 200 OK\r\n", want: want{}},
		{name: "header without body", in: okHead, want: want{need: len(okHead) + len(okBody)}},
		{name: "half the body", in: okHead + okBody[:10], want: want{need: len(okHead) + len(okBody)}},
		{name: "bytes after it", in: okHead + okBody + "HTTP/1.1", want: want{status: 200, ctype: "application/json", body: okBody, n: len(okHead) + len(okBody), need: len(okHead) + len(okBody)}},
		{name: "lower-case names, spaces", in: "HTTP/1.1 200 OK\r\ncontent-length:  2 \r\ncontent-type:text/plain\r\nserver: x\r\n\r\nhi",
			want: want{status: 200, ctype: "text/plain", body: "hi", n: whole}},
		{name: "no reason phrase", in: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", want: want{status: 200, n: whole}},
		{name: "Connection: close", in: "HTTP/1.1 503 Service Unavailable\r\nConnection: keep-alive, Close\r\nContent-Length: 1\r\n\r\nx",
			want: want{status: 503, body: "x", close: true, n: whole}},
		{name: "HTTP/1.0 closes", in: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", want: want{status: 200, body: "x", close: true, n: whole}},
		{name: "204 without length", in: "HTTP/1.1 204 No Content\r\n\r\n", want: want{status: 204, n: whole}},
		{name: "two equal lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", want: want{status: 200, body: "x", n: whole}},
		{name: "identity encoding", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 1\r\n\r\nx", want: want{status: 200, body: "x", n: whole}},

		{name: "not HTTP", in: "SSH-2.0-OpenSSH\r\n", want: want{err: "status line"}},
		{name: "not HTTP, early", in: "GET", want: want{err: "status line"}},
		{name: "HTTP/2", in: "HTTP/2 200\r\n\r\n", want: want{err: "status line"}},
		{name: "letters in status", in: "HTTP/1.1 2x0 OK\r\n\r\n", want: want{err: "status line"}},
		{name: "status too long", in: "HTTP/1.1 2000 OK\r\n\r\n", want: want{err: "status line"}},
		{name: "interim", in: "HTTP/1.1 100 Continue\r\n\r\n", want: want{err: "interim"}},
		{name: "no length", in: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhi", want: want{err: "without Content-Length"}},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", want: want{err: "Transfer-Encoding"}},
		{name: "negative length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", want: want{err: "Content-Length"}},
		{name: "length with a sign", in: "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx", want: want{err: "Content-Length"}},
		{name: "huge length", in: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", want: want{err: "Content-Length"}},
		{name: "length over the limit", in: "HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n", want: want{err: "over the limit"}},
		{name: "two lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", want: want{err: "two Content-Lengths"}},
		{name: "header without colon", in: "HTTP/1.1 200 OK\r\nContent-Length 1\r\n\r\nx", want: want{err: "header line"}},
		{name: "folded header", in: "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", want: want{err: "header line"}},
		{name: "header too long", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", maxReplyHeader) + "\r\n\r\n", want: want{err: "header longer"}},
		{name: "header too long, unfinished", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", maxReplyHeader), want: want{err: "header longer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, n, need, err := parseReply([]byte(tc.in))
			w := tc.want
			if w.n == whole {
				w.n = len(tc.in)
			}
			if w.err != "" {
				if err == nil || !errors.Is(err, errWire) || !strings.Contains(err.Error(), w.err) {
					t.Fatalf("error %v, want one saying %q", err, w.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if n != w.n || (w.need != 0 && need != w.need) {
				t.Fatalf("n %d want hint %d, want n %d hint %d", n, need, w.n, w.need)
			}
			if n == 0 {
				return
			}
			if r.status != w.status || string(r.contentType) != w.ctype || string(r.body) != w.body || r.close != w.close {
				t.Errorf("got status %d type %q body %q close %v, want %d %q %q %v",
					r.status, r.contentType, r.body, r.close, w.status, w.ctype, w.body, w.close)
			}
		})
	}
}

// TestParseFasthttpReplies parses what the floor's fasthttp server writes,
// byte for byte, for a 200 and for an error.
func TestParseFasthttpReplies(t *testing.T) {
	body := []byte(`{"granted":1,"remaining":9,"retry_after_ms":0}`)
	srv := serveInProcess(t, floorServer(body, "application/json").Handler)
	raw := roundTrip(t, srv.socket, encodeRequest(requestJSON, []byte(`{}`)))
	r, n, _, err := parseReply(raw)
	if err != nil || n != len(raw) || r.status != 200 || string(r.contentType) != "application/json" || !bytes.Equal(r.body, body) || r.close {
		t.Fatalf("parsed %+v, n %d of %d, err %v:\n%s", r, n, len(raw), err, raw)
	}
}

// parseAll checks the parser's invariants on b (the fuzz target's body).
func parseAll(t *testing.T, b []byte) {
	r, n, need, err := parseReply(b)
	if err != nil {
		if !errors.Is(err, errWire) {
			t.Fatalf("error %v is not a wire error", err)
		}
		if n != 0 {
			t.Fatalf("error %v with n %d", err, n)
		}
		return
	}
	if n == 0 {
		if need != 0 && need <= len(b) {
			t.Fatalf("incomplete, yet the hint %d is within the %d bytes", need, len(b))
		}
		return
	}
	if n > len(b) || need != n || r.status < 200 || r.status > 999 {
		t.Fatalf("n %d of %d, hint %d, status %d", n, len(b), need, r.status)
	}
	if len(r.body) > n || !bytes.Equal(r.body, b[n-len(r.body):n]) {
		t.Fatalf("body %q is not the end of the reply", r.body)
	}
	// The reply alone parses the same, and any bytes after it change nothing.
	for _, c := range [][]byte{b[:n], append(bytes.Clone(b[:n]), "HTTP/1.1 200 OK\r\n\r\n"...)} {
		r2, n2, _, err2 := parseReply(c)
		if err2 != nil || n2 != n || r2.status != r.status || !bytes.Equal(r2.body, r.body) ||
			!bytes.Equal(r2.contentType, r.contentType) || r2.close != r.close {
			t.Fatalf("%q parses to %+v n %d err %v, %q to %+v n %d", c, r2, n2, err2, b, r, n)
		}
	}
	// Any shorter prefix is a reply not yet complete, never an error: a reply
	// that arrives in pieces parses the same as one that arrives whole.
	end := bytes.Index(b, headerEnd)
	for _, k := range []int{0, 1, end, end + 3, end + 4, n - 1, n / 2} {
		if k < 0 || k >= n {
			continue
		}
		_, nk, _, errk := parseReply(b[:k])
		if nk != 0 || errk != nil {
			t.Fatalf("prefix of %d of the %d bytes: n %d, err %v", k, n, nk, errk)
		}
	}
}

func FuzzParseReply(f *testing.F) {
	// More seeds are in testdata/fuzz/FuzzParseReply.
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"granted\":1,\"remaining\":3}"))
	f.Add([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) { parseAll(t, b) })
}
