package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// The seed corpora are in testdata/fuzz/<FuzzName>/.

// checkBody checks what a wireBody decoder accepted: the body is valid JSON
// that encoding/json reads to the same values, every name is a valid one,
// every number in its range, and the required fields are there.
func checkBody(t *testing.T, data []byte, b *wireBody, required fieldSet) {
	t.Helper()
	if required&^b.seen != 0 {
		t.Fatalf("accepted without the required fields %s", (required &^ b.seen).list())
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&m); err != nil || d.More() {
		t.Fatalf("accepted a body encoding/json refuses (%v): %q", err, data)
	}
	for i, f := range []struct {
		bit fieldSet
		v   []byte
	}{{fResource, b.resource}, {fDomain, b.domain}, {fSession, b.session}, {fHold, b.hold}, {fTransfer, b.transfer}} {
		if !b.has(f.bit) {
			continue
		}
		if len(f.v) == 0 || len(f.v) > maxName || !utf8.Valid(f.v) {
			t.Fatalf("field %d accepted with %q", i, f.v)
		}
		if got := m[f.bit.first()]; got != string(f.v) {
			t.Fatalf("%s decoded as %q, encoding/json reads %q", f.bit.first(), f.v, got)
		}
	}
	for _, f := range []struct {
		bit    fieldSet
		v      int64
		lo, hi int64
	}{{fCopies, b.copies, 0, maxCopies}, {fMinCopies, b.minCopies, 0, maxCopies}, {fTTL, b.ttlMs, 1, maxTTLms}, {fAtMs, b.atMs, 0, maxAtMs}} {
		if !b.has(f.bit) {
			continue
		}
		if f.v < f.lo || f.v > f.hi {
			t.Fatalf("%s accepted out of range: %d", f.bit.first(), f.v)
		}
		n, ok := m[f.bit.first()].(json.Number)
		if !ok {
			t.Fatalf("%s accepted from a non-number %v", f.bit.first(), m[f.bit.first()])
		}
		if fl, err := n.Float64(); err != nil || fl != float64(f.v) {
			t.Fatalf("%s decoded as %d, encoding/json reads %s", f.bit.first(), f.v, n)
		}
	}
	if c, mc := b.counts(); mc > c {
		t.Fatalf("accepted min_copies %d > copies %d", mc, c)
	}
}

func fuzzBody(f *testing.F, allowed, required fieldSet) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var b wireBody
		err := b.decode(data, allowed, required)
		if err != nil {
			status, code, msg, ok := classify(err)
			if !ok || status != 400 || code != codeBadRequest || msg == "" {
				t.Fatalf("decode error %v classifies as %d %s %v", err, status, code, ok)
			}
			return
		}
		checkBody(t, data, &b, required)
	})
}

func FuzzDecodeRequest(f *testing.F)  { fuzzBody(f, requestFields, fResource|fDomain) }
func FuzzDecodeRefund(f *testing.F)   { fuzzBody(f, refundFields, fResource|fDomain) }
func FuzzDecodeReserve(f *testing.F)  { fuzzBody(f, reserveFields, fResource|fDomain|fSession) }
func FuzzDecodeRelease(f *testing.F)  { fuzzBody(f, releaseFields, fHold) }
func FuzzDecodeTransfer(f *testing.F) { fuzzBody(f, transferFields, fHold) }
func FuzzDecodeSeize(f *testing.F)    { fuzzBody(f, seizeFields, fTransfer|fSession) }
func FuzzDecodeSession(f *testing.F)  { fuzzBody(f, sessionFields, 0) }

func FuzzDecodeSimulate(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		sb, err := decodeSimulate(data)
		if err != nil {
			if _, _, msg, ok := classify(err); !ok || msg == "" {
				t.Fatalf("decode error %v is not a client error", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted a body that is not JSON: %q", data)
		}
		if !json.Valid(sb.resource) || sb.resource[0] != '{' {
			t.Fatalf("resource is not a JSON object: %q", sb.resource)
		}
		if len(sb.requests) > maxSimRequests {
			t.Fatalf("%d requests accepted", len(sb.requests))
		}
		for i, it := range sb.requests {
			if i > 0 && it.atMs < sb.requests[i-1].atMs {
				t.Fatalf("at_ms goes back at %d", i)
			}
			if it.domain == "" || len(it.domain) > maxName || !utf8.ValidString(it.domain) {
				t.Fatalf("domain %q accepted", it.domain)
			}
			if it.minCopies > it.copies || it.copies < 0 || it.copies > maxCopies {
				t.Fatalf("copies %d, min_copies %d accepted", it.copies, it.minCopies)
			}
			if it.refund && (sb.firstRefund < 0 || sb.firstRefund > i) {
				t.Fatalf("refund at %d, firstRefund %d", i, sb.firstRefund)
			}
		}
	})
}

func FuzzReadQuery(f *testing.F) {
	f.Fuzz(func(t *testing.T, query string) {
		var args fasthttp.Args
		args.Parse(query)
		var b wireBody
		if err := b.readQuery(&args, fResource|fDomain|fCopies); err != nil {
			if _, _, msg, ok := classify(err); !ok || msg == "" {
				t.Fatalf("query error %v is not a client error", err)
			}
			return
		}
		for _, v := range [][]byte{b.resource, b.domain} {
			if v != nil && (len(v) == 0 || len(v) > maxName || !utf8.Valid(v)) {
				t.Fatalf("name %q accepted", v)
			}
		}
		if b.has(fCopies) && (b.copies < 0 || b.copies > maxCopies) {
			t.Fatalf("copies %d accepted", b.copies)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		out := appendString([]byte("x"), s)[1:]
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("appendString(%q) = %s: %v", s, out, err)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("appendString(%q) decodes to %q", s, got)
		}
		if !utf8.ValidString(s) && got != strings.ToValidUTF8(s, "\ufffd") && !strings.Contains(got, "\ufffd") {
			t.Fatalf("appendString(%q) decodes to %q", s, got)
		}
	})
}
