package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// MessagePack replies are written with the streaming Encoder of
// github.com/vmihailenco/msgpack/v5 (EncodeMapLen, EncodeString, EncodeInt,
// EncodeBool, ...) into an appending writer over the pooled reply buffer: no
// reflection, no allocation. They have the fields of the JSON replies, in
// the same order; integers are MessagePack integers in their shortest form,
// booleans are booleans.

// mpCodec is the pooled MessagePack state of one request: the reader of its
// body and the encoder of its reply.
type mpCodec struct {
	r mpReader
	e mpEncoder
}

func newMPCodec() *mpCodec {
	c := &mpCodec{}
	c.e.enc = msgpack.NewEncoder(&c.e.w)
	return c
}

// release drops the codec's references to the request's buffers.
func (c *mpCodec) release() {
	c.r.release()
	c.e.w.buf = nil
}

// mpWriter is the io.Writer (and io.ByteWriter, so that the Encoder uses it
// as is) the Encoder writes to: it appends to buf and never fails, so the
// Encoder's methods never return an error when writing to it.
type mpWriter struct{ buf []byte }

var _ interface {
	io.Writer
	io.ByteWriter
} = (*mpWriter)(nil)

func (w *mpWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *mpWriter) WriteByte(c byte) error {
	w.buf = append(w.buf, c)
	return nil
}

// mpEncoder appends MessagePack values to a buffer. Use begin, the
// encoding methods, then end. Its methods ignore the Encoder's errors:
// there are none, the writer never failing.
type mpEncoder struct {
	w   mpWriter
	enc *msgpack.Encoder
}

// begin starts appending to b.
func (e *mpEncoder) begin(b []byte) { e.w.buf = b }

// end returns the buffer with what was appended since begin.
func (e *mpEncoder) end() []byte {
	b := e.w.buf
	e.w.buf = nil
	return b
}

func (e *mpEncoder) mapLen(n int)   { _ = e.enc.EncodeMapLen(n) }
func (e *mpEncoder) arrayLen(n int) { _ = e.enc.EncodeArrayLen(n) }
func (e *mpEncoder) str(s string)   { _ = e.enc.EncodeString(s) }

// mpKey is a field name as MessagePack, encoded once by the Encoder at
// start: a reply's keys are then appended, not encoded, per request.
type mpKey []byte

func newKey(name string) mpKey {
	var w mpWriter
	_ = msgpack.NewEncoder(&w).EncodeString(name)
	return w.buf
}

// The keys of the hot replies.
var (
	keyGranted              = newKey("granted")
	keyRemaining            = newKey("remaining")
	keyRetryAfterMs         = newKey("retry_after_ms")
	keyResetAfterMs         = newKey("reset_after_ms")
	keyTier                 = newKey("tier")
	keyTierLimit            = newKey("tier_limit")
	keyTierHits             = newKey("tier_hits")
	keyBurst                = newKey("burst")
	keyHardLimit            = newKey("hard_limit")
	keyGlobalLimit          = newKey("global_limit")
	keyDomainHitsLastSecond = newKey("domain_hits_last_second")
	keyGlobalHitsLastSecond = newKey("global_hits_last_second")
	keyLimitedByHard        = newKey("limited_by_hard")
	keyLimitedByGlobal      = newKey("limited_by_global")
	keyShadow               = newKey("shadow")
	keyLenient              = newKey("lenient")
)

func (e *mpEncoder) int(k mpKey, v int64) {
	e.w.buf = append(e.w.buf, k...)
	_ = e.enc.EncodeInt(v)
}

func (e *mpEncoder) bool(k mpKey, v bool) {
	e.w.buf = append(e.w.buf, k...)
	_ = e.enc.EncodeBool(v)
}

func (e *mpEncoder) intField(name string, v int64) {
	_ = e.enc.EncodeString(name)
	_ = e.enc.EncodeInt(v)
}

