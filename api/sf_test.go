package api

import (
	"fmt"
	"strings"
	"testing"
)

// sfItem is one member of a structured-field List (RFC 9651) as the
// RateLimit fields use them: a String or Token bare item with Integer
// parameters.
type sfItem struct {
	value  string
	token  bool
	params []sfParam
}

type sfParam struct {
	key string
	val int64
}

// param returns the value of parameter key and whether it is there.
func (it sfItem) param(key string) (int64, bool) {
	for _, p := range it.params {
		if p.key == key {
			return p.val, true
		}
	}
	return 0, false
}

// keys returns the parameter keys in order, for messages and comparisons.
func (it sfItem) keys() string {
	var ks []string
	for _, p := range it.params {
		ks = append(ks, p.key)
	}
	return strings.Join(ks, ",")
}

// parseSFList parses a field value as an RFC 9651 List, strictly (section
// 4.2): members separated by a comma and optional whitespace, no trailing
// comma, no characters left over. It accepts only what the RateLimit
// fields may hold, Items whose bare item is a String or a Token and whose
// parameters are Integers, and refuses everything else: Inner Lists,
// other bare item types, a parameter without a value (a Boolean), a key
// given twice (legal in RFC 9651, which keeps the last, but never meant by
// a sender).
func parseSFList(s string) ([]sfItem, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var items []sfItem
	for !p.done() {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		p.skipOWS()
		if p.done() {
			return items, nil
		}
		if p.s[p.i] != ',' {
			return nil, p.errorf("want ',' between members, got %q", p.s[p.i])
		}
		p.i++
		p.skipOWS()
		if p.done() {
			return nil, p.errorf("trailing comma")
		}
	}
	return items, nil
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) errorf(format string, args ...any) error {
	return fmt.Errorf("byte %d of %q: %s", p.i, p.s, fmt.Sprintf(format, args...))
}

func (p *sfParser) skipSP() {
	for !p.done() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *sfParser) item() (sfItem, error) {
	var it sfItem
	if p.done() {
		return it, p.errorf("want an item")
	}
	switch c := p.s[p.i]; {
	case c == '"':
		v, err := p.str()
		if err != nil {
			return it, err
		}
		it.value = v
	case isAlpha(c) || c == '*':
		it.value, it.token = p.token(), true
	case c == '(':
		return it, p.errorf("an inner list, where an item is wanted")
	default:
		return it, p.errorf("a bare item that is not a string or a token (%q)", c)
	}
	seen := map[string]bool{}
	for !p.done() && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		k, err := p.key()
		if err != nil {
			return it, err
		}
		if seen[k] {
			return it, p.errorf("parameter %q given twice", k)
		}
		seen[k] = true
		if p.done() || p.s[p.i] != '=' {
			return it, p.errorf("parameter %q has no value (a boolean)", k)
		}
		p.i++
		v, err := p.integer()
		if err != nil {
			return it, err
		}
		it.params = append(it.params, sfParam{k, v})
	}
	return it, nil
}

// str parses an sf-string: printable ASCII, with \" and \\ escapes only.
func (p *sfParser) str() (string, error) {
	p.i++ // the opening quote
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.done() || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return "", p.errorf("a backslash that escapes neither '\"' nor '\\\\'")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.errorf("byte %#x in a string", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *sfParser) token() string {
	start := p.i
	p.i++
	for !p.done() && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *sfParser) key() (string, error) {
	if p.done() || !(p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] == '*') {
		return "", p.errorf("a key must start with a lowercase letter or '*'")
	}
	start := p.i
	for !p.done() {
		c := p.s[p.i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

// integer parses an sf-integer: an optional '-' and 1 to 15 digits; a
// decimal point (a Decimal) or any other type is refused.
func (p *sfParser) integer() (int64, error) {
	neg := !p.done() && p.s[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var n int64
	for !p.done() && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		n = n*10 + int64(p.s[p.i]-'0')
		p.i++
	}
	switch digits := p.i - start; {
	case digits == 0:
		return 0, p.errorf("want an integer")
	case digits > 15:
		return 0, p.errorf("an integer of %d digits (at most 15)", digits)
	case !p.done() && p.s[p.i] == '.':
		return 0, p.errorf("a decimal, where an integer is wanted")
	}
	if neg {
		n = -n
	}
	return n, nil
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isTchar is RFC 9110's tchar.
func isTchar(c byte) bool {
	return isAlpha(c) || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// TestParseSFList shows the test parser takes well-formed lists and refuses
// malformed ones, so that the field tests can trust it.
func TestParseSFList(t *testing.T) {
	for in, want := range map[string]string{
		`"t1";q=5;w=1`:                   `"t1";q=5;w=1`,
		`"t1";q=5;w=1, "t2";q=50;w=5`:    `"t1";q=5;w=1|"t2";q=50;w=5`,
		`"t1";q=5,"t2";q=0`:              `"t1";q=5|"t2";q=0`,
		`  "a";r=0 ,	"b"`:                `"a";r=0|"b"`,
		`tok/en:x;r=-3`:                  `tok/en:x;r=-3`,
		`"a\"b\\c";r=999999999999999`:    `"a\"b\\c";r=999999999999999`,
		`"x"; r=1`:                       `"x";r=1`,
		`*star;a.b-c_d*=2`:               `*star;a.b-c_d*=2`,
		``:                               ``,
		`"sp ace";r=1`:                   `"sp ace";r=1`,
		`"gcra";r=20;t=1, "hard";r=0`:    `"gcra";r=20;t=1|"hard";r=0`,
		`"percent%41";q=1`:               `"percent%41";q=1`,
		`"t0";q=0;w=1, "global";q=1;w=1`: `"t0";q=0;w=1|"global";q=1;w=1`,
	} {
		items, err := parseSFList(in)
		if err != nil {
			t.Errorf("parseSFList(%q): %v", in, err)
			continue
		}
		var parts []string
		for _, it := range items {
			s := it.value
			if !it.token {
				s = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
			}
			for _, p := range it.params {
				s += fmt.Sprintf(";%s=%d", p.key, p.val)
			}
			parts = append(parts, s)
		}
		if got := strings.Join(parts, "|"); got != want {
			t.Errorf("parseSFList(%q) = %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{
		`"t1";q=5,`,          // trailing comma
		`"t1";q=5,,"t2";q=1`, // empty member
		`,"t1"`,              // leading comma
		`"t1" ;q=5`,          // space before a parameter
		`"t1";Q=5`,           // uppercase key
		`"t1";q=5.0`,         // a decimal
		`"t1";q=1234567890123456`,
		`"t1";q=`,      // no value
		`"t1";q`,       // a boolean parameter
		`"t1";q=5;q=6`, // a key twice
		`"t1";q="5"`,   // a string parameter
		`"t1`,          // unterminated
		`"t\1"`,        // bad escape
		"\"t\x01\"",    // control byte in a string
		"\"caf\xc3\xa9\"",
		`t1 t2`,     // two items without a comma
		`1;q=5`,     // an integer bare item
		`("a" "b")`, // an inner list
		`?1`,        // a boolean bare item
		`:aGk=:`,    // a byte sequence
		`"a";r=1 x`, // garbage after a member
		`"a";-r=1`,  // a key starting with '-'
		"\t\"a\"",   // leading tab (only SP may lead)
	} {
		if items, err := parseSFList(in); err == nil {
			t.Errorf("parseSFList(%q) = %+v, want an error", in, items)
		}
	}
}
