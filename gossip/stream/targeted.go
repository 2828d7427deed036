package stream

import "strings"

// Targeted streams. A node's messages to one receiver (counts to a key's
// owner, sums) are numbered per receiver (Lanes) and are not kept: a
// receiver that finds one missing asks its origin to send again
// everything it routes to it (a reship), under new seqs, rather than the
// lost messages themselves. It notes seqs with an In like any stream and
// asks with Reships, which closes the gaps it asks about.

// Lanes numbers a node's targeted messages, 1, 2, … per receiver. The
// zero value is ready to use. Not safe for concurrent use.
type Lanes struct{ next map[string]uint64 }

// Take reserves n seqs of the stream to receiver to and returns the
// first. A receiver's numbering goes on for the node's lifetime, whatever
// becomes of the receiver: a receiver that forgot it (a restart) starts
// again wherever it resumes.
func (l *Lanes) Take(to string, n int) uint64 {
	if l.next == nil {
		l.next = make(map[string]uint64)
	}
	s, ok := l.next[to]
	if !ok {
		s = 1
		to = strings.Clone(to)
	}
	l.next[to] = s + uint64(max(n, 0))
	return s
}

// Reships calls ask, at now (ns), for each origin of in with a gap due (open
// for the origin's wait) or a resync due, in name order, with the seqs
// found missing (up to limit; none for a resync): the receiver is to ask
// that origin for a reship. The gaps of every origin asked are closed:
// what the reship brings comes under new seqs, so the missing ones are
// never waited for again. An origin's gaps that are not due yet stay open.
func (in *In) Reships(now int64, limit int, ask func(from string, inc uint64, missing []uint64)) {
	type asked struct {
		from string
		inc  uint64
		seqs []uint64
	}
	var all []asked
	resync := in.Due(now, limit, func(from string, inc uint64, seqs []uint64) {
		if n := len(all); n > 0 && all[n-1].from == from {
			return // the rest of a long gap: one reship covers it
		}
		all = append(all, asked{from, inc, append([]uint64(nil), seqs...)})
	})
	for _, a := range all {
		o := in.origins[a.from]
		in.Covered(a.from, a.inc, o.high+1)
		ask(a.from, a.inc, a.seqs)
	}
	for _, from := range resync {
		if o := in.origins[from]; o != nil {
			ask(from, o.inc, nil)
		}
	}
}
