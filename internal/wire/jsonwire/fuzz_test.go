package jsonwire

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// The seed corpora are in testdata/fuzz/<FuzzName>/.

func FuzzAppendString(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString([]byte("x"), s)[1:]
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", s, out, err)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("AppendString(%q) decodes to %q", s, got)
		}
		if !utf8.ValidString(s) && got != strings.ToValidUTF8(s, "\ufffd") && !strings.Contains(got, "\ufffd") {
			t.Fatalf("AppendString(%q) decodes to %q", s, got)
		}
	})
}
