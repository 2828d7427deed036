package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a configuration: where it is and what is
// wrong. Path names the value the way a reader would find it in the file, for
// example `resources["api/search"].tiers[1].limit`; it is "" for problems with
// the document as a whole (a YAML syntax error). Line is the 1-based line of
// the value in the file it was parsed from, or 0 when unknown (a Config built
// in Go and checked with Validate).
type Problem struct {
	Path    string
	Message string
	Line    int
}

// String returns "path: message", or just the message when Path is "".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Problems is the error returned by Parse, ParseResource, Load, ParseTiers and
// the Validate methods: every problem found, sorted by path (indices compare
// as numbers, so tiers[2] comes before tiers[10]). It is never empty when
// returned as an error. Callers reach it with errors.As:
//
//	var ps *config.Problems
//	if errors.As(err, &ps) {
//		for _, p := range *ps { ... }
//	}
type Problems []Problem

// Error returns one problem per line, "path: message", sorted by path.
func (ps *Problems) Error() string {
	if ps == nil || len(*ps) == 0 {
		return "config: no problems"
	}
	var b strings.Builder
	for i, p := range *ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// problemList collects problems while a decoder or a check walks a config.
type problemList struct {
	list []Problem
}

func (l *problemList) add(path string, format string, args ...any) {
	l.list = append(l.list, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// sortProblems sorts by path (natural order), then message, and drops exact
// duplicates (the same path and message reported twice).
func sortProblems(ps []Problem) []Problem {
	sort.SliceStable(ps, func(i, j int) bool {
		if c := naturalCompare(ps[i].Path, ps[j].Path); c != 0 {
			return c < 0
		}
		return ps[i].Message < ps[j].Message
	})
	out := ps[:0]
	for i, p := range ps {
		if i > 0 && p.Path == ps[i-1].Path && p.Message == ps[i-1].Message {
			continue
		}
		out = append(out, p)
	}
	return out
}

// asError returns nil for no problems, else the sorted *Problems.
func asError(ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	sorted := Problems(sortProblems(ps))
	return &sorted
}

// naturalCompare compares a and b byte by byte, except that runs of decimal
// digits compare by numeric value.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			da, db := digitRun(a), digitRun(b)
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return cmpInt(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			if da != db {
				return cmpInt(da, db)
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmpInt(int(a[0]), int(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return cmpInt(len(a), len(b))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digitRun(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Path building. Struct fields are joined with '.', list items are [i], map
// entries are ["key"] with the key quoted as a Go string.

func field(path, name string) string {
	if path == "" {
		return name
	}
	if path == limitPath {
		if p, ok := limitPaths[name]; ok {
			return p
		}
	}
	return path + "." + name
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func entry(path, key string) string { return path + "[" + strconv.Quote(key) + "]" }
