package yamlnode

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// scalar returns the node of a one-value document.
func scalar(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	return doc.Content[0]
}

func TestDescribe(t *testing.T) {
	for src, want := range map[string]string{
		"{a: 1}": "a mapping", "[1]": "a list", "~": "null", "x": `the string "x"`, "5": "the number 5",
		"1.5": "the number 1.5", "true": "true", "!!binary aGk=": `!!binary "aGk="`,
		"'0123456789012345678901234567890123456789x'": `the string "0123456789012345678901234567890123456..."`,
	} {
		if got := Describe(scalar(t, src)); got != want {
			t.Errorf("%s: %s, want %s", src, got, want)
		}
	}
	if got := Describe(nil); got != "nothing" {
		t.Errorf("nil: %s", got)
	}
	if got := Describe(&yaml.Node{Kind: yaml.AliasNode}); got != "an alias" {
		t.Errorf("alias: %s", got)
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		src        string
		strict, ok bool
		want       string
	}{
		{"x", true, true, "x"}, {`"42"`, true, true, "42"}, {"42", true, false, ""},
		{"42", false, true, "42"}, {"true", false, true, "true"}, {"~", false, false, ""},
		{"[x]", false, false, ""},
	} {
		got, ok := Text(scalar(t, tc.src), tc.strict)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Text(%s, %v) = %q, %v; want %q, %v", tc.src, tc.strict, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBool(t *testing.T) {
	for _, tc := range []struct {
		src      string
		loose    bool
		want, ok bool
	}{
		{"true", false, true, true}, {"false", false, false, true}, {"yes", false, false, false},
		{"yes", true, true, true}, {"off", true, false, true}, {"maybe", true, false, false},
		{"1", true, false, false}, {"[true]", true, false, false},
	} {
		got, ok := Bool(scalar(t, tc.src), tc.loose)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Bool(%s, %v) = %v, %v; want %v, %v", tc.src, tc.loose, got, ok, tc.want, tc.ok)
		}
	}
}

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int64
		err  error
	}{
		{"5", 5, nil}, {"-3", -3, nil}, {"0x10", 16, nil}, {"1_000", 1000, nil}, {"1e3", 1000, nil},
		{"9223372036854775807", 1<<63 - 1, nil},
		{"18446744073709551615", 0, ErrTooLarge}, {"1e19", 0, ErrTooLarge}, {"-1e19", 0, ErrTooSmall},
		{"1.5", 0, ErrNotWhole}, {".nan", 0, ErrNotWhole},
		{`"5"`, 0, ErrNotInteger}, {"x", 0, ErrNotInteger}, {"{}", 0, ErrNotInteger}, {"~", 0, ErrNotInteger},
	} {
		got, err := Int(scalar(t, tc.src))
		if got != tc.want || err != tc.err {
			t.Errorf("Int(%s) = %d, %v; want %d, %v", tc.src, got, err, tc.want, tc.err)
		}
	}
}

func TestNumber(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want float64
		ok   bool
	}{
		{"5", 5, true}, {"1.5", 1.5, true}, {"18446744073709551615", 18446744073709551615, true},
		{`"5"`, 0, false}, {"true", 0, false},
	} {
		got, ok := Number(scalar(t, tc.src))
		if got != tc.want || ok != tc.ok {
			t.Errorf("Number(%s) = %v, %v; want %v, %v", tc.src, got, ok, tc.want, tc.ok)
		}
	}
}