func (e *mpEncoder) boolField(name string, v bool) {
	_ = e.enc.EncodeString(name)
	_ = e.enc.EncodeBool(v)
}

func (e *mpEncoder) strField(name, v string) {
	_ = e.enc.EncodeString(name)
	_ = e.enc.EncodeString(v)
}

// decision encodes the reply of a rate decision: the fields of
// appendDecision, in its order.
func (e *mpEncoder) decision(d *local.Decision) {
	n := 5
	if d.Kind == config.KindTiers {
		n += 8
		if d.HardLimit != local.NoLimit {
			n++
		}
		if d.GlobalLimit != local.NoLimit {
			n++
		}
	}
	if d.Lenient {
		n++
	}
	e.mapLen(n)
	e.int(keyGranted, int64(d.Granted))
	e.int(keyRemaining, int64(d.Remaining))
	e.int(keyRetryAfterMs, retryMs(d.RetryAfter))
	e.int(keyResetAfterMs, ceilMs(d.ResetAfter))
	if d.Kind == config.KindTiers {
		e.int(keyTier, int64(d.Tier))
		e.int(keyTierLimit, int64(d.TierLimit))
		e.int(keyTierHits, int64(d.TierHits))
		e.bool(keyBurst, d.Burst)
		if d.HardLimit != local.NoLimit {
			e.int(keyHardLimit, int64(d.HardLimit))
		}
		if d.GlobalLimit != local.NoLimit {
			e.int(keyGlobalLimit, int64(d.GlobalLimit))
		}
		e.int(keyDomainHitsLastSecond, int64(d.DomainHitsLastSecond))
		e.int(keyGlobalHitsLastSecond, int64(d.GlobalHitsLastSecond))
		e.bool(keyLimitedByHard, d.LimitedByHard)
		e.bool(keyLimitedByGlobal, d.LimitedByGlobal)
	}
	e.bool(keyShadow, d.Shadow)
	if d.Lenient {
		e.bool(keyLenient, true)
	}
}

// errorObject encodes {"error": {"code", "message"}}. A message that is not
// valid UTF-8 (it may quote raw input) has its bad bytes replaced by U+FFFD,
// as the JSON replies do.
func (e *mpEncoder) errorObject(code, msg string) {
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	e.mapLen(1)
	e.str("error")
	e.mapLen(2)
	e.strField("code", code)
	e.strField("message", msg)
}

// reservation encodes the reply of a reserve: the fields of
// appendReservation, in its order.
func (e *mpEncoder) reservation(r *local.Reservation) {
	n := 4
	if r.DomainLimit != local.NoLimit {
		n++
	}
	if r.GlobalLimit != local.NoLimit {
		n++
	}
	if r.Hold != "" {
		n++
	}
	if r.Shadow {
		n++
	}
	if r.Lenient {
		n++
	}
	e.mapLen(n)
	e.intField("granted", int64(r.Granted))
	if r.Hold != "" {
		e.strField("hold", r.Hold)
	}
	if r.DomainLimit != local.NoLimit {
		e.intField("domain_limit", int64(r.DomainLimit))
	}
	if r.GlobalLimit != local.NoLimit {
		e.intField("global_limit", int64(r.GlobalLimit))
	}
	e.intField("domain_holds", int64(r.DomainHolds))
	e.intField("global_holds", int64(r.GlobalHolds))
	e.str("groups")
	e.arrayLen(len(r.Groups))
	for _, g := range r.Groups {
		if g.Limit != local.NoLimit {
			e.mapLen(3)
			e.strField("name", g.Name)
			e.intField("limit", int64(g.Limit))
		} else {
			e.mapLen(2)
			e.strField("name", g.Name)
		}
		e.intField("holds", int64(g.Holds))
	}
	if r.Shadow {
		e.boolField("shadow", true)
	}
	if r.Lenient {
		e.boolField("lenient", true)
	}
}

