package api

import (
	"fmt"
	"runtime"
	"unicode/utf8"

	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/internal/wire/jsonwire"
	"github.com/obol-dev/obol/internal/wire/mpwire"
	"github.com/obol-dev/obol/sim"
)

// Every request body is read by one function over a wire.Reader, whatever
// its format: *jsonwire.Lexer for JSON, *mpwire.Reader for MessagePack (a
// map with the JSON field names), strict in the same way and with the same
// messages. A wireBody holds one of each; jsonReader and mpReader aim them
// at a body.

// decodeIn reads data, in format f, into b (reset): an object of the
// allowed fields, or nothing (which reads as an empty object). Required
// fields must be present.
func (b *wireBody) decodeIn(f format, data []byte, allowed, required fieldSet) error {
	if f == formatMsgpack {
		return b.decodeMsgpack(data, allowed, required)
	}
	return b.decode(data, allowed, required)
}

// decode is decodeIn for a JSON body.
func (b *wireBody) decode(data []byte, allowed, required fieldSet) error {
	return decodeFields(b.jsonReader(data), b, allowed, required)
}

// decodeMsgpack is decodeIn for a MessagePack body.
func (b *wireBody) decodeMsgpack(data []byte, allowed, required fieldSet) error {
	return decodeFields(b.mpReader(data), b, allowed, required)
}

// jsonReader returns b's JSON reader of data.
func (b *wireBody) jsonReader(data []byte) wire.Reader {
	b.lx.Reset(data)
	return &b.lx
}

// mpReader returns b's MessagePack reader of data.
func (b *wireBody) mpReader(data []byte) wire.Reader {
	b.mp.Reset(data)
	return &b.mp
}

// decodeFields reads a whole body at r into b: an object of the allowed
// fields, or nothing.
func decodeFields(r wire.Reader, b *wireBody, allowed, required fieldSet) error {
	if !r.Empty() {
		if err := readFields(r, b, "body", allowed); err != nil {
			return err
		}
		if err := r.End(); err != nil {
			return err
		}
	}
	return b.check(required)
}

// readFields reads one object of the allowed fields at r into b. where
// names the object in messages about the object itself ("body"); messages
// about a field name the field alone, and callers nesting objects prefix
// them.
func readFields(r wire.Reader, b *wireBody, where string, allowed fieldSet) error {
	if err := r.Object(where); err != nil {
		return err
	}
	for {
		key, ok, err := r.Key(where, &b.unescaped)
		if err != nil || !ok {
			return err
		}
		f, err := b.field(key, allowed)
		if err != nil {
			return err
		}
		if f == fLimit {
			if b.limit, err = limitObject(r, &b.unescaped); err != nil {
				return err
			}
			continue
		}
		if f&boolFields != 0 {
			v, err := r.Boolean(f.name())
			if err != nil {
				return err
			}
			b.settle = v
			continue
		}
		if f&intFields != 0 {
			lo, hi := f.bounds()
			v, err := r.Integer(f.name(), lo, hi)
			if err != nil {
				return err
			}
			b.setInt(f, v)
			continue
		}
		s, ascii, err := r.Str(f.name(), &b.unescaped)
		if err == nil {
			err = b.setString(f, s, ascii)
		}
		if err != nil {
			return err
		}
	}
}

// readRequests reads the array "requests" at r, of at most max items: the
// items of /v1/batch and /v1/simulate, each read by item (i its index).
// Over max it is the error tooMany(n), n the array's length when the format
// says it first, else -1 (as soon as the element past max is found).
func readRequests(r wire.Reader, max int, tooMany func(n int) error, item func(i int) error) error {
	n, err := r.Array("requests")
	if err != nil {
		return err
	}
	if n > max {
		return tooMany(n)
	}
	for i := 0; ; i++ {
		more, err := r.Elem("requests")
		if err != nil || !more {
			return err
		}
		if i >= max {
			return tooMany(-1)
		}
		if i%sim.YieldEvery == sim.YieldEvery-1 {
			runtime.Gosched() // reading a long body is long work too: let decisions in
		}
		if err := item(i); err != nil {
			return err
		}
	}
}

