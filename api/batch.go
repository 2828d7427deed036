package api

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// maxBatch is the most requests one /v1/batch carries (413 above). The body
// limit stays 64 KiB: 1000 small requests (about 60 bytes each) fit; a
// client with longer names splits its batch.
const maxBatch = 1000

// batchItem is one decoded request of a batch: its fields, or the error
// that refuses it alone. resource and domain alias the request body (or the
// strings unescaped from it) and are valid while the request is served.
type batchItem struct {
	resource, domain  []byte
	limit             []byte // the limit the item sets, as JSON (nil: none)
	copies, minCopies int
	err               error
	series            *resMetrics // the series its decision was counted in
}

// batchState is the pooled state of one /v1/batch: the decoded items, the
// item decoder (with the strings it unescapes: those of every item stay
// valid) and the reply buffer. Reused, it makes a batch allocate nothing per
// item.
type batchState struct {
	items []batchItem
	body  wireBody
	out   []byte
	rd    bytes.Reader // reads out, as the reply's body stream
}

var batchPool = sync.Pool{New: func() any { return new(batchState) }}

func getBatch() *batchState { return batchPool.Get().(*batchState) }

// putBatch returns st to the pool, without its references to the request
// and without buffers grown past what a full batch of small items needs.
func putBatch(st *batchState) {
	clear(st.items)
	st.items = st.items[:0]
	st.body.reset()
	if cap(st.out) > 1<<20 {
		st.out = nil
	}
	if cap(st.body.unescaped) > maxBody {
		st.body.unescaped = nil
	}
	st.out = st.out[:0]
	batchPool.Put(st)
}

// A batchState is also the body stream of its reply (Read, WriteTo,
// Close): fasthttp copies the reply straight from the pooled buffer to the
// connection and closes the stream once it is written (or dropped), which
// puts the state back in the pool. A reply set with SetBody would be copied
// into fasthttp's own pooled buffer, which drops buffers past the sizes it
// usually sees: a batch's reply, next to the small replies of /v1/request,
// would then cost a new buffer every time.
var _ interface {
	io.Reader
	io.WriterTo
	io.Closer
} = (*batchState)(nil)

func (st *batchState) Read(p []byte) (int, error)         { return st.rd.Read(p) }
func (st *batchState) WriteTo(w io.Writer) (int64, error) { return st.rd.WriteTo(w) }

// Close puts st back in the pool; fasthttp calls it once.
func (st *batchState) Close() error {
	st.rd.Reset(nil)
	putBatch(st)
	return nil
}

// decode reads a /v1/batch body, {"requests": [<request>, ...]}, in format
// f into st.items. An item is read with the fields, defaults and checks of
// /v1/request; an item that breaks them is kept as its error
// ("requests[3].copies: ...") and the others are still read. The error
// returned is the batch's own: a body that is not well-formed JSON or
// MessagePack, not a map of "requests" (required, an array), or more than
// maxBatch items (413 too_large).
func (st *batchState) decode(data []byte, f format) error {
	if f == formatMsgpack {
		return st.read(st.body.mpReader(data))
	}
	// What is unescaped is no longer than it was in the body: unescaped
	// never grows while the items are read.
	if cap(st.body.unescaped) < len(data) {
		st.body.unescaped = make([]byte, 0, len(data))
	}
	return st.read(st.body.jsonReader(data))
}

func (st *batchState) read(r wire.Reader) error {
	seen := false
	if !r.Empty() {
		if err := r.Object("body"); err != nil {
			return err
		}
		for {
			k, ok, err := r.Key("body", &st.body.unescaped)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if string(k) != "requests" {
				return &fieldError{Field: wire.Snippet(k), Msg: "unknown field; expected requests"}
			}
			if seen {
				return &fieldError{Field: "requests", Msg: "given twice"}
			}
			seen = true
			if err := st.readItems(r); err != nil {
				return err
			}
		}
		if err := r.End(); err != nil {
			return err
		}
	}
	if !seen {
		return &fieldError{Field: "requests", Msg: "required field is missing"}
	}
	return nil
}

