package mpwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// fromJSONByAppenders is AppendFromJSON written with the appenders instead
// of the library's Encoder (as it was before): the same walk of the JSON
// value, which BenchmarkFromJSON compares it with.
func fromJSONByAppenders(b, v []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	b, err := appendJSONByAppenders(b, dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("transcoding JSON: data after the value")
	}
	return b, nil
}

// appendJSONByAppenders transcodes the next JSON value of dec, as
// encodeJSONValue does, with the appenders.
func appendJSONByAppenders(b []byte, dec *json.Decoder, depth int) ([]byte, error) {
	if depth > 64 {
		return nil, fmt.Errorf("transcoding JSON: nested deeper than 64 levels")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("transcoding JSON: %w", err)
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
					return nil, fmt.Errorf("transcoding JSON: %w", err)
				}
				names = append(names, k.(string))
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, fmt.Errorf("transcoding JSON: %w", err)
			}
			members = append(members, raw)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, fmt.Errorf("transcoding JSON: %w", err)
		}
		if object {
			b = AppendMapLen(b, len(members))
		} else {
			b = AppendArrayLen(b, len(members))
		}
		for i, raw := range members {
			if object {
				b = AppendStr(b, names[i])
			}
			sub := json.NewDecoder(bytes.NewReader(raw))
			sub.UseNumber()
			if b, err = appendJSONByAppenders(b, sub, depth+1); err != nil {
				return nil, err
			}
		}
	case json.Number:
		if v, err := t.Int64(); err == nil {
			b = AppendInt(b, v)
		} else if f, err := t.Float64(); err == nil {
			b = AppendFloat(b, f)
		} else {
			return nil, fmt.Errorf("transcoding JSON: number %s: %w", t, err)
		}
	case string:
		b = AppendStr(b, t)
	case bool:
		b = AppendBool(b, t)
	case nil:
		b = append(b, codeNil)
	}
	return b, nil
}

// transcodeInput is a reply of an operations endpoint: nested objects,
// arrays, integers, floats, strings, booleans and null.
var transcodeInput = []byte(`{"node":"node-a","version":"1.4.2","uptime_s":86400,"config":{"resources":[` +
	`{"name":"t/tiers","kind":"tiers","tiers":[{"limit":5,"window_ms":1000},{"limit":300,"window_ms":60000}],"hard_limit":1000},` +
	`{"name":"t/gcra","kind":"gcra","rate_per_s":20.5,"burst":40,"shadow":false,"owner":null}]},` +
	`"peers":[{"name":"node-b","alive":true,"rtt_ms":0.42},{"name":"node-c","alive":false,"rtt_ms":-1}]}`)

// TestFromJSON holds AppendFromJSON to the bytes the appenders write and
// to the library's own encoding of the value, appended after what b holds.
func TestFromJSON(t *testing.T) {
	for _, c := range []struct {
		in   string
		want any // as msgpack.Marshal encodes it; nil: not checked
	}{
		{string(transcodeInput), nil},
		{`[]`, []any{}},
		{`{}`, nil},
		{`"é"`, "é"},
		{`-33`, nil}, // integers in their shortest form: TestAppendersMatchTheEncoder
		{`70000`, nil},
		{`1e300`, 1e300},
		{`0.5`, 0.5},
		{`null`, nil},
		{`[true,{"a":[1.5]}]`, []any{true, map[string]any{"a": []any{1.5}}}},
		{`{"b":1,"a":2}`, nil}, // keys in their order
	} {
		got, err := AppendFromJSON([]byte{0x01}, []byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if want, err := fromJSONByAppenders([]byte{0x01}, []byte(c.in)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %x; the appenders write %x (%v)", c.in, got, want, err)
		}
		if c.want != nil {
			if want := append([]byte{0x01}, encode(t, c.want)...); !bytes.Equal(got, want) {
				t.Errorf("%s: %x, want %x", c.in, got, want)
			}
		}
	}
	if got, _ := AppendFromJSON(nil, []byte(`{"b":1,"a":2}`)); !bytes.Equal(got, []byte{0x82, 0xa1, 'b', 1, 0xa1, 'a', 2}) {
		t.Errorf(`{"b":1,"a":2}: %x, want the keys in their order`, got)
	}
	for _, bad := range []string{``, `{`, `[1,]`, `{"a":1}x`, `1 2`, strings.Repeat("[", 70) + strings.Repeat("]", 70)} {
		if out, err := AppendFromJSON(nil, []byte(bad)); err == nil {
			t.Errorf("%q: %x, want an error", bad, out)
		}
	}
}

// BenchmarkFromJSON transcodes the reply of an operations endpoint by the
// library's Encoder (AppendFromJSON) and by the appenders.
func BenchmarkFromJSON(b *testing.B) {
	for _, c := range []struct {
		name string
		f    func(b, v []byte) ([]byte, error)
	}{{"encoder", AppendFromJSON}, {"appenders", fromJSONByAppenders}} {
		b.Run(c.name, func(b *testing.B) {
			out := make([]byte, 0, 1024)
			b.ReportAllocs()
			b.SetBytes(int64(len(transcodeInput)))
			for b.Loop() {
				var err error
				if out, err = c.f(out[:0], transcodeInput); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzFromJSON holds AppendFromJSON to the appenders' transcoding on any
// input: the same bytes, or an error from both.
func FuzzFromJSON(f *testing.F) {
	for _, s := range []string{string(transcodeInput), `[]`, `{"a":null}`, `-1.5e-7`, `"\ud800"`, `[1,]`, `{"a":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := AppendFromJSON(nil, in)
		want, werr := fromJSONByAppenders(nil, in)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: %x, %v; the appenders: %x, %v", in, got, err, want, werr)
		}
	})
}
