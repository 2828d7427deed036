package rls

import (
	"fmt"
	"strconv"
	"sync"
	"unsafe"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// reply.go is the response a decision writes: a RateLimitResponse with
// its statuses, durations, override limits and headers kept in one pooled
// Reply, so that a decision allocates nothing once the pool is warm. The
// gRPC server hands a Reply back to the pool after marshalling it (the
// codec in grpc.go), the JSON handler after writing it.

// HeaderMode selects the response_headers_to_add of a decision.
type HeaderMode uint8

const (
	// HeadersOff adds none (envoyproxy/ratelimit's default).
	HeadersOff HeaderMode = iota
	// HeadersRateLimit adds RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset with plain numbers, as envoyproxy/ratelimit does
	// with LIMIT_RESPONSE_HEADERS_ENABLED and its default names.
	HeadersRateLimit
	// HeadersDraft03 adds X-RateLimit-Limit ("10, 10;w=60"),
	// X-RateLimit-Remaining and X-RateLimit-Reset, as Envoy's
	// enable_x_ratelimit_headers: DRAFT_VERSION_03 does.
	HeadersDraft03
	// HeadersDraft11 adds RateLimit-Policy ("name";q=10;w=60) and
	// RateLimit ("name";r=5;t=30) of draft-ietf-httpapi-ratelimit-headers-11.
	HeadersDraft11
)

// ParseHeaderMode reads a header mode's name: off, ratelimit, draft03 or
// draft11.
func ParseHeaderMode(s string) (HeaderMode, error) {
	switch s {
	case "", "off":
		return HeadersOff, nil
	case "ratelimit":
		return HeadersRateLimit, nil
	case "draft03":
		return HeadersDraft03, nil
	case "draft11":
		return HeadersDraft11, nil
	}
	return 0, fmt.Errorf("rls headers: want off, ratelimit, draft03 or draft11, got %q", s)
}

// Reply is a pooled RateLimitResponse: Decide writes it, its Response is
// what is sent.
type Reply struct {
	resp   rlpb.RateLimitResponse // first: Release finds the Reply from it
	sts    []*rlpb.RateLimitResponse_DescriptorStatus
	durs   []*durationpb.Duration
	limits []*rlpb.RateLimitResponse_RateLimit
	// overrides holds the limits of descriptors carrying their own.
	overrides []Limit
	hdrs      [3]*core.HeaderValue
	hptr      [3]*core.HeaderValue
	buf       []byte
}

var replies = sync.Pool{New: func() any {
	r := &Reply{buf: make([]byte, 0, 128)}
	for i := range r.hdrs {
		r.hdrs[i] = &core.HeaderValue{}
	}
	return r
}}

// GetReply returns a Reply from the pool.
func GetReply() *Reply { return replies.Get().(*Reply) }

// Response returns the reply's response (valid until Release).
func (r *Reply) Response() *rlpb.RateLimitResponse { return &r.resp }

// Release puts r back in the pool; r and its Response must not be used
// after.
func (r *Reply) Release() { replies.Put(r) }

// replyOf returns the Reply holding m, a Response of a Reply.
func replyOf(m *rlpb.RateLimitResponse) *Reply { return (*Reply)(unsafe.Pointer(m)) }

// reset empties the reply for a request of n descriptors.
func (r *Reply) reset(n int) {
	r.resp.Reset()
	for len(r.sts) < n {
		r.sts = append(r.sts, &rlpb.RateLimitResponse_DescriptorStatus{})
		r.durs = append(r.durs, &durationpb.Duration{})
		r.limits = append(r.limits, &rlpb.RateLimitResponse_RateLimit{})
	}
	if len(r.overrides) < n {
		r.overrides = make([]Limit, n)
	}
	r.resp.Statuses = r.sts[:n]
	r.buf = r.buf[:0]
}

// status returns status i, emptied.
func (r *Reply) status(i int) *rlpb.RateLimitResponse_DescriptorStatus {
	st := r.sts[i]
	st.Reset()
	return st
}

// duration returns the i-th duration set to secs seconds.
func (r *Reply) duration(i int, secs int64) *durationpb.Duration {
	d := r.durs[i]
	d.Reset()
	d.Seconds = secs
	return d
}

// overrideLimit returns the limit of descriptor i's override o, of a unit
// of secs seconds.
func (r *Reply) overrideLimit(i int, o *rlv3.RateLimitDescriptor_RateLimitOverride, secs int64) *Limit {
	pb := r.limits[i]
	pb.Reset()
	pb.RequestsPerUnit, pb.Unit = o.GetRequestsPerUnit(), Unit(o.GetUnit())
	l := &r.overrides[i]
	*l = Limit{PB: pb, Unit: pb.Unit, Seconds: secs, Requests: pb.RequestsPerUnit, id: -1}
	return l
}

// str returns the bytes the reply's buffer gained since at, as a string
// living as long as the buffer's array.
func (r *Reply) str(at int) string {
	b := r.buf[at:]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// headers sets the response's headers of mode for limit l with remaining
// left and reset seconds to its window's end.
func (r *Reply) headers(mode HeaderMode, l *Limit, remaining uint32, reset, _ int64) {
	// Reserve room first so that the strings cut from buf share one array.
	if cap(r.buf) < 160+2*len(l.Name) {
		r.buf = make([]byte, 0, 160+2*len(l.Name))
	}
	var names [3]string
	var vals [3]string
	n := 3
	switch mode {
	case HeadersRateLimit:
		names = [3]string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}
		at := len(r.buf)
		r.buf = strconv.AppendUint(r.buf, uint64(l.Requests), 10)
		vals[0] = r.str(at)
		at = len(r.buf)
		r.buf = strconv.AppendUint(r.buf, uint64(remaining), 10)
		vals[1] = r.str(at)
		at = len(r.buf)
		r.buf = strconv.AppendInt(r.buf, reset, 10)
		vals[2] = r.str(at)
	case HeadersDraft03:
		names = [3]string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
		at := len(r.buf)
		r.buf = strconv.AppendUint(r.buf, uint64(l.Requests), 10)
		r.buf = append(r.buf, ", "...)
		r.buf = strconv.AppendUint(r.buf, uint64(l.Requests), 10)
		r.buf = append(r.buf, ";w="...)
		r.buf = strconv.AppendInt(r.buf, l.Seconds, 10)
		if l.Name != "" {
			r.buf = append(r.buf, `;name="`...)
			r.buf = appendQuoted(r.buf, l.Name)
			r.buf = append(r.buf, '"')
		}
		vals[0] = r.str(at)
		at = len(r.buf)
		r.buf = strconv.AppendUint(r.buf, uint64(remaining), 10)
		vals[1] = r.str(at)
		at = len(r.buf)
		r.buf = strconv.AppendInt(r.buf, reset, 10)
		vals[2] = r.str(at)
	case HeadersDraft11:
		n = 2
		names[0], names[1] = "RateLimit-Policy", "RateLimit"
		name := l.Name
		if name == "" {
			name = "default"
		}
		at := len(r.buf)
		r.buf = append(r.buf, '"')
		r.buf = appendQuoted(r.buf, name)
		r.buf = append(r.buf, `";q=`...)
		r.buf = strconv.AppendUint(r.buf, uint64(l.Requests), 10)
		r.buf = append(r.buf, ";w="...)
		r.buf = strconv.AppendInt(r.buf, l.Seconds, 10)
		vals[0] = r.str(at)
		at = len(r.buf)
		r.buf = append(r.buf, '"')
		r.buf = appendQuoted(r.buf, name)
		r.buf = append(r.buf, `";r=`...)
		r.buf = strconv.AppendUint(r.buf, uint64(remaining), 10)
		r.buf = append(r.buf, ";t="...)
		r.buf = strconv.AppendInt(r.buf, reset, 10)
		vals[1] = r.str(at)
	default:
		return
	}
	for i := 0; i < n; i++ {
		h := r.hdrs[i]
		h.Reset()
		h.Key, h.Value = names[i], vals[i]
		r.hptr[i] = h
	}
	r.resp.ResponseHeadersToAdd = r.hptr[:n]
}

// appendQuoted appends s as the inside of a structured-field string: '"'
// and '\' escaped, bytes outside printable ASCII dropped.
func appendQuoted(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
		}
	}
	return b
}
