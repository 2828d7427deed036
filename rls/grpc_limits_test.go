package rls

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/obol-dev/obol/internal/await"
	"github.com/obol-dev/obol/internal/netguard"
)

// streamFlood opens one HTTP/2 connection to addr and sends n HEADERS
// frames of ShouldRateLimit calls that never send their request (no DATA,
// no END_STREAM). It returns a framer reading the connection, one writing
// to it (safe beside the flood's) and the connection.
func streamFlood(t *testing.T, addr string, n int) (rd, wr *http2.Framer, conn net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	lw := &lockedWriter{w: c}
	fr := http2.NewFramer(lw, nil)
	rd = http2.NewFramer(nil, c)
	rd.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{":authority", "x"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	// Write from another goroutine: the server reads while it answers.
	go func() {
		for i := range n {
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndHeaders: true}) != nil {
				return
			}
		}
	}()
	return rd, http2.NewFramer(lw, nil), c
}

// lockedWriter serializes the writes of two framers: each writes a frame
// in one Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestGRPCStreamFloodBounded: 1,000 header-only streams on one connection
// (a call's headers, then never its request) keep at most
// MaxConcurrentStreams calls open: the server refuses the others
// (RST_STREAM REFUSED_STREAM) and its goroutines stay bounded; the calls
// it took end with the connection.
func TestGRPCStreamFloodBounded(t *testing.T) {
	srv := NewServer(testService(t, Options{}), nil)
	_, addr := serve(t, srv)
	before := runtime.NumGoroutine()
	const n = 1000
	fr, wr, c := streamFlood(t, addr, n)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	refused, ended, peak := 0, 0, 0
	for refused+ended < n-MaxConcurrentStreams {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d refused and %d ended: %v", refused, ended, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok && v != MaxConcurrentStreams {
				t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", v, MaxConcurrentStreams)
			}
			if !f.IsAck() {
				wr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			if f.ErrCode == http2.ErrCodeRefusedStream {
				refused++
			} else {
				ended++
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				ended++
			}
		}
		peak = max(peak, runtime.NumGoroutine()-before)
	}
	if refused < n-MaxConcurrentStreams {
		t.Errorf("%d streams refused, want at least %d", refused, n-MaxConcurrentStreams)
	}
	if ended > MaxConcurrentStreams {
		t.Errorf("%d calls taken, want at most %d", ended, MaxConcurrentStreams)
	}
	// A call taken holds a goroutine; the refused ones none.
	if limit := 2*MaxConcurrentStreams + 50; peak > limit {
		t.Errorf("goroutines grew by %d, want at most %d", peak, limit)
	}
	// The calls taken end with their connection.
	c.Close()
	// The runtime tells no one when goroutines end: the count is polled.
	if !await.PollOK(20*time.Second, func() bool { return runtime.NumGoroutine()-before <= 50 }) {
		t.Fatalf("%d goroutines more than before stay after the connection closed", runtime.NumGoroutine()-before)
	}
}

// TestGRPCStreamFloodConnectionClosed: on a listener guarded for HTTP/2
// (as the agent serves it), a connection that keeps opening streams past
// the limit is closed once the server has refused MaxRefusedStreams of
// them: the flood costs a bounded amount of work per connection.
func TestGRPCStreamFloodConnectionClosed(t *testing.T) {
	srv := NewServerWith(testService(t, Options{}), nil, netguard.Limits{})
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl := netguard.NewSet(nil).Guard("rls_grpc", tl, 16).HTTP2()
	go func() { _ = srv.GRPC().Serve(gl) }()
	t.Cleanup(srv.GRPC().Stop)
	const n = 20000
	fr, wr, c := streamFlood(t, tl.Addr().String(), n)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	refused := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the connection was not closed after %d refused streams", refused)
			}
			break // closed by the server
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				wr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			if f.ErrCode == http2.ErrCodeRefusedStream {
				refused++
			}
		}
	}
	// The close comes after the write that passes the bound: at most one
	// write buffer (32 KiB) of 13-byte RST_STREAM frames later.
	if refused <= netguard.MaxRefusedStreams || refused > netguard.MaxRefusedStreams+(32<<10)/13 {
		t.Errorf("%d streams refused before the close, want just over %d", refused, netguard.MaxRefusedStreams)
	}
	if gl.Refused() != 1 {
		t.Errorf("Refused() = %d, want 1 (the closed connection)", gl.Refused())
	}
}
