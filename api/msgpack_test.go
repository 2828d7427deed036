package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Headers of a MessagePack exchange.
const (
	hdrSendMsgpack   = "Content-Type: application/msgpack"
	hdrAcceptMsgpack = "Accept: application/msgpack"
)

// mpBody encodes v (maps, slices, numbers, strings) as a request body.
func mpBody(t testing.TB, v any) string {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatalf("msgpack.Marshal(%v): %v", v, err)
	}
	return string(b)
}

// mpRaw builds a body with the library's streaming Encoder, for bodies that
// Marshal cannot make (duplicate keys, keys in a given order, odd types).
func mpRaw(t testing.TB, build func(e *msgpack.Encoder) error) string {
	t.Helper()
	var buf bytes.Buffer
	if err := build(msgpack.NewEncoder(&buf)); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// mpDecode decodes a MessagePack reply into plain values, integers as int64.
func mpDecode(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	d := msgpack.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&v); err != nil {
		t.Fatalf("reply is not MessagePack: %v: %q", err, b)
	}
	if d.Buffered().(*bytes.Reader).Len() != 0 {
		t.Fatalf("data after the MessagePack reply: %q", b)
	}
	return normalize(v)
}

// normalize maps decoded JSON (with UseNumber) or MessagePack to comparable
// values: every integer an int64, every map a map[string]any.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
		rv := reflect.ValueOf(x)
		if rv.CanInt() {
			return rv.Int()
		}
		return int64(rv.Uint())
	case float32:
		return float64(x)
	}
	return v
}

// jsonDecode decodes a JSON reply like mpDecode.
func jsonDecode(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("reply is not JSON: %v: %s", err, b)
	}
	return normalize(v)
}

