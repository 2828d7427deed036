package api

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/wire/replies"
)

// Limits of the wire format.
const (
	// maxBody is the body limit of every endpoint but /v1/simulate.
	maxBody = 64 << 10
	// maxSimulateBody is the body limit of /v1/simulate, which carries up
	// to maxSimRequests requests.
	maxSimulateBody = 16 << 20
	// maxName is the longest resource, domain or id, in bytes: the
	// config's limit on resource names.
	maxName = config.MaxNameLen
	// maxCopies bounds copies and min_copies.
	maxCopies = 1_000_000_000
	// maxTTLms bounds ttl_ms (24 h).
	maxTTLms = 24 * 60 * 60 * 1000
	// defaultTTLms is the ttl_ms of a session or transfer that gives none.
	defaultTTLms = 30_000
	// maxAtMs bounds a simulated request's at_ms (about 31 years).
	maxAtMs = 1_000_000_000_000
)

const (
	contentTypeJSON    = "application/json"
	contentTypeMsgpack = "application/msgpack"
)

// simulatePath is the one endpoint whose body may be over maxBody.
const simulatePath = "/v1/simulate"

// bodyLimit returns the body limit of the endpoint at path.
func bodyLimit(path []byte) int {
	if string(path) == simulatePath {
		return maxSimulateBody
	}
	return maxBody
}

// headerReceived is the fasthttp HeaderReceived hook: it applies the body
// limit of the endpoint before the body is read, so that an oversized body
// is refused (413 too_large, by errorHandler) without being read.
func headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	uri := h.RequestURI()
	if len(uri) > 0 && uri[0] == '/' && !bytes.HasPrefix(uri, []byte(simulatePath)) {
		// The usual origin form, whose path cannot be /v1/simulate.
		return fasthttp.RequestConfig{MaxRequestBodySize: maxBody}
	}
	if i := bytes.Index(uri, []byte("://")); i >= 0 && bytes.IndexByte(uri[:i], '/') < 0 {
		// absolute form, http://host/path: keep the path
		rest := uri[i+3:]
		if j := bytes.IndexByte(rest, '/'); j >= 0 {
			uri = rest[j:]
		}
	}
	if i := bytes.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: bodyLimit(uri)}
}

// headerReceived is headerReceived, plus: while a simulation runs, another
// simulation's body is held to the 64 KiB of every other endpoint, so that a
// client looping on large simulations cannot make the agent read megabytes
// only to refuse them (413 too_large, saying why).
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	rc := headerReceived(h)
	if rc.MaxRequestBodySize == maxSimulateBody && s.sim.busy.Load() {
		rc.MaxRequestBodySize = maxBody
	}
	return rc
}

// format is the encoding of a body or a reply.
type format = replies.Format

const (
	formatJSON    = replies.JSON    // application/json, the default
	formatMsgpack = replies.Msgpack // application/msgpack (or application/x-msgpack)
)

// contentTypes are the Content-Type of a reply in each format.
var contentTypes = [...]string{formatJSON: contentTypeJSON, formatMsgpack: contentTypeMsgpack}

// bodyFormat returns the format of ctx's body: MessagePack when its
// Content-Type is application/msgpack (or application/x-msgpack), with any
// parameters, else JSON (whatever else the Content-Type says, or none).
func bodyFormat(ctx *fasthttp.RequestCtx) format {
	if isMsgpackType(ctx.Request.Header.ContentType()) {
		return formatMsgpack
	}
	return formatJSON
}

// isMsgpackType reports whether the media type mt (parameters allowed) is
// application/msgpack or application/x-msgpack, in any case.
func isMsgpackType(mt []byte) bool {
	if len(mt) < len("application/msgpack") {
		return false
	}
	if i := bytes.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	mt = bytes.TrimSpace(mt)
	return bytes.EqualFold(mt, []byte(contentTypeMsgpack)) || bytes.EqualFold(mt, []byte("application/x-msgpack"))
}

