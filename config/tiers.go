package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/obol-dev/obol/internal/safefile"
)

// ParseTiers parses the compact tier syntax of the Charon simulator:
// comma-separated groups of four numbers, "limit,window,active,cooldown",
// the last three in seconds. Decimals are allowed for the durations ("0.5"
// is 500ms); limit must be a whole number; every tier is not skippable.
// Spaces around numbers are ignored; "" is the empty tier list (nil), which
// rejects every request.
//
//	ParseTiers("5,1,1,0,50,5,5,15")
//	// [{Limit:5 Window:1s Active:1s} {Limit:50 Window:5s Active:5s Cooldown:15s}]
//
// The tiers are validated (limit ≥ 1, window > 0, active ≥ 0, cooldown ≥ 0)
// but returned as written, not normalized (see NormalizeTiers). The error is
// a *Problems with paths like `tiers[1].limit`. Safe for concurrent use.
func ParseTiers(s string) ([]Tier, error) {
	d := newDecoder(nil, "", len(s))
	ts := compactTiers(func(p, msg string) { d.fail(p, nil, "%s", msg) }, "tiers", s)
	var l problemList
	checkTiers(&l, "tiers", ts)
	if err := asError(d.merge(l.list)); err != nil {
		return nil, err
	}
	return ts, nil
}

// quoteTiers quotes a tier list for an error message: whole up to 256
// bytes (64 tiers of short numbers), else a short excerpt and its length.
func quoteTiers(s string) string {
	if len(s) <= 256 {
		return strconv.Quote(s)
	}
	return safefile.Excerpt(s)
}

var compactNumberRe = regexp.MustCompile(`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)

// compactTiers parses the compact form, reporting syntax problems through
// fail with paths under path (`path[i].limit`). Value rules are left to
// checkTiers.
func compactTiers(fail func(path, msg string), path, s string) []Tier {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	// Counted before anything is parsed: a list of 100,000 tiers is
	// refused in a pass over its commas, not after parsing each number
	// (145 ms of processor time for one /v1/simulate body).
	n := strings.Count(s, ",") + 1
	if n%4 != 0 {
		fail(path, fmt.Sprintf("the compact form is groups of 4 numbers (limit, window s, active s, cooldown s), got %d number(s) in %s", n, quoteTiers(s)))
		return nil
	}
	if n/4 > MaxTiers {
		fail(path, fmt.Sprintf("at most %d tiers, got %d", MaxTiers, n/4))
		return nil
	}
	toks := strings.Split(s, ",")
	ts := make([]Tier, len(toks)/4)
	for i, tok := range toks {
		tok = strings.TrimSpace(tok)
		t, p := &ts[i/4], index(path, i/4)
		var err error
		switch i % 4 {
		case 0:
			p = field(p, "limit")
			t.Limit, err = compactInt(tok)
		case 1:
			p = field(p, "window")
			t.Window, err = compactSeconds(tok)
		case 2:
			p = field(p, "active")
			t.Active, err = compactSeconds(tok)
		case 3:
			p = field(p, "cooldown")
			t.Cooldown, err = compactSeconds(tok)
		}
		if err != nil {
			fail(p, err.Error())
		}
	}
	return ts
}

func compactNumber(tok string) error {
	if tok == "" {
		return errors.New("missing number (two commas in a row, or a trailing comma)")
	}
	if !compactNumberRe.MatchString(tok) {
		return fmt.Errorf("must be a number, got %q", tok)
	}
	return nil
}

// compactInt parses a whole number such as "5" or "5.0", a tier's limit:
// one out of int64's range is refused with the bound it is beyond.
func compactInt(tok string) (int, error) {
	if err := compactNumber(tok); err != nil {
		return 0, err
	}
	whole, frac, _ := strings.Cut(tok, ".")
	if strings.Trim(frac, "0") != "" {
		return 0, fmt.Errorf("must be a whole number, got %s", tok)
	}
	if whole == "" || whole == "+" || whole == "-" {
		return 0, nil
	}
	v, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || v > MaxLimit || v < -MaxLimit {
		if strings.HasPrefix(whole, "-") {
			return 0, fmt.Errorf("must be ≥ %d, got %s", minTierLimit, tok)
		}
		return 0, fmt.Errorf("must be ≤ %d, got %s", MaxLimit, tok)
	}
	return int(v), nil
}

// compactSeconds parses a decimal number of seconds exactly ("0.1" is
// 100ms, with no floating-point rounding).
func compactSeconds(tok string) (time.Duration, error) {
	if err := compactNumber(tok); err != nil {
		return 0, err
	}
	v, err := time.ParseDuration(tok + "s")
	if err != nil {
		if strings.HasPrefix(tok, "-") {
			return 0, fmt.Errorf("must be ≥ 0, got %s seconds", tok)
		}
		return 0, fmt.Errorf("must be ≤ %s (100 years), got %s seconds", MaxDuration, tok)
	}
	return v, nil
}
