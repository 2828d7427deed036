package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/bits"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"github.com/vmihailenco/msgpack/v5"
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
	}{{bit: fCopies, v: b.copies, lo: 0, hi: maxCopies}, {bit: fMinCopies, v: b.minCopies, lo: 0, hi: maxCopies}, {bit: fTTL, v: b.ttlMs, lo: 1, hi: maxTTLms}, {bit: fAtMs, v: b.atMs, lo: 0, hi: maxAtMs}} {
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
	if b.has(fSettle) {
		if v, ok := m["settle"].(bool); !ok || v != b.settle {
			t.Fatalf("settle decoded as %v, the reference decoder reads %v", b.settle, m["settle"])
		}
	}
	checkLimit(t, b, m["limit"])
}

// checkLimit checks the limit b decoded (JSON) against the reference
// decoder's reading of it, ref: the same object.
func checkLimit(t *testing.T, b *wireBody, ref any) {
	t.Helper()
	if !b.has(fLimit) {
		return
	}
	var got any
	d := json.NewDecoder(bytes.NewReader(b.limit))
	d.UseNumber()
	if err := d.Decode(&got); err != nil {
		t.Fatalf("limit decoded as %q, which is not JSON: %v", b.limit, err)
	}
	if _, ok := got.(map[string]any); !ok {
		t.Fatalf("limit accepted as %q, not an object", b.limit)
	}
	if gj, rj := fmt.Sprint(normalizeJSON(got)), fmt.Sprint(normalizeJSON(ref)); gj != rj {
		t.Fatalf("limit decoded as %s, the reference decoder reads %s", gj, rj)
	}
}

// normalizeJSON is normalize with every number a float64 and byte
// strings strings, for comparing what two decoders read.
func normalizeJSON(v any) any {
	switch v := normalize(v).(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = normalizeJSON(x)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = normalizeJSON(x)
		}
		return v
	case int64:
		return float64(v)
	case []byte:
		return string(v)
	default:
		return v
	}
}

// clientError reports whether err is what a body's decoder may refuse
// with: a 400 bad_request, or bad_limit for the limit's own value.
func clientError(err error) bool {
	status, code, msg, ok := classify(err)
	return ok && status == 400 && (code == codeBadRequest || code == codeBadLimit) && msg != ""
}

func fuzzBody(f *testing.F, allowed, required fieldSet) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var b wireBody
		err := b.decode(data, allowed, required)
		if err != nil {
			if !clientError(err) {
				status, code, _, ok := classify(err)
				t.Fatalf("decode error %v classifies as %d %s %v", err, status, code, ok)
			}
			return
		}
		checkBody(t, data, &b, required)
	})
}

func FuzzDecodeRequest(f *testing.F)  { fuzzBody(f, requestSettleFields, fResource|fDomain) }
func FuzzDecodeSettle(f *testing.F)   { fuzzBody(f, settleFields, settleFields) }
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
			if i > 0 && it.AtMs < sb.requests[i-1].AtMs {
				t.Fatalf("at_ms goes back at %d", i)
			}
			if it.Domain == "" || len(it.Domain) > maxName || !utf8.ValidString(it.Domain) {
				t.Fatalf("domain %q accepted", it.Domain)
			}
			if it.MinCopies > it.Copies || it.Copies < 0 || it.Copies > maxCopies {
				t.Fatalf("copies %d, min_copies %d accepted", it.Copies, it.MinCopies)
			}
			if it.Refund && (sb.firstRefund < 0 || sb.firstRefund > i) {
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

// FuzzDecodeRequestMsgpack checks the MessagePack reader of /v1/request
// bodies: it never panics, refuses with a 400 naming something, and what it
// accepts the library's own decoder reads to the same values.
func FuzzDecodeRequestMsgpack(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var b wireBody
		err := b.decodeMsgpack(data, requestSettleFields, fResource|fDomain)
		if err != nil {
			if !clientError(err) {
				status, code, _, ok := classify(err)
				t.Fatalf("decode error %v classifies as %d %s %v", err, status, code, ok)
			}
			return
		}
		checkMsgpackItem(t, data, &b)
	})
}

