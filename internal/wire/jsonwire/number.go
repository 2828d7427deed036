package jsonwire

// ScanNumber scans a JSON number starting at i and returns its end. ok is
// false when the text is not a number of the JSON grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? ended by a delimiter (or
// the end); end is then where it failed.
func ScanNumber(b []byte, i int) (end int, ok bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return j, false
		}
		i = j
	}
	// A number must end at a delimiter: "12abc" is not a number.
	if i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r', ',', '}', ']':
		default:
			return i, false
		}
	}
	return i, true
}

// ExactInt returns the value of a JSON number token when it is a whole
// number of magnitude at most 1e18; ok is false otherwise (a fraction, or
// too large).
func ExactInt(tok []byte) (int64, bool) {
	i := 0
	neg := false
	if tok[0] == '-' {
		neg = true
		i++
	}
	var mant uint64
	nd := 0  // significant digits in mant
	exp := 0 // decimal exponent applied to mant
	add := func(d byte) bool {
		if mant == 0 && d == '0' {
			return true
		}
		if nd >= 18 {
			return false
		}
		mant = mant*10 + uint64(d-'0')
		nd++
		return true
	}
	for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
		if !add(tok[i]) {
			return 0, false
		}
		i++
	}
	if i < len(tok) && tok[i] == '.' {
		i++
		fracEnd := i
		for fracEnd < len(tok) && tok[fracEnd] >= '0' && tok[fracEnd] <= '9' {
			fracEnd++
		}
		last := fracEnd // trailing zeros of the fraction change nothing
		for last > i && tok[last-1] == '0' {
			last--
		}
		for ; i < last; i++ {
			if !add(tok[i]) {
				return 0, false
			}
			exp--
		}
		i = fracEnd
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		eneg := false
		if tok[i] == '+' || tok[i] == '-' {
			eneg = tok[i] == '-'
			i++
		}
		e := 0
		for ; i < len(tok); i++ {
			if e < 1_000_000 {
				e = e*10 + int(tok[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if mant == 0 {
		return 0, true
	}
	for exp < 0 {
		if mant%10 != 0 {
			return 0, false
		}
		mant /= 10
		exp++
	}
	for ; exp > 0; exp-- {
		if mant > 1e17 {
			return 0, false
		}
		mant *= 10
	}
	if mant > 1e18 {
		return 0, false
	}
	if neg {
		return -int64(mant), true
	}
	return int64(mant), true
}

// SmallInt is the fast path of reading an integer: a plain non-negative
// decimal of at most 18 digits without a leading zero, ended by a
// delimiter. ok is false for anything else (the caller then takes the
// general path).
func SmallInt(b []byte, i int) (v int64, end int, ok bool) {
	start := i
	for i < len(b) && i-start < 18 {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		v = v*10 + int64(d)
		i++
	}
	if i == start || i >= len(b) || (b[start] == '0' && i-start > 1) {
		return 0, i, false
	}
	switch b[i] {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return v, i, true
	}
	return 0, i, false
}
