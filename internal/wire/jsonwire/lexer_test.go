package jsonwire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestExactInt(t *testing.T) {
	cases := []struct {
		tok  string
		want int64
		ok   bool
	}{
		{tok: "0", want: 0, ok: true}, {tok: "-0", want: 0, ok: true}, {tok: "7", want: 7, ok: true}, {tok: "-3", want: -3, ok: true},
		{tok: "1e3", want: 1000, ok: true}, {tok: "2.0", want: 2, ok: true}, {tok: "2.50e1", want: 25, ok: true}, {tok: "0.05e2", want: 5, ok: true},
		{tok: "1000000000", want: 1e9, ok: true}, {tok: "1e18", want: 1e18, ok: true}, {tok: "0e999999", want: 0, ok: true},
		{tok: "1.5", want: 0, ok: false}, {tok: "1e-1", want: 0, ok: false}, {tok: "1e19", want: 0, ok: false}, {tok: "1e30", want: 0, ok: false},
		{tok: "12345678901234567890", want: 0, ok: false}, {tok: "1e999999999999", want: 0, ok: false}, {tok: "5e-999999999", want: 0, ok: false},
		{tok: "1.0000000000000000000000", want: 1, ok: true},
	}
	for _, tc := range cases {
		got, ok := ExactInt([]byte(tc.tok))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ExactInt(%s) = %d, %v, want %d, %v", tc.tok, got, ok, tc.want, tc.ok)
		}
	}
}

func TestScanNumber(t *testing.T) {
	for tok, ok := range map[string]bool{
		"0": true, "-1": true, "1.25": true, "1e5": true, "1E+5": true, "1e-5": true,
		"01": false, "-": false, "1.": false, ".5": false, "1e": false, "+1": false, "1x": false, "--1": false,
	} {
		end, got := ScanNumber([]byte(tok), 0)
		if got != ok || (ok && end != len(tok)) {
			t.Errorf("ScanNumber(%q) = %d, %v, want ok %v", tok, end, got, ok)
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "ctl\x00\x01\x1f\n\r\t", "café 😀", "bad\xff\xfeutf8", "\u2028"} {
		b := AppendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("AppendString(%q) = %s: not JSON: %v", s, b, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if strings.Contains(s, "\xff\xfe") {
			want = strings.ReplaceAll(s, "\xff\xfe", "\ufffd\ufffd")
		}
		if got != want {
			t.Errorf("AppendString(%q) decodes to %q, want %q", s, got, want)
		}
		if bb := AppendString(nil, []byte(s)); string(bb) != string(b) {
			t.Errorf("appendString of []byte %q = %s, of string %s", s, bb, b)
		}
	}
}

// TestReadStringWordAtATime checks the eight-bytes-at-a-time scan of
// ReadString against a byte-at-a-time reading, for every position of every
// kind of byte that matters in strings of up to 24 bytes.
func TestReadStringWordAtATime(t *testing.T) {
	// reference reads a string without escapes byte by byte: its end, and
	// whether it is ASCII; ok false on a backslash or a control character.
	reference := func(b []byte) (end int, ascii, ok bool) {
		ascii = true
		for i, c := range b {
			switch {
			case c == '"':
				return i, ascii, true
			case c == '\\' || c < 0x20:
				return i, ascii, false
			case c >= 0x80:
				ascii = false
			}
		}
		return len(b), ascii, false
	}
	for n := range 25 {
		for pos := range n {
			for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xff, '!', '#', '[', ']'} {
				s := bytes.Repeat([]byte{'a'}, n)
				s[pos] = c
				body := append(append([]byte{'"'}, s...), '"', ',', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ')
				r := Lexer{B: body}
				var scratch []byte
				got, err := r.ReadString("f", &scratch)
				end, ascii, ok := reference(body[1:])
				if c == '\\' {
					// An escape: the slow path, which refuses "\a".
					if err == nil {
						t.Errorf("%q: no error for an invalid escape", body)
					}
					continue
				}
				if ok != (err == nil) {
					t.Errorf("%q: error %v, reference ok %v", body, err, ok)
					continue
				}
				if err != nil {
					continue
				}
				if string(got) != string(body[1:1+end]) || r.I != end+2 || r.ASCII != ascii {
					t.Errorf("%q: got %q, i %d, ascii %v; want %q, i %d, ascii %v", body, got, r.I, r.ASCII, body[1:1+end], end+2, ascii)
				}
			}
		}
	}
}

func TestSmallInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		v    int64
		ok   bool
		rest string
	}{
		{in: "0,", v: 0, ok: true, rest: ","}, {in: "7}", v: 7, ok: true, rest: "}"}, {in: "123 ", v: 123, ok: true, rest: " "}, {in: "999999999999999999]", v: 999999999999999999, ok: true, rest: "]"},
		{in: "01,", v: 0, ok: false, rest: ""}, {in: "1e3,", v: 0, ok: false, rest: ""}, {in: "1.0,", v: 0, ok: false, rest: ""}, {in: "-1,", v: 0, ok: false, rest: ""},
		{in: "12", v: 0, ok: false, rest: ""}, {in: "1000000000000000000,", v: 0, ok: false, rest: ""}, {in: "12x", v: 0, ok: false, rest: ""}, {in: ",", v: 0, ok: false, rest: ""},
	} {
		v, end, ok := SmallInt([]byte(tc.in), 0)
		if ok != tc.ok || (ok && (v != tc.v || tc.in[end:] != tc.rest)) {
			t.Errorf("SmallInt(%q) = %d, %d, %v; want %d, %v, rest %q", tc.in, v, end, ok, tc.v, tc.ok, tc.rest)
		}
	}
}