// seized encodes the reply of a seize (see appendSeized).
func (e *mpEncoder) seized(s *local.Seized) {
	e.mapLen(5)
	e.strField("hold", s.Hold)
	e.strField("resource", s.Resource)
	e.strField("domain", s.Domain)
	e.str("groups")
	e.arrayLen(len(s.Groups))
	for _, g := range s.Groups {
		e.str(g)
	}
	e.intField("copies", int64(s.Copies))
}

// json encodes the JSON value data as the same value in MessagePack: objects
// become maps (keys in their order), integers integers, other numbers
// float64. It is for replies rendered as JSON off the hot path (a
// normalized config, the operations endpoints).
func (e *mpEncoder) json(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := e.jsonValue(dec, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("transcoding JSON: data after the value")
	}
	return nil
}

// jsonValue transcodes the next JSON value of dec. A map's length comes
// first in MessagePack, so an object or array is read whole (as raw
// members) before it is written.
func (e *mpEncoder) jsonValue(dec *json.Decoder, depth int) error {
	if depth > 64 {
		return fmt.Errorf("transcoding JSON: nested deeper than 64 levels")
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("transcoding JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		var members []json.RawMessage
		var names []string
		object := t == '{'
		for dec.More() {
			if object {
				k, err := dec.Token()
				if err != nil {
					return fmt.Errorf("transcoding JSON: %w", err)
				}
				names = append(names, k.(string))
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fmt.Errorf("transcoding JSON: %w", err)
			}
			members = append(members, raw)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return fmt.Errorf("transcoding JSON: %w", err)
		}
		if object {
			e.mapLen(len(members))
		} else {
			e.arrayLen(len(members))
		}
		for i, raw := range members {
			if object {
				e.str(names[i])
			}
			sub := json.NewDecoder(bytes.NewReader(raw))
			sub.UseNumber()
			if err := e.jsonValue(sub, depth+1); err != nil {
				return err
			}
		}
	case json.Number:
		if v, err := t.Int64(); err == nil {
			_ = e.enc.EncodeInt(v)
		} else if f, err := t.Float64(); err == nil {
			_ = e.enc.EncodeFloat64(f)
		} else {
			return fmt.Errorf("transcoding JSON: number %s: %w", t, err)
		}
	case string:
		e.str(t)
	case bool:
		_ = e.enc.EncodeBool(t)
	case nil:
		_ = e.enc.EncodeNil()
	}
	return nil
}

// mpPool holds codecs for the replies written without a request's pooled
// state (errors, transcoded replies).
var mpPool = sync.Pool{New: func() any { return newMPCodec() }}

// appendErrorMsgpack appends the MessagePack error object to b.
func appendErrorMsgpack(b []byte, code, msg string) []byte {
	c := mpPool.Get().(*mpCodec)
	c.e.begin(b)
	c.e.errorObject(code, msg)
	b = c.e.end()
	mpPool.Put(c)
	return b
}

// transcodeReply rewrites a JSON reply as MessagePack when the request
// asked for MessagePack (Accept). The hot handlers write MessagePack
// themselves; this is for the handlers that render JSON only (the
// operations endpoints), so that every reply honours Accept. Replies of any
// other type (text, HTML, no body) are left alone. A reply that cannot be
// transcoded (a bug) becomes a 500.
func (s *Server) transcodeReply(ctx *fasthttp.RequestCtx) {
	resp := &ctx.Response
	// (Body last: it would read a body stream into a buffer.)
	if !bytes.Equal(resp.Header.ContentType(), []byte(contentTypeJSON)) || replyFormat(ctx) != formatMsgpack ||
		len(resp.Body()) == 0 {
		return
	}
	c := mpPool.Get().(*mpCodec)
	defer mpPool.Put(c)
	c.e.begin(nil)
	err := c.e.json(resp.Body())
	out := c.e.end()
	if err != nil {
		s.fail(ctx, err)
		return
	}
	resp.SetBodyRaw(out)
	resp.Header.SetContentType(contentTypeMsgpack)
}