// checkMsgpackItem checks a /v1/request body the MessagePack reader
// accepted into b against msgpack.Unmarshal's reading of data.
func checkMsgpackItem(t *testing.T, data []byte, b *wireBody) {
	t.Helper()
	if !b.has(fResource) || !b.has(fDomain) {
		t.Fatalf("accepted without resource or domain: %q", data)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(data, &m); err != nil {
		t.Fatalf("accepted a body msgpack.Unmarshal refuses (%v): %q", err, data)
	}
	for k, v := range map[string][]byte{"resource": b.resource, "domain": b.domain} {
		if len(v) == 0 || len(v) > maxName || !utf8.Valid(v) {
			t.Fatalf("%s accepted as %q", k, v)
		}
		if m[k] != string(v) {
			t.Fatalf("%s decoded as %q, msgpack.Unmarshal reads %v", k, v, m[k])
		}
	}
	for k, f := range map[string]fieldSet{"copies": fCopies, "min_copies": fMinCopies} {
		if !b.has(f) {
			if _, ok := m[k]; ok {
				t.Fatalf("%s given but not decoded", k)
			}
			continue
		}
		v := b.copies
		if f == fMinCopies {
			v = b.minCopies
		}
		if v < 0 || v > maxCopies {
			t.Fatalf("%s accepted out of range: %d", k, v)
		}
		if got, ok := normalize(m[k]).(int64); ok && got != v {
			t.Fatalf("%s decoded as %d, msgpack.Unmarshal reads %v", k, v, m[k])
		} else if fl, isFloat := normalize(m[k]).(float64); !ok && (!isFloat || fl != float64(v)) {
			t.Fatalf("%s decoded as %d from %v (%T)", k, v, m[k], m[k])
		}
	}
	if len(m) != bits.OnesCount32(uint32(b.seen)) {
		t.Fatalf("decoded fields %s, msgpack.Unmarshal reads %v", b.seen.list(), m)
	}
	if c, mc := b.counts(); mc > c {
		t.Fatalf("accepted min_copies %d > copies %d", mc, c)
	}
	if b.has(fSettle) {
		if v, ok := m["settle"].(bool); !ok || v != b.settle {
			t.Fatalf("settle decoded as %v, the reference decoder reads %v", b.settle, m["settle"])
		}
	}
	checkLimit(t, b, m["limit"])
}

// checkBatch checks what a batch decoder made of data: an error is a client
// error; a batch has at most maxBatch items, each a checked request or a
// client error naming its index; n, when known, is the number of items.
func checkBatch(t *testing.T, st *batchState, err error, n int) {
	t.Helper()
	if err != nil {
		status, _, msg, ok := classify(err)
		if !ok || (status != 400 && status != 413) || msg == "" {
			t.Fatalf("batch error %v is not a client error (%d)", err, status)
		}
		return
	}
	if len(st.items) > maxBatch || (n >= 0 && len(st.items) != n) {
		t.Fatalf("%d items, want %d (at most %d)", len(st.items), n, maxBatch)
	}
	for i, it := range st.items {
		if it.err != nil {
			status, code, msg, ok := classify(it.err)
			if !ok || status != 400 || (code != codeBadRequest && code != codeBadLimit) || !strings.Contains(msg, fmt.Sprintf("requests[%d]", i)) {
				t.Fatalf("item %d error %v (%d %s)", i, it.err, status, code)
			}
			continue
		}
		for _, v := range [][]byte{it.resource, it.domain} {
			if len(v) == 0 || len(v) > maxName || !utf8.Valid(v) {
				t.Fatalf("item %d: name %q accepted", i, v)
			}
		}
		if it.copies < 0 || it.copies > maxCopies || it.minCopies < 0 || it.minCopies > it.copies {
			t.Fatalf("item %d: copies %d, min_copies %d accepted", i, it.copies, it.minCopies)
		}
	}
}

// FuzzDecodeBatch checks the JSON reader of /v1/batch: no panic, client
// errors only, and a batch it accepts is JSON whose requests array has as
// many elements as it made items, each item decoded as /v1/request would.
func FuzzDecodeBatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		st := getBatch()
		defer putBatch(st)
		err := st.decode(data, formatJSON)
		n := -1
		if err == nil {
			var env struct {
				Requests []json.RawMessage `json:"requests"`
			}
			if uerr := json.Unmarshal(data, &env); uerr != nil || !json.Valid(data) {
				t.Fatalf("accepted a body encoding/json refuses (%v): %q", uerr, data)
			}
			n = len(env.Requests)
			for i, raw := range env.Requests {
				var b wireBody
				ierr := b.decode(raw, requestFields, fResource|fDomain)
				if (ierr == nil) != (st.items[i].err == nil) {
					t.Fatalf("item %d %s: alone %v, in the batch %v", i, raw, ierr, st.items[i].err)
				}
				if ierr == nil && (string(b.resource) != string(st.items[i].resource) || string(b.domain) != string(st.items[i].domain)) {
					t.Fatalf("item %d %s: alone %q %q, in the batch %q %q", i, raw, b.resource, b.domain, st.items[i].resource, st.items[i].domain)
				}
			}
		}
		checkBatch(t, st, err, n)
	})
}