func TestLoneSurrogates(t *testing.T) {
	for _, tc := range []struct {
		in      string
		strict  string // "" when refused
		lenient string
	}{
		{in: `"\ud83d\ude00"`, strict: "😀", lenient: "😀"},
		{in: `"\ud800"`, lenient: "\ufffd"},
		{in: `"\udc00x"`, lenient: "\ufffdx"},
		{in: `"\ud800\u0041"`, lenient: "\ufffdA"},
		{in: `"\ud800\ud800\udc00"`, lenient: "\ufffd𐀀"},
	} {
		for _, lenient := range []bool{false, true} {
			l := Lexer{B: []byte(tc.in), LoneSurrogates: lenient}
			var scratch []byte
			got, err := l.ReadString("f", &scratch)
			want := tc.strict
			if lenient {
				want = tc.lenient
			}
			if (err == nil) != (want != "") || (err == nil && string(got) != want) {
				t.Errorf("%s (lenient %v) = %q, %v; want %q", tc.in, lenient, got, err, want)
			}
			if lenient {
				var std string
				if err := json.Unmarshal([]byte(tc.in), &std); err != nil || std != want {
					t.Errorf("%s: encoding/json reads %q (%v), the lenient lexer %q", tc.in, std, err, want)
				}
			}
		}
	}
}

func TestReadStringKeepsWhatScratchHeld(t *testing.T) {
	l := Lexer{B: []byte(`["a\nb","c\td"]`)}
	var scratch []byte
	if _, err := l.Array("a"); err != nil {
		t.Fatal(err)
	}
	var got []string
	var kept [][]byte
	for {
		more, err := l.Elem("a")
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
		s, _, err := l.Str("a", &scratch)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, s)
	}
	for _, s := range kept {
		got = append(got, string(s))
	}
	if strings.Join(got, "|") != "a\nb|c\td" || string(scratch) != "a\nbc\td" {
		t.Fatalf("strings %q, scratch %q", got, scratch)
	}
}

func TestPlainIntAndBool(t *testing.T) {
	for in, want := range map[string]int64{"0,": 0, "42}": 42, "-7]": -7, "123456789012345678 ": 123456789012345678, "5": 5} {
		l := Lexer{B: []byte(in)}
		if v, ok := l.PlainInt(); !ok || v != want {
			t.Errorf("PlainInt(%q) = %d, %v", in, v, ok)
		}
	}
	for _, in := range []string{"1.0", "1e3", "01", "-", "x", "46116860184273879100", `"1"`} {
		l := Lexer{B: []byte(in)}
		if v, ok := l.PlainInt(); ok {
			t.Errorf("PlainInt(%q) = %d", in, v)
		}
	}
	for in, want := range map[string]bool{"true": true, " false": false} {
		l := Lexer{B: []byte(in)}
		if v, ok := l.Bool(); !ok || v != want {
			t.Errorf("Bool(%q) = %v, %v", in, v, ok)
		}
	}
	l := Lexer{B: []byte("nul")}
	if _, ok := l.Bool(); ok {
		t.Error("Bool(nul) ok")
	}
}