// replyFormat returns the format ctx's reply is written in: MessagePack when
// the Accept header lists application/msgpack (or application/x-msgpack)
// with a q above 0 and not below application/json's (on a tie, the one
// listed first wins), else JSON. Wildcards choose nothing: JSON.
func replyFormat(ctx *fasthttp.RequestCtx) format {
	accept := ctx.Request.Header.PeekCanonical(hdrAccept)
	if len(accept) == 0 || bytes.Index(accept, []byte("msgpack")) < 0 {
		return formatJSON
	}
	return acceptFormat(accept)
}

// hdrAccept is the Accept header's name as fasthttp stores it (normalized),
// so that looking it up costs no normalization.
var hdrAccept = []byte(fasthttp.HeaderAccept)

// acceptFormat chooses a reply format from an Accept header that mentions
// msgpack (see replyFormat).
func acceptFormat(accept []byte) format {
	mpQ, jsonQ := -1, -1 // q in thousandths; -1 when not listed
	mpFirst := false
	for len(accept) > 0 {
		var part []byte
		part, accept, _ = bytes.Cut(accept, []byte(","))
		mt, params, _ := bytes.Cut(part, []byte(";"))
		q := 1000
		for len(params) > 0 {
			var p []byte
			p, params, _ = bytes.Cut(params, []byte(";"))
			k, v, ok := bytes.Cut(bytes.TrimSpace(p), []byte("="))
			if ok && bytes.EqualFold(bytes.TrimSpace(k), []byte("q")) {
				q = parseQ(bytes.TrimSpace(v))
			}
		}
		switch {
		case isMsgpackType(mt):
			if mpQ < 0 {
				mpFirst = jsonQ < 0
			}
			mpQ = max(mpQ, q)
		case bytes.EqualFold(bytes.TrimSpace(mt), []byte(contentTypeJSON)):
			jsonQ = max(jsonQ, q)
		}
	}
	if mpQ > 0 && (mpQ > jsonQ || (mpQ == jsonQ && mpFirst)) {
		return formatMsgpack
	}
	return formatJSON
}

// parseQ parses a q value ("0", "0.5", "1.000") into thousandths; a
// malformed one counts as 0.
func parseQ(v []byte) int {
	if len(v) == 0 || len(v) > 5 || (v[0] != '0' && v[0] != '1') {
		return 0
	}
	q := int(v[0]-'0') * 1000
	if len(v) > 1 {
		if v[1] != '.' {
			return 0
		}
		scale := 100
		for _, c := range v[2:] {
			if c < '0' || c > '9' {
				return 0
			}
			q += int(c-'0') * scale
			scale /= 10
		}
	}
	return min(q, 1000)
}

// readBody returns the body of ctx, checked against its endpoint's limit,
// and its format. It is the one place that chooses a decoder by
// Content-Type.
func readBody(ctx *fasthttp.RequestCtx) ([]byte, format, error) {
	body := ctx.PostBody()
	if limit := bodyLimit(ctx.Path()); len(body) > limit {
		return nil, 0, tooLarge("body: %d bytes is over the limit of %d bytes", len(body), limit)
	}
	return body, bodyFormat(ctx), nil
}

// decodeBody reads ctx's body, JSON or MessagePack by its Content-Type, into
// c.body, with the allowed and required fields. It writes the error reply
// and returns false when the body is bad.
func (s *Server) decodeBody(ctx *fasthttp.RequestCtx, c *call, allowed, required fieldSet) bool {
	body, f, err := readBody(ctx)
	if err == nil {
		err = c.body.decodeIn(f, body, allowed, required)
	}
	if err != nil {
		s.fail(ctx, err)
		return false
	}
	return true
}

// open begins a handler of a request with a body: a pooled call holding
// the body decoded as decodeBody does, and the generation it is read
// against. When the body is refused, ok is false: the error reply is
// written and the call is back in its pool. The caller defers putCall(c).
func (s *Server) open(ctx *fasthttp.RequestCtx, allowed, required fieldSet) (c *call, g *generation, ok bool) {
	c = getCall()
	if !s.decodeBody(ctx, c, allowed, required) {
		putCall(c)
		return nil, nil, false
	}
	return c, s.gen.Load(), true
}

// writeReply writes a 200 reply, out, in format f; out is copied.
func writeReply(ctx *fasthttp.RequestCtx, f format, out []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentTypes[f])
	ctx.SetBody(out)
}