// FuzzDecodeBatchMsgpack is FuzzDecodeBatch for MessagePack bodies.
func FuzzDecodeBatchMsgpack(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		st := getBatch()
		defer putBatch(st)
		err := st.decode(data, formatMsgpack)
		n := -1
		if err == nil && len(data) > 0 {
			var env struct {
				Requests []msgpack.RawMessage `msgpack:"requests"`
			}
			if uerr := msgpack.Unmarshal(data, &env); uerr != nil {
				t.Fatalf("accepted a body msgpack.Unmarshal refuses (%v): %q", uerr, data)
			}
			n = len(env.Requests)
			for i, raw := range env.Requests {
				var b wireBody
				ierr := b.decodeMsgpack(raw, requestFields, fResource|fDomain)
				if (ierr == nil) != (st.items[i].err == nil) {
					t.Fatalf("item %d %q: alone %v, in the batch %v", i, raw, ierr, st.items[i].err)
				}
				if ierr == nil {
					checkMsgpackItem(t, raw, &b)
				}
			}
		}
		checkBatch(t, st, err, n)
	})
}

// FuzzDecodeSimulateMsgpack checks the MessagePack reader of /v1/simulate:
// no panic, client errors only, and an accepted resource config is a JSON
// object (what the config parser is given).
func FuzzDecodeSimulateMsgpack(f *testing.F) {
	for _, v := range []any{
		map[string]any{"resource": map[string]any{"kind": "gcra", "burst": 20, "count": 20, "period": "1s"},
			"requests": []any{map[string]any{"at_ms": 0, "domain": "d"}, map[string]any{"at_ms": 5, "domain": "d", "op": "refund"}}},
		map[string]any{"resource": map[string]any{"kind": "tiers", "tiers": []any{map[string]any{"limit": 5, "window": "1s"}}, "x": []any{1.5, nil, true, -3}},
			"requests": []any{}},
		map[string]any{"resource": map[string]any{"kind": []byte("gcra")}, "requests": []any{}},
		map[string]any{"resource": "gcra", "requests": []any{7}},
	} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sb, err := decodeSimulateMsgpack(data)
		if err != nil {
			if _, _, msg, ok := classify(err); !ok || msg == "" {
				t.Fatalf("decode error %v is not a client error", err)
			}
			return
		}
		if !json.Valid(sb.resource) || sb.resource[0] != '{' {
			t.Fatalf("resource is not a JSON object: %q", sb.resource)
		}
		for i, it := range sb.requests {
			if (i > 0 && it.AtMs < sb.requests[i-1].AtMs) || it.Domain == "" || it.MinCopies > it.Copies {
				t.Fatalf("request %d accepted: %+v", i, it)
			}
		}
	})
}
