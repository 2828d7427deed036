// The scalars: a node named for a message, and a scalar read as a string,
// a boolean or an integer.

package yamlnode

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Describe names n for a message (`got the number 5`): "a mapping", "a
// list", "an alias", "a document", "nothing" for nil, and a scalar by its
// type and value: null, the string "x" (cut to 40 bytes), the number 5,
// true, or its tag and value (!!binary "…").
func Describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch t := n.ShortTag(); t {
	case "!!null":
		return "null"
	case "!!str":
		return fmt.Sprintf("the string %q", v)
	case "!!int", "!!float":
		return "the number " + v
	case "!!bool":
		return v
	default:
		return fmt.Sprintf("%s %q", t, v)
	}
}

// Text returns the text of n, a scalar other than null, as written (so
// that 42 and "42" read alike); ok is false for anything else. When strict
// it takes only a string (the tag !!str), not a number or a boolean.
func Text(n *yaml.Node, strict bool) (s string, ok bool) {
	if n == nil || n.Kind != yaml.ScalarNode || IsNull(n) || strict && n.ShortTag() != "!!str" {
		return "", false
	}
	return n.Value, true
}

// Bool reads n as a boolean: true or false as YAML 1.2 writes them (the
// tag !!bool); when loose also the YAML 1.1 words a Go bool decodes from
// (yes, no, on, off, y, n in their cases), as envoyproxy/ratelimit's
// YAML library reads them. ok is false for anything else.
func Bool(n *yaml.Node, loose bool) (b, ok bool) {
	if n == nil || n.Kind != yaml.ScalarNode || !loose && n.ShortTag() != "!!bool" {
		return false, false
	}
	if n.Decode(&b) != nil {
		return false, false
	}
	return b, true
}

// The errors of Int.
var (
	ErrNotInteger = errors.New("not an integer")
	ErrNotWhole   = errors.New("not a whole number")
	ErrTooLarge   = errors.New("too large")
	ErrTooSmall   = errors.New("too small")
)

// Int reads n as a whole number: an integer scalar (the tag !!int: 5,
// 0x10, 1_000) or a float one without a fraction (1e3), within ±10¹⁸ for
// a float and the int64 range for an integer. The error is ErrNotInteger
// for another node or tag, ErrNotWhole for a fraction (or NaN),
// ErrTooLarge or ErrTooSmall past the range.
func Int(n *yaml.Node) (int64, error) {
	tag := ""
	if n != nil && n.Kind == yaml.ScalarNode {
		tag = n.ShortTag()
	}
	if tag == "!!int" {
		if v, err := strconv.ParseInt(n.Value, 10, 64); err == nil { // the common case, without the YAML decoder
			return v, nil
		}
	}
	var x any
	if (tag != "!!int" && tag != "!!float") || n.Decode(&x) != nil {
		return 0, ErrNotInteger
	}
	switch v := x.(type) {
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case uint64:
		return 0, ErrTooLarge
	case float64:
		switch {
		case math.IsNaN(v) || v != math.Trunc(v):
			return 0, ErrNotWhole
		case math.Abs(v) < 1e18:
			return int64(v), nil
		case v > 0:
			return 0, ErrTooLarge
		default:
			return 0, ErrTooSmall
		}
	}
	return 0, ErrNotInteger
}

// Number reads n as a real number: an integer or float scalar. ok is
// false for anything else.
func Number(n *yaml.Node) (float64, bool) {
	var x any
	if n == nil || n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&x) != nil {
		return 0, false
	}
	switch v := x.(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}
