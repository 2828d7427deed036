package netguard

import (
	"encoding/binary"
	"net"
	"runtime"
	"sync"
	"time"
)

// h2.go: the bounds of HTTP/2 (gRPC) connections: reads that yield, and
// a connection closed past MaxRefusedStreams refused streams.

// HTTP2 marks l's connections from now on as HTTP/2 ones (gRPC), served
// by a server that reads many calls from one connection in one loop, and
// returns l. Two bounds then hold on each connection:
//
//   - its reads are of at most 1 KiB, each followed by a yield of the
//     processor (runtime.Gosched): a client that floods its connection
//     cannot keep the reading goroutine running for a whole time slice
//     (10 ms) while the requests of other listeners wait. It costs one
//     scheduler call per read (of up to 5 calls), not per call;
//   - once the server has refused more than MaxRefusedStreams of its
//     streams (RST_STREAM REFUSED_STREAM: the client opened more than the
//     server's SETTINGS_MAX_CONCURRENT_STREAMS allows, which a client
//     that heeds the settings never does), the connection is closed: a
//     flood of streams past the limit costs the server a bounded amount
//     of work per connection. Each such close is counted with the
//     refused connections and logged.
func (l *Listener) HTTP2() *Listener {
	l.http2 = true
	return l
}

// yieldRead is the most an h2Conn reads at once: the work one read gives
// its reader between two yields (about 50 header-only HTTP/2 frames of a
// flood, each of which may start a stream's goroutine, or 5 calls of
// Envoy's). 4 KiB left the pinned probe's p99 at 4.2-4.4× idle under the
// streams flood and 1 KiB at 1.9-2.8× (go run ./bench/abuse -attack
// streams); bench/rls's req/s against its floor stayed within its noise.
const yieldRead = 1 << 10

// MaxRefusedStreams is how many streams the server may refuse on one
// HTTP/2 connection before the connection is closed (HTTP2). A client that
// heeds the server's SETTINGS_MAX_CONCURRENT_STREAMS is refused none; one
// that opens streams before the server's settings reach it can be refused
// those over the limit in its first round trip.
const MaxRefusedStreams = 100

// abusePause is how long a listener waits before its next accept after
// closing an HTTP/2 connection for refused streams (MaxRefusedStreams).
// Without it the client reconnects and floods again at once: 200,000
// header-only streams, a connection closed after each 1,000 refused, moved
// the pinned probe's p99 8× (go run ./bench/abuse -attack streams). Other
// clients' connections wait in the kernel's accept queue meanwhile; those
// already open are served.
const abusePause = 10 * time.Millisecond

// h2Conn is a conn of an HTTP2 listener.
type h2Conn struct {
	conn
	top  net.Conn   // what the server reads and writes: &conn, or TLS over it
	mu   sync.Mutex // the server writes from one goroutine; to be safe
	scan frameScan
}

// Close closes the connection (sending TLS's close_notify first, when
// served over TLS) and frees its place under the cap.
func (c *h2Conn) Close() error { return c.top.Close() }

func (c *h2Conn) Read(p []byte) (int, error) {
	if len(p) > yieldRead {
		p = p[:yieldRead]
	}
	n, err := c.top.Read(p)
	runtime.Gosched()
	return n, err
}

// Write writes the server's frames, counting its refusals of streams; past
// MaxRefusedStreams it closes the connection.
func (c *h2Conn) Write(p []byte) (int, error) {
	n, err := c.top.Write(p) // conn.Write marks c answered
	c.mu.Lock()
	c.scan.scan(p[:n])
	over := c.scan.refused > MaxRefusedStreams
	c.mu.Unlock()
	if over && err == nil {
		c.l.refused.Add(1)
		c.l.abused.Store(true)
		c.l.note("HTTP/2 connection closed: the client kept opening streams past the limit", "refused_streams", MaxRefusedStreams)
		c.Conn.Close()
		return n, net.ErrClosed
	}
	return n, err
}

// frameScan follows the HTTP/2 frames a server writes (a stream of
// frames: the server sends no preface) and counts its RST_STREAM frames
// with the code REFUSED_STREAM.
type frameScan struct {
	hdr     [9]byte // the frame header being read
	nh      int     // bytes of it read
	left    int     // payload bytes of the current frame still to come
	rst     bool    // the current frame is a RST_STREAM
	code    [4]byte // its error code
	nc      int     // bytes of it read
	refused int
}

// HTTP/2 (RFC 9113): the RST_STREAM frame type and the REFUSED_STREAM code.
const (
	frameRSTStream = 0x3
	codeRefused    = 0x7
)

func (f *frameScan) scan(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			k := min(f.left, len(p))
			if f.rst && f.nc < 4 {
				k = min(k, 4-f.nc)
				copy(f.code[f.nc:], p[:k])
				f.nc += k
				if f.nc == 4 && binary.BigEndian.Uint32(f.code[:]) == codeRefused {
					f.refused++
				}
			}
			p, f.left = p[k:], f.left-k
			continue
		}
		k := min(9-f.nh, len(p))
		copy(f.hdr[f.nh:], p[:k])
		f.nh += k
		p = p[k:]
		if f.nh == 9 {
			f.nh, f.nc = 0, 0
			f.left = int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
			f.rst = f.hdr[3] == frameRSTStream
		}
	}
}
