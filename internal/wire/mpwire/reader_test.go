package mpwire

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// encode returns v as github.com/vmihailenco/msgpack/v5 encodes it: the
// reference the typed layer and the appenders are checked against.
func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendersMatchTheEncoder(t *testing.T) {
	ints := []int64{0, 1, 9, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	for _, v := range ints {
		var buf bytes.Buffer
		if err := msgpack.NewEncoder(&buf).EncodeInt(v); err != nil {
			t.Fatal(err)
		}
		if got := AppendInt(nil, v); !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("AppendInt(%d) = %x, want %x", v, got, buf.Bytes())
		}
	}
	for _, n := range []int{0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536} {
		s := string(bytes.Repeat([]byte{'a'}, n))
		if got, want := AppendStr(nil, s), encode(t, s); !bytes.Equal(got, want) {
			t.Errorf("AppendStr of %d bytes = %x…, want %x…", n, got[:min(4, len(got))], want[:min(4, len(want))])
		}
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		_ = e.EncodeMapLen(n)
		if got := AppendMapLen(nil, n); !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("AppendMapLen(%d) = %x, want %x", n, got, buf.Bytes())
		}
		buf.Reset()
		_ = e.EncodeArrayLen(n)
		if got := AppendArrayLen(nil, n); !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("AppendArrayLen(%d) = %x, want %x", n, got, buf.Bytes())
		}
	}
	for _, f := range []float64{0, 1.5, -2.25e10, math.Inf(1)} {
		if got, want := AppendFloat(nil, f), encode(t, f); !bytes.Equal(got, want) {
			t.Errorf("AppendFloat(%v) = %x, want %x", f, got, want)
		}
	}
	if got := AppendBool(AppendBool(nil, true), false); !bytes.Equal(got, []byte{0xc3, 0xc2}) {
		t.Errorf("true, false = %x", got)
	}
}

func TestTypedReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		read func(r *Reader) (any, error)
		want any
		err  error
	}{
		{name: "fixint", in: 7, read: func(r *Reader) (any, error) { return r.Int() }, want: int64(7)},
		{name: "negative", in: int64(-200), read: func(r *Reader) (any, error) { return r.Int() }, want: int64(-200)},
		{name: "uint64 over int64", in: uint64(math.MaxUint64), read: func(r *Reader) (any, error) { return r.Int() }, err: ErrRange},
		{name: "uint64", in: uint64(math.MaxUint64), read: func(r *Reader) (any, error) { return r.Uint() }, want: uint64(math.MaxUint64)},
		{name: "uint of negative", in: -1, read: func(r *Reader) (any, error) { return r.Uint() }, err: ErrRange},
		{name: "int of nil", in: nil, read: func(r *Reader) (any, error) { return r.Int() }, err: ErrType},
		{name: "float32", in: float32(0.5), read: func(r *Reader) (any, error) { return r.Float() }, want: 0.5},
		{name: "float of int", in: 1, read: func(r *Reader) (any, error) { return r.Float() }, err: ErrType},
		{name: "bool", in: true, read: func(r *Reader) (any, error) { return r.Bool() }, want: true},
		{name: "str", in: "héllo", read: func(r *Reader) (any, error) { s, err := r.ReadStr(); return string(s), err }, want: "héllo"},
		{name: "bin is no str", in: []byte("x"), read: func(r *Reader) (any, error) { return r.ReadStr() }, err: ErrType},
		{name: "map", in: map[string]int{"a": 1}, read: func(r *Reader) (any, error) { return r.MapLen() }, want: 1},
		{name: "array", in: []int{1, 2, 3}, read: func(r *Reader) (any, error) { return r.ArrayLen() }, want: 3},
		{name: "nil", in: nil, read: func(r *Reader) (any, error) { return nil, r.Nil() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Reader
			r.Reset(encode(t, tc.in))
			got, err := tc.read(&r)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err == nil && tc.want != nil && got != tc.want {
				t.Fatalf("got %v (%T), want %v (%T)", got, got, tc.want, tc.want)
			}
		})
	}
}

func TestTruncatedLeavesTheReaderAtTheEnd(t *testing.T) {
	full := encode(t, uint32(1<<20))
	var r Reader
	r.Reset(full[:3])
	if _, err := r.Int(); err != ErrTruncated || r.Pos() != 3 {
		t.Fatalf("Int of a truncated uint32: %v at %d", err, r.Pos())
	}
	r.Reset(encode(t, "abcdef")[:3])
	n, err := r.StrLen()
	if err != nil || n != 6 {
		t.Fatalf("StrLen = %d, %v", n, err)
	}
	if _, err := r.Take(n); err != ErrTruncated || r.Pos() != 1 {
		t.Fatalf("Take past the end: %v at %d", err, r.Pos())
	}
}

// FuzzReader reads any input with the strict layer: no panic, and what
// Skip steps over msgpack's own decoder steps over too.
func FuzzReader(f *testing.F) {
	for _, v := range []any{map[string]any{"a": []any{1, "x", nil, true, 2.5}}, []byte{1}, int64(-1 << 40), "s"} {
		f.Add(encode(f, v))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Reader
		r.Reset(data)
		if err := r.Skip("v", 0); err == nil {
			d := msgpack.NewDecoder(bytes.NewReader(data[:r.Pos()]))
			if derr := d.Skip(); derr != nil {
				t.Fatalf("Skip accepted %x, msgpack refuses it: %v", data[:r.Pos()], derr)
			}
		}
		r.Reset(data)
		_, _ = r.AppendJSON(nil, "v", 0)
		r.Reset(data)
		_ = r.Describe()
		_, _ = r.Integer("v", -5, 5)
	})
}