// resourceConfig reads the value of field at r that is one resource's
// config, an object (a map), and returns it as JSON for the config parser:
// as it is in a JSON body, turned into JSON from MessagePack. Over
// maxSimResource bytes (as JSON) it is 413 too_large.
func resourceConfig(r wire.Reader, field string) ([]byte, error) {
	raw, asJSON, err := objectJSON(r, field, "one resource's config", nil)
	if err == nil && len(raw) > maxSimResource {
		err = tooLarge("%s: %d bytes of config%s is over the limit of %d for one simulated resource", field, len(raw), asJSON, maxSimResource)
	}
	return raw, err
}

// maxLimitJSON is the most bytes a request's limit takes as JSON: ten
// times what the longest limit a request may set needs.
const maxLimitJSON = 4096

// limitObject reads the value of the field limit at r, an object (a map),
// and returns it as JSON for config.ParseLimit: as it is in a JSON body,
// turned into JSON from MessagePack and kept in buf. A value that is not
// an object, or one over maxLimitJSON bytes, is 400 bad_limit.
func limitObject(r wire.Reader, buf *[]byte) ([]byte, error) {
	raw, asJSON, err := objectJSON(r, "limit", `a limit: {"kind": "gcra", "burst", "count", "period"} or {"kind": "tiers", "tiers"}`, buf)
	if wt, ok := err.(wrongType); ok { // a value of another type in a well-formed body
		err = limitFieldError{wt.fieldError}
	}
	switch {
	case err != nil:
	case len(raw) > maxLimitJSON:
		err = limitFieldError{&fieldError{Field: "limit", Msg: fmt.Sprintf("%d bytes%s, over the %d a limit may take", len(raw), asJSON, maxLimitJSON)}}
	case !utf8.Valid(raw):
		err = limitFieldError{&fieldError{Field: "limit", Msg: "must be valid UTF-8"}}
	}
	return raw, err
}

// limitFieldError is a refusal of the value of the field limit: 400
// bad_limit (classify), its field named like any field's (in a batch,
// requests[i].limit).
type limitFieldError struct{ *fieldError }

func (e limitFieldError) Unwrap() error { return e.fieldError }

// wrongType is objectJSON's refusal of a value that is not an object: a
// bad_request, which a caller may answer otherwise.
type wrongType struct{ *fieldError }

func (w wrongType) Unwrap() error { return w.fieldError }

// objectJSON reads the value of field at r, which must be an object (a
// map: what, in messages), and returns it as JSON: as it is in a JSON
// body, turned into JSON from MessagePack (appended to buf when it is not
// nil; asJSON then says so for messages).
func objectJSON(r wire.Reader, field, what string, buf *[]byte) (raw []byte, asJSON string, err error) {
	switch r := r.(type) {
	case *jsonwire.Lexer:
		r.WS()
		if !r.EOF() && r.B[r.I] != '{' && r.ValueStart() {
			return nil, "", wrongType{&fieldError{Field: field, Msg: "must be a JSON object (" + what + "), got " + r.Describe()}}
		}
		raw, err = r.SkipValue(field, 0)
	case *mpwire.Reader:
		if c, perr := r.Peek(); perr == nil && !mpwire.IsMap(c) {
			return nil, "", wrongType{&fieldError{Field: field, Msg: "must be a map (" + what + "), got " + r.Describe()}}
		}
		var dst []byte
		if buf != nil {
			dst = *buf
		}
		n := len(dst)
		dst, err = r.AppendJSON(dst, field, 0)
		if buf != nil {
			*buf = dst
		}
		raw, asJSON = dst[n:len(dst):len(dst)], " (as JSON)"
	}
	return raw, asJSON, err
}
