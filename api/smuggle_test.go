package api

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"
)

// TestContentLengthWithTransferEncodingIsRefused is a regression test of the
// hardening issue's ninth item: a request with both Content-Length and
// Transfer-Encoding was served by its chunked framing; a proxy in front that
// trusted Content-Length would disagree on where the request ends. It is now
// 400 and the connection is closed.
func TestContentLengthWithTransferEncodingIsRefused(t *testing.T) {
	h := newHarness(t)
	for _, hdrs := range []string{
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\ncontent-length: 99\r\n",
	} {
		c, err := h.dial()
		if err != nil {
			t.Fatal(err)
		}
		body := `{"resource":"t/gcra","domain":"d"}`
		c.Write([]byte("POST /v1/request HTTP/1.1\r\nHost: x\r\n" + hdrs + "\r\n22\r\n" + body + "\r\n0\r\n\r\n" +
			"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) // a second request on the same connection
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(bufio.NewReader(c)) // ends when the agent closes the connection
		c.Close()
		got := string(b)
		if !strings.HasPrefix(got, "HTTP/1.1 400") || !strings.Contains(got, "both Content-Length and Transfer-Encoding") {
			t.Errorf("%q: %s", hdrs, got)
		}
		if strings.Count(got, "HTTP/1.1 ") != 1 {
			t.Errorf("%q: the connection served another request after the refusal: %s", hdrs, got)
		}
	}
	// Chunked alone is fine.
	c, _ := h.dial()
	defer c.Close()
	body := `{"resource":"t/gcra","domain":"d"}`
	c.Write([]byte("POST /v1/request HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n22\r\n" + body + "\r\n0\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(bufio.NewReader(c))
	if !strings.HasPrefix(string(b), "HTTP/1.1 200") {
		t.Errorf("chunked alone: %s", b)
	}
}