func (st *batchState) readItems(r wire.Reader) error {
	b := &st.body
	return readRequests(r, maxBatch, func(n int) error {
		if n < 0 {
			return tooLarge("requests: more than %d requests; split the batch", maxBatch)
		}
		return tooLarge("requests: %d requests is more than %d; split the batch", n, maxBatch)
	}, func(i int) error {
		at := r.Mark()
		b.clear()
		err := readFields(r, b, "", requestFields)
		if err == nil {
			err = b.check(fResource | fDomain)
		}
		if err != nil {
			// The item is refused alone, but the body must still be
			// well-formed: step over the item again, checking it.
			if serr := r.SkipFrom(at, "requests"); serr != nil {
				return serr
			}
			st.items = append(st.items, batchItem{err: itemError(err, i)})
			return nil
		}
		copies, minCopies := b.counts()
		st.items = append(st.items, batchItem{resource: b.resource, domain: b.domain, limit: b.limit, copies: copies, minCopies: minCopies})
		return nil
	})
}

// POST /v1/batch {"requests": [<request>, ...]} → {"responses": [<reply>,
// ...]}: each request, with the fields of /v1/request, decided alone and in
// order as if sent alone (each at the clock's reading when its turn comes),
// its reply the reply of /v1/request or {"error": {"code", "message"}}.
// An item's error does not fail the batch; the batch fails (400) only when
// its body is malformed, and is 413 too_large over maxBatch items or over
// the 64 KiB body limit. Zero items get an empty list. JSON or MessagePack,
// both ways.
//
// The whole body is read before the first decision, so that a body found
// malformed halfway spends nothing. The items, the Decision and the reply
// buffer are pooled, and the reply is streamed from that buffer: a batch
// allocates nothing, per item or at all. Each decision is
// counted in the metrics like one of /v1/request, its duration the batch's
// time shared among its items.
func (s *Server) batch(ctx *fasthttp.RequestCtx, _ params) {
	start := time.Now()
	st := getBatch()
	body, bf, err := readBody(ctx)
	if err == nil {
		err = st.decode(body, bf)
	}
	if err != nil {
		putBatch(st)
		s.fail(ctx, err)
		return
	}
	f := replyFormat(ctx)
	w := replies.NewWriter(f)
	out := w.Object(st.out[:0], 1)
	out = w.Array(w.First(out, replies.KeyResponses), len(st.items))
	g := s.gen.Load()
	var d local.Decision
	for i := range st.items {
		it := &st.items[i]
		if it.err == nil {
			var resource string
			var rm *resMetrics
			resource, rm, it.err = s.limited(g, it.resource, it.limit)
			now := s.now()
			if it.err == nil {
				it.err = g.engine.Decide(&d, now, resource, string(it.domain), it.copies, it.minCopies)
			}
			if it.err == nil {
				it.series = g.countIn(rm, resource, it.domain, it.copies, &d, now)
			}
		}
		out = w.Next(out, i)
		if it.err != nil {
			code, msg := s.itemError(ctx, it.err, i)
			out = replies.AppendError(w, out, code, msg)
			continue
		}
		out = writeDecision(w, out, &d)
	}
	st.out = w.End(w.EndArray(out))
	if len(st.items) > 0 {
		// Each decision takes its share of the batch's time.
		took := (time.Since(start) / time.Duration(len(st.items))).Seconds()
		for i := range st.items {
			if rm := st.items[i].series; rm != nil {
				rm.latency.Observe(took)
			}
		}
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentTypes[f])
	st.rd.Reset(st.out)
	ctx.Response.SetBodyStream(st, len(st.out)) // st is fasthttp's to close now
}

// itemError returns the code and message of a batch item's error. An error
// that is not a client error (a bug) is logged with a request id, which the
// item's message carries; the other items are still decided.
func (s *Server) itemError(ctx *fasthttp.RequestCtx, err error, i int) (code, msg string) {
	_, code, msg, ok := classify(err)
	if !ok {
		msg = s.internal(ctx, fmt.Errorf("batch item %d: %w", i, err))
	}
	return code, msg
}