// mpOK posts a MessagePack body asking for a MessagePack reply, requires a
// 200 in MessagePack and decodes it.
func (h *harness) mpOK(path string, body any) map[string]any {
	h.t.Helper()
	r := h.do("POST", path, mpBody(h.t, body), hdrSendMsgpack, hdrAcceptMsgpack)
	if r.status != 200 {
		h.t.Fatalf("POST %s %v (MessagePack): status %d, body %q", path, body, r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != contentTypeMsgpack {
		h.t.Fatalf("POST %s: Content-Type %q, want %s", path, ct, contentTypeMsgpack)
	}
	m, ok := mpDecode(h.t, r.body).(map[string]any)
	if !ok {
		h.t.Fatalf("POST %s: the reply is not a map: %q", path, r.body)
	}
	return m
}

// mpError decodes a MessagePack error reply's code and message.
func mpError(t testing.TB, r reply) (code, msg string) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != contentTypeMsgpack {
		t.Fatalf("error Content-Type %q, want %s; body %q", ct, contentTypeMsgpack, r.body)
	}
	var e struct {
		Error *struct {
			Code    string `msgpack:"code"`
			Message string `msgpack:"message"`
		} `msgpack:"error"`
	}
	if err := msgpack.Unmarshal(r.body, &e); err != nil || e.Error == nil {
		t.Fatalf("not a MessagePack error reply (%v): %q", err, r.body)
	}
	return e.Error.Code, e.Error.Message
}

func mpNum(t testing.TB, m map[string]any, k string) int64 {
	t.Helper()
	n, ok := m[k].(int64)
	if !ok {
		t.Fatalf("field %q is %v (%T), want an integer; reply %v", k, m[k], m[k], m)
	}
	return n
}

// mpKeys returns the keys of a MessagePack map, in order.
func mpKeys(t testing.TB, b []byte) []string {
	t.Helper()
	d := msgpack.NewDecoder(bytes.NewReader(b))
	n, err := d.DecodeMapLen()
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for range n {
		k, err := d.DecodeString()
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
		if err := d.Skip(); err != nil {
			t.Fatal(err)
		}
	}
	return ks
}

// jsonKeys returns the keys of a JSON object, in order.
func jsonKeys(t testing.TB, b []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if _, err := d.Token(); err != nil {
		t.Fatal(err)
	}
	var ks []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return ks
}

func TestMsgpackRequestReplies(t *testing.T) {
	h := newHarness(t)
	m := h.mpOK("/v1/request", map[string]any{"resource": "t/tiers", "domain": "u"})
	sameFields(t, m, tiersFields)
	want := map[string]any{
		"granted": int64(1), "remaining": int64(54), "retry_after_ms": int64(0), "reset_after_ms": int64(1000),
		"tier": int64(1), "tier_limit": int64(5), "tier_hits": int64(1), "hard_limit": int64(100),
		"domain_hits_last_second": int64(1), "global_hits_last_second": int64(1),
		"burst": true, "limited_by_hard": false, "limited_by_global": false, "shadow": false,
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("tiers reply %v, want %v", m, want)
	}

	m = h.mpOK("/v1/request", map[string]any{"resource": "t/gcra", "domain": "d", "copies": 5, "min_copies": 2})
	sameFields(t, m, gcraFields)
	if mpNum(t, m, "granted") != 5 || mpNum(t, m, "remaining") != 15 {
		t.Errorf("gcra reply %v", m)
	}
	// Never: -1 is a negative MessagePack integer.
	if m := h.mpOK("/v1/request", map[string]any{"resource": "t/none", "domain": "d"}); mpNum(t, m, "retry_after_ms") != -1 {
		t.Errorf("no tiers: %v", m)
	}
	// Lenient, a field only some replies have.
	if m := h.mpOK("/v1/request", map[string]any{"resource": "open/x", "domain": "d"}); m["lenient"] != true {
		t.Errorf("lenient: %v", m)
	}
	// A body in MessagePack, a reply in JSON (no Accept), and the reverse.
	r := h.do("POST", "/v1/request", mpBody(t, map[string]any{"resource": "t/gcra", "domain": "d", "copies": 0}), hdrSendMsgpack)
	if r.status != 200 || r.header.Get("Content-Type") != contentTypeJSON || num(t, decodeObject(t, r.body), "remaining") != 15 {
		t.Errorf("MessagePack in, JSON out: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	r = h.do("POST", "/v1/request", `{"resource":"t/gcra","domain":"d","copies":0}`, hdrAcceptMsgpack)
	if r.status != 200 || mpNum(t, mpDecode(t, r.body).(map[string]any), "remaining") != 15 {
		t.Errorf("JSON in, MessagePack out: %d %q", r.status, r.body)
	}
}

// TestMsgpackRepliesHaveTheJSONFieldsInOrder compares the keys, in order,
// of every hand-written reply in both formats.
func TestMsgpackRepliesHaveTheJSONFieldsInOrder(t *testing.T) {
	h := newHarness(t)
	session := str(t, h.ok("/v1/sessions", `{}`), "session")
	for _, tc := range []struct{ path, body string }{
		{"/v1/request", `{"resource":"t/tiers","domain":"k"}`},
		{"/v1/request", `{"resource":"t/gcra","domain":"k"}`},
		{"/v1/request", `{"resource":"open/x","domain":"k"}`},
		{"/v1/refund", `{"resource":"t/gcra","domain":"k"}`},
		{"/v1/sessions", `{"ttl_ms":1000}`},
		{"/v1/reserve", `{"resource":"t/copies","domain":"acme","session":"` + session + `"}`},
		{"/v1/reserve", `{"resource":"t/copies","domain":"acme","copies":9,"session":"` + session + `"}`},
	} {
		j := h.do("POST", tc.path, tc.body)
		m := h.do("POST", tc.path, tc.body, hdrAcceptMsgpack)
		if j.status != 200 || m.status != 200 {
			t.Fatalf("%s %s: %d %s / %d %q", tc.path, tc.body, j.status, j.body, m.status, m.body)
		}
		if jk, mk := jsonKeys(t, j.body), mpKeys(t, m.body); !reflect.DeepEqual(jk, mk) {
			t.Errorf("%s %s: JSON keys %v, MessagePack keys %v", tc.path, tc.body, jk, mk)
		}
	}
}

func TestMsgpackCopies(t *testing.T) {
	h := newHarness(t)
	m := h.mpOK("/v1/sessions", map[string]any{"ttl_ms": 5000})
	s1, _ := m["session"].(string)
	if s1 == "" || mpNum(t, m, "ttl_ms") != 5000 {
		t.Fatalf("open session: %v", m)
	}
	// An empty body is an empty map, as an empty JSON body is {}.
	r := h.do("POST", "/v1/sessions", "", hdrSendMsgpack, hdrAcceptMsgpack)
	if m := mpDecode(t, r.body).(map[string]any); r.status != 200 || mpNum(t, m, "ttl_ms") != 30000 {
		t.Errorf("session with an empty MessagePack body: %d %v", r.status, m)
	}
	if m := h.mpOK("/v1/sessions/"+s1+"/keepalive", map[string]any{}); m["session"] != s1 || mpNum(t, m, "ttl_ms") != 5000 {
		t.Errorf("keepalive: %v", m)
	}
	m = h.mpOK("/v1/reserve", map[string]any{"resource": "t/copies", "domain": "acme", "copies": 3, "min_copies": 1, "session": s1})
	hold, _ := m["hold"].(string)
	want := map[string]any{"granted": int64(3), "hold": hold, "domain_limit": int64(5), "global_limit": int64(100),
		"domain_holds": int64(3), "global_holds": int64(3),
		"groups": []any{map[string]any{"name": "partners", "limit": int64(20), "holds": int64(3)}}}
	if hold == "" || !reflect.DeepEqual(m, want) {
		t.Errorf("reserve: %v, want %v", m, want)
	}
	if m := h.mpOK("/v1/reserve", map[string]any{"resource": "t/copies", "domain": "solo", "session": s1}); !reflect.DeepEqual(m["groups"], []any{}) {
		t.Errorf("reserve in no group: %v", m)
	}
	if m := h.mpOK("/v1/release", map[string]any{"hold": hold}); mpNum(t, m, "released") != 1 || mpNum(t, m, "held") != 2 {
		t.Errorf("release: %v", m)
	}
	m = h.mpOK("/v1/transfer", map[string]any{"hold": hold, "copies": 2, "ttl_ms": 1000})
	transfer, _ := m["transfer"].(string)
	if transfer == "" || len(m) != 1 {
		t.Fatalf("transfer: %v", m)
	}
	s2, _ := h.mpOK("/v1/sessions", map[string]any{})["session"].(string)
	m = h.mpOK("/v1/seize", map[string]any{"transfer": transfer, "session": s2})
	if m["resource"] != "t/copies" || m["domain"] != "acme" || mpNum(t, m, "copies") != 2 ||
		!reflect.DeepEqual(m["groups"], []any{"partners"}) || m["hold"] == "" {
		t.Errorf("seize: %v", m)
	}
	r = h.do("POST", "/v1/seize", mpBody(t, map[string]any{"transfer": transfer, "session": s2}), hdrSendMsgpack, hdrAcceptMsgpack)
	if code, _ := mpError(t, r); r.status != 404 || code != "unknown_transfer" {
		t.Errorf("second seize: %d %s", r.status, code)
	}
	r = h.do("DELETE", "/v1/sessions/"+s2, "", hdrAcceptMsgpack)
	if m := mpDecode(t, r.body).(map[string]any); r.status != 200 || mpNum(t, m, "released") != 2 {
		t.Errorf("end session: %d %v", r.status, m)
	}
}

func TestMsgpackRefundAndCheck(t *testing.T) {
	h := newHarness(t)
	h.mpOK("/v1/request", map[string]any{"resource": "t/gcra", "domain": "d", "copies": 20})
	if m := h.mpOK("/v1/refund", map[string]any{"resource": "t/gcra", "domain": "d", "copies": 2}); len(m) != 1 || mpNum(t, m, "remaining") != 2 {
		t.Errorf("refund: %v", m)
	}
	h.mpOK("/v1/request", map[string]any{"resource": "t/gcra", "domain": "d", "copies": 2})
	r := h.do("GET", "/v1/check?resource=t/gcra&domain=d", "", hdrAcceptMsgpack)
	if r.status != 429 || r.header.Get("Content-Type") != contentTypeMsgpack || r.header.Get("Retry-After") != "1" {
		t.Fatalf("check: %d %v", r.status, r.header)
	}
	if m := mpDecode(t, r.body).(map[string]any); mpNum(t, m, "granted") != 0 || mpNum(t, m, "retry_after_ms") != 50 {
		t.Errorf("429 body %v", m)
	}
}

func TestMsgpackSimulate(t *testing.T) {
	h := newHarness(t)
	reqs := []any{
		map[string]any{"at_ms": 0, "domain": "ip"},
		map[string]any{"at_ms": 5, "domain": "ip", "copies": 19},
		map[string]any{"at_ms": 5, "domain": "ip", "op": "refund", "copies": 2},
		map[string]any{"at_ms": 6, "domain": "ip", "copies": 21},
	}
	m := h.mpOK("/v1/simulate", map[string]any{
		"resource": map[string]any{"kind": "gcra", "burst": 20, "count": 20, "period": "1s", "shadow": false},
		"requests": reqs,
	})
	cfg, _ := m["config"].(map[string]any)
	if cfg["kind"] != "gcra" || cfg["period"] != "1s" || mpNum(t, cfg, "burst") != 20 {
		t.Errorf("config %v", cfg)
	}
	ds, _ := m["decisions"].([]any)
	if len(ds) != 4 {
		t.Fatalf("decisions %v", m["decisions"])
	}
	if d := ds[1].(map[string]any); mpNum(t, d, "granted") != 19 || mpNum(t, d, "remaining") != 0 {
		t.Errorf("decision 1: %v", d)
	}
	if d := ds[2].(map[string]any); len(d) != 1 || mpNum(t, d, "remaining") != 2 {
		t.Errorf("refund: %v", d)
	}
	if e, _ := ds[3].(map[string]any)["error"].(map[string]any); e["code"] != "cost_over_burst" {
		t.Errorf("item error: %v", ds[3])
	}
	// The same simulation in JSON gives the same reply.
	j := h.post("/v1/simulate", `{"resource":{"kind":"gcra","burst":20,"count":20,"period":"1s","shadow":false},"requests":[
		{"at_ms":0,"domain":"ip"},{"at_ms":5,"domain":"ip","copies":19},{"at_ms":5,"domain":"ip","op":"refund","copies":2},
		{"at_ms":6,"domain":"ip","copies":21}]}`)
	if got := jsonDecode(t, j.body); !reflect.DeepEqual(got, any(m)) {
		t.Errorf("JSON %v\nMessagePack %v", got, m)
	}
	// A config the parser refuses names its field, as in JSON.
	r := h.do("POST", "/v1/simulate", mpBody(t, map[string]any{
		"resource": map[string]any{"kind": "gcra", "burst": 0, "count": 1, "period": "1s"}, "requests": []any{},
	}), hdrSendMsgpack, hdrAcceptMsgpack)
	if code, msg := mpError(t, r); r.status != 400 || code != "bad_request" || !strings.Contains(msg, "burst") {
		t.Errorf("bad config: %d %s %s", r.status, code, msg)
	}
}

// TestMsgpackOperations checks that the replies of the operations endpoints,
// rendered as JSON, are MessagePack when asked for, and that the text ones
// are left alone.
func TestMsgpackOperations(t *testing.T) {
	h := newHarness(t)
	h.ok("/v1/request", `{"resource":"t/tiers","domain":"d"}`)
	for _, path := range []string{"/v1/state?resource=t/tiers&domain=d", "/v1/config", "/v1/peers", "/healthz", "/readyz"} {
		j := h.do("GET", path, "")
		m := h.do("GET", path, "", hdrAcceptMsgpack)
		if j.status != 200 || m.status != 200 || m.header.Get("Content-Type") != contentTypeMsgpack {
			t.Errorf("%s: %d / %d %s", path, j.status, m.status, m.header.Get("Content-Type"))
			continue
		}
		if jv, mv := jsonDecode(t, j.body), mpDecode(t, m.body); !reflect.DeepEqual(jv, mv) {
			t.Errorf("%s: JSON %v\nMessagePack %v", path, jv, mv)
		}
	}
	if r := h.do("GET", "/metrics", "", hdrAcceptMsgpack); r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Errorf("/metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	h.srv.SetReady(false)
	if code, _ := mpError(t, h.do("GET", "/readyz", "", hdrAcceptMsgpack)); code != "not_ready" {
		t.Errorf("readyz: %s", code)
	}
}

func TestMsgpackErrorReplies(t *testing.T) {
	h := newHarness(t)
	huge := strings.Repeat("x", 100<<10)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{method: "GET", path: "/v1/nope", body: "", status: 404, code: "not_found"},
		{method: "GET", path: "/v1/request", body: "", status: 405, code: "bad_request"},
		{method: "POST", path: "/v1/request", body: mpBody(t, map[string]any{"resource": "nope/x", "domain": "d"}), status: 404, code: "unknown_resource"},
		{method: "POST", path: "/v1/request", body: mpBody(t, map[string]any{"resource": "t/copies", "domain": "d"}), status: 409, code: "wrong_kind"},
		{method: "POST", path: "/v1/request", body: mpBody(t, map[string]any{"resource": "t/gcra", "domain": huge}), status: 413, code: "too_large"},
		{method: "POST", path: "/v1/batch", body: mpBody(t, map[string]any{"requests": []any{map[string]any{"domain": huge}}}), status: 413, code: "too_large"},
		{method: "GET", path: "/v1/check?resource=t/gcra", body: "", status: 400, code: "bad_request"},
	} {
		r := h.do(tc.method, tc.path, tc.body, hdrSendMsgpack, hdrAcceptMsgpack)
		if code, msg := mpError(t, r); r.status != tc.status || code != tc.code || msg == "" {
			t.Errorf("%s %s: %d %s %q, want %d %s", tc.method, tc.path, r.status, code, msg, tc.status, tc.code)
		}
	}
	// An invalid UTF-8 key is echoed with U+FFFD: the message is a valid string.
	r := h.do("POST", "/v1/request", mpRaw(t, func(e *msgpack.Encoder) error {
		_ = e.EncodeMapLen(1)
		_ = e.EncodeString("a\xffb")
		return e.EncodeInt(1)
	}), hdrSendMsgpack, hdrAcceptMsgpack)
	if _, msg := mpError(t, r); !strings.Contains(msg, "a\uFFFDb") {
		t.Errorf("message %q", msg)
	}
}

func TestAcceptFormat(t *testing.T) {
	for accept, want := range map[string]format{
		"":                                      formatJSON,
		"application/json":                      formatJSON,
		"*/*":                                   formatJSON,
		"application/msgpack":                   formatMsgpack,
		"Application/MsgPack; charset=x":        formatMsgpack,
		"application/x-msgpack":                 formatMsgpack,
		"application/msgpack;q=0":               formatJSON,
		"application/json, application/msgpack": formatJSON,
		"application/msgpack, application/json": formatMsgpack,
		"application/json;q=0.5, application/msgpack":   formatMsgpack,
		"application/json, application/msgpack;q=0.9":   formatJSON,
		"text/html, application/msgpack;q=0.1":          formatMsgpack,
		"application/msgpackx":                          formatJSON,
		"application/json;q=0.9, application/msgpack;q": formatMsgpack,
	} {
		if got := acceptFormat([]byte(accept)); got != want {
			t.Errorf("Accept %q: format %d, want %d", accept, got, want)
		}
	}
	for ct, want := range map[string]bool{
		"application/msgpack": true, "application/msgpack; charset=binary": true, "APPLICATION/X-MSGPACK": true,
		"application/json": false, "application/msgpack2": false, "": false, "text/msgpack": false,
	} {
		if got := isMsgpackType([]byte(ct)); got != want {
			t.Errorf("Content-Type %q: msgpack %v, want %v", ct, got, want)
		}
	}
}

// TestJSONAndMsgpackDecideAlike sends the same requests to two servers, one
// in JSON and one in MessagePack, at the same instants: the decisions must
// be the same.
func TestJSONAndMsgpackDecideAlike(t *testing.T) {
	hj, hm := newHarness(t), newHarness(t)
	type req struct {
		resource, domain  string
		copies, minCopies int // -1: not given
	}
	var reqs []req
	for i := range 60 {
		reqs = append(reqs,
			req{"t/tiers", fmt.Sprint("u", i%3), 1 + i%3, -1},
			req{"t/gcra", "d", i % 4, i % 2},
			req{"t/thirds", "x", -1, -1},
			req{"t/shadow", "s", 1, -1},
			req{"t/none", "n", 0, -1},
			req{"open/any", "o", 2, 1},
		)
	}
	for i, r := range reqs {
		hj.clock.set(t0.Add(time.Duration(i) * 37 * time.Millisecond))
		hm.clock.set(t0.Add(time.Duration(i) * 37 * time.Millisecond))
		js := fmt.Sprintf(`{"resource":%q,"domain":%q`, r.resource, r.domain)
		mp := map[string]any{"resource": r.resource, "domain": r.domain}
		if r.copies >= 0 {
			js += fmt.Sprintf(`,"copies":%d`, r.copies)
			mp["copies"] = r.copies
		}
		if r.minCopies >= 0 {
			js += fmt.Sprintf(`,"min_copies":%d`, r.minCopies)
			mp["min_copies"] = r.minCopies
		}
		js += "}"
		jr := hj.post("/v1/request", js)
		mr := hm.do("POST", "/v1/request", mpBody(t, mp), hdrSendMsgpack, hdrAcceptMsgpack)
		if jr.status != mr.status {
			t.Fatalf("request %d %s: JSON %d %s, MessagePack %d %q", i, js, jr.status, jr.body, mr.status, mr.body)
		}
		if jv, mv := jsonDecode(t, jr.body), mpDecode(t, mr.body); !reflect.DeepEqual(jv, mv) {
			t.Fatalf("request %d %s:\nJSON        %v\nMessagePack %v", i, js, jv, mv)
		}
	}
}

// TestMsgpackNumbers checks the integer encodings a client may use and the
// floats taken like JSON's 2.0.
func TestMsgpackNumbers(t *testing.T) {
	h := newHarness(t)
	for name, enc := range map[string]func(e *msgpack.Encoder) error{
		"fixint":  func(e *msgpack.Encoder) error { return e.EncodeInt(2) },
		"uint8":   func(e *msgpack.Encoder) error { return e.EncodeUint8(2) },
		"int16":   func(e *msgpack.Encoder) error { return e.EncodeInt16(2) },
		"uint32":  func(e *msgpack.Encoder) error { return e.EncodeUint32(2) },
		"int64":   func(e *msgpack.Encoder) error { return e.EncodeInt64(2) },
		"uint64":  func(e *msgpack.Encoder) error { return e.EncodeUint64(2) },
		"float64": func(e *msgpack.Encoder) error { return e.EncodeFloat64(2.0) },
		"float32": func(e *msgpack.Encoder) error { return e.EncodeFloat32(2.0) },
	} {
		body := mpRaw(t, func(e *msgpack.Encoder) error {
			_ = e.EncodeMapLen(3)
			_ = e.EncodeString("resource")
			_ = e.EncodeString("t/gcra")
			_ = e.EncodeString("domain")
			_ = e.EncodeString(name)
			_ = e.EncodeString("copies")
			return enc(e)
		})
		r := h.do("POST", "/v1/request", body, hdrSendMsgpack, hdrAcceptMsgpack)
		if m, ok := mpDecode(t, r.body).(map[string]any); r.status != 200 || !ok || m["granted"] != int64(2) {
			t.Errorf("copies as %s: %d %v", name, r.status, mpDecode(t, r.body))
		}
	}
}

// TestMalformedMsgpack is the malformed table for MessagePack bodies: each
// must be refused with the status and code, a message naming what is wrong,
// in MessagePack when asked for and in JSON otherwise; after each, the
// server still serves.
func TestMalformedMsgpack(t *testing.T) {
	h := newHarness(t)
	kv := func(pairs ...any) string { // a map of the pairs, in order, keys as given
		return mpRaw(t, func(e *msgpack.Encoder) error {
			_ = e.EncodeMapLen(len(pairs) / 2)
			for _, p := range pairs {
				if err := e.Encode(p); err != nil {
					return err
				}
			}
			return nil
		})
	}
	ok := kv("resource", "t/gcra", "domain", "d")
	long := strings.Repeat("x", 300)
	cases := []struct {
		name   string
		path   string
		body   string
		status int
		code   string
		names  []string
	}{
		{name: "resource as an integer", path: "/v1/request", body: kv("resource", 12, "domain", "d"), status: 400, code: "bad_request", names: []string{"resource", "string", "12"}},
		{name: "copies as a string", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", "3"), status: 400, code: "bad_request", names: []string{"copies", "integer", `"3"`}},
		{name: "copies as a bool", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", true), status: 400, code: "bad_request", names: []string{"copies", "true"}},
		{name: "copies nil", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", nil), status: 400, code: "bad_request", names: []string{"copies", "nil"}},
		{name: "copies with a fraction", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", 1.5), status: 400, code: "bad_request", names: []string{"copies", "1.5"}},
		{name: "copies NaN", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", math.NaN()), status: 400, code: "bad_request", names: []string{"copies", "NaN"}},
		{name: "copies negative", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", -3), status: 400, code: "bad_request", names: []string{"copies: must be an integer in [0, 1000000000], got -3"}},
		{name: "copies max uint64", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", uint64(math.MaxUint64)), status: 400, code: "bad_request", names: []string{"copies", "18446744073709551615"}},
		{name: "copies min int64", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", int64(math.MinInt64)), status: 400, code: "bad_request", names: []string{"copies", "-9223372036854775808"}},
		{name: "copies over 1e9", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", 1_000_000_001), status: 400, code: "bad_request", names: []string{"copies", "1000000001"}},
		{name: "min_copies over copies", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", 3, "min_copies", 5), status: 400, code: "bad_request", names: []string{"min_copies", "copies 3"}},
		{name: "unknown field", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "colour", 1), status: 400, code: "bad_request", names: []string{"colour", "unknown field"}},
		{name: "field twice", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", 1, "copies", 2), status: 400, code: "bad_request", names: []string{"copies", "twice"}},
		{name: "key not a string", path: "/v1/request", body: kv(1, "t/gcra"), status: 400, code: "bad_request", names: []string{"body", "field name", "string"}},
		{name: "truncated map", path: "/v1/request", body: ok[:len(ok)-3], status: 400, code: "bad_request", names: []string{"body", "MessagePack", "end of body"}},
		{name: "truncated value", path: "/v1/request", body: ok[:len(ok)-1], status: 400, code: "bad_request", names: []string{"domain", "MessagePack", "end of body"}},
		{name: "truncated header", path: "/v1/request", body: "\xde\x00", status: 400, code: "bad_request", names: []string{"body", "end of body"}},
		{name: "string longer than the body", path: "/v1/request", body: "\x81\xa8resource\xd9\x10abc", status: 400, code: "bad_request", names: []string{"resource", "end of body"}},
		{name: "invalid UTF-8 domain", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "a\xffb"), status: 400, code: "bad_request", names: []string{"domain", "UTF-8"}},
		{name: "binary domain", path: "/v1/request", body: kv("resource", "t/gcra", "domain", []byte("d")), status: 400, code: "bad_request", names: []string{"domain", "string", "binary"}},
		{name: "extension copies", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "copies", time.Unix(1, 0)), status: 400, code: "bad_request", names: []string{"copies", "extension"}},
		{name: "nested garbage", path: "/v1/request", body: kv("resource", map[string]any{"a": []any{1, map[string]any{}}}, "domain", "d"), status: 400, code: "bad_request", names: []string{"resource", "string", "a map"}},
		{name: "an array at the top", path: "/v1/request", body: mpBody(t, []any{"t/gcra", "d"}), status: 400, code: "bad_request", names: []string{"body", "map", "an array"}},
		{name: "nil at the top", path: "/v1/request", body: "\xc0", status: 400, code: "bad_request", names: []string{"body", "map", "nil"}},
		{name: "a string at the top", path: "/v1/request", body: mpBody(t, "t/gcra"), status: 400, code: "bad_request", names: []string{"body", "map", "string"}},
		{name: "reserved code", path: "/v1/request", body: "\xc1", status: 400, code: "bad_request", names: []string{"body", "0xc1"}},
		{name: "trailing data", path: "/v1/request", body: ok + "\x00", status: 400, code: "bad_request", names: []string{"body", "after"}},
		{name: "JSON sent as MessagePack", path: "/v1/request", body: `{"resource":"t/gcra","domain":"d"}`, status: 400, code: "bad_request", names: []string{"body", "map", "looks like JSON"}},
		{name: "empty body", path: "/v1/request", body: "", status: 400, code: "bad_request", names: []string{"resource", "missing"}},
		{name: "missing domain", path: "/v1/request", body: kv("resource", "t/gcra"), status: 400, code: "bad_request", names: []string{"domain", "missing"}},
		{name: "empty resource", path: "/v1/request", body: kv("resource", "", "domain", "d"), status: 400, code: "bad_request", names: []string{"resource", "empty"}},
		{name: "300-byte domain", path: "/v1/request", body: kv("resource", "t/gcra", "domain", long), status: 400, code: "bad_request", names: []string{"domain", "256 bytes", "300 bytes"}},
		{name: "300-byte resource", path: "/v1/refund", body: kv("resource", long, "domain", "d"), status: 400, code: "bad_request", names: []string{"resource", "256 bytes"}},
		{name: "body over 64 KiB", path: "/v1/request", body: kv("resource", "t/gcra", "domain", "d", "pad", strings.Repeat("x", 70<<10)), status: 413, code: "too_large", names: []string{"body"}},
		{name: "ttl_ms zero", path: "/v1/sessions", body: kv("ttl_ms", 0), status: 400, code: "bad_request", names: []string{"ttl_ms", "got 0"}},
		{name: "session without a field", path: "/v1/sessions", body: kv("ttl_ms", 10, "hold", "h"), status: 400, code: "bad_request", names: []string{"hold", "unknown field"}},
		{name: "reserve without session", path: "/v1/reserve", body: kv("resource", "t/copies", "domain", "d"), status: 400, code: "bad_request", names: []string{"session", "missing"}},
		{name: "release hold as an array", path: "/v1/release", body: kv("hold", []any{"h"}), status: 400, code: "bad_request", names: []string{"hold", "string", "an array"}},
		{name: "simulate resource not a map", path: "/v1/simulate", body: kv("resource", "gcra", "requests", []any{}), status: 400, code: "bad_request", names: []string{"resource", "map"}},
		{name: "simulate item not a map", path: "/v1/simulate", body: kv("resource", map[string]any{"kind": "gcra", "burst": 1, "count": 1, "period": "1s"}, "requests", []any{7}), status: 400, code: "bad_request", names: []string{"requests[0]", "map"}},
		{name: "simulate binary in the config", path: "/v1/simulate", body: kv("resource", map[string]any{"kind": []byte("gcra")}, "requests", []any{}), status: 400, code: "bad_request", names: []string{"resource.kind", "binary"}},
		{name: "simulate at_ms going back", path: "/v1/simulate", body: kv("resource", map[string]any{"kind": "gcra", "burst": 1, "count": 1, "period": "1s"}, "requests", []any{map[string]any{"at_ms": 5, "domain": "d"}, map[string]any{"at_ms": 4, "domain": "d"}}), status: 400, code: "bad_request", names: []string{"requests[1].at_ms"}},
		{name: "batch requests not an array", path: "/v1/batch", body: kv("requests", map[string]any{}), status: 400, code: "bad_request", names: []string{"requests", "array", "a map"}},
		{name: "batch truncated item", path: "/v1/batch", body: kv("requests", []any{map[string]any{"resource": "t/gcra", "domain": "d"}})[:20], status: 400, code: "bad_request", names: []string{"requests", "end of body"}},
		{name: "batch unknown field", path: "/v1/batch", body: kv("requests", []any{}, "more", 1), status: 400, code: "bad_request", names: []string{"more", "unknown field"}},
	}
	if len(cases) < 15 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, asMsgpack := range []bool{true, false} {
				headers := []string{hdrSendMsgpack}
				if asMsgpack {
					headers = append(headers, hdrAcceptMsgpack)
				}
				r := h.do("POST", tc.path, tc.body, headers...)
				var code, msg string
				if asMsgpack {
					code, msg = mpError(t, r)
				} else {
					code, msg = errorReply(t, r.body)
				}
				if r.status != tc.status || code != tc.code {
					t.Errorf("reply in MessagePack %v: %d %s (%q), want %d %s", asMsgpack, r.status, code, msg, tc.status, tc.code)
				}
				for _, n := range tc.names {
					if !strings.Contains(msg, n) {
						t.Errorf("message %q does not name %q", msg, n)
					}
				}
			}
			if r := h.do("POST", "/v1/request", ok, hdrSendMsgpack); r.status != 200 {
				t.Fatalf("after the bad request, /v1/request is %d %s", r.status, r.body)
			}
		})
	}
	if strings.Contains(h.logs.String(), "internal") {
		t.Errorf("a client error was logged as internal: %s", h.logs.String())
	}
}

func TestDecodeMsgpackAllocatesNothing(t *testing.T) {
	body := []byte(mpBody(t, map[string]any{"resource": "api/search", "domain": "user-42", "copies": 3, "min_copies": 1}))
	var b wireBody
	if n := testing.AllocsPerRun(100, func() {
		b.reset()
		if err := b.decodeMsgpack(body, requestFields, fResource|fDomain); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("decodeMsgpack allocates %v times per run", n)
	}
	if string(b.domain) != "user-42" || string(b.resource) != "api/search" || b.copies != 3 || b.minCopies != 1 {
		t.Errorf("decoded %+v", b)
	}
}
