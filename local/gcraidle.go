package local

import "github.com/obol-dev/obol/internal/sat"

// gcraidle.go lets a peer's gcra spend, which arrives after this node's own
// later spends, land where it happened rather than on top of them. Pure: no
// clock, no locks.
//
// A GCRA bucket fed its spends in time order computes
//
//	tat = max(tat, t) + n·EI
//
// at each one. When a spend of n made at `at` is inserted into that chain
// after the fact, it shifts every later TAT by n·EI, less the idle time the
// chain threw away after `at`: each later spend that found the bucket idle
// (tat < t) absorbs up to t − max(tat, at) of the shift. Applying a late
// remote spend as max(tat, at) + n·EI, as if it came last, ignores those
// gaps, so the node's TAT runs later than the cluster's true one and it
// denies what a single exact bucket would grant.
//
// So a clustered gcra key keeps the idle gaps its own spends discarded, and
// a remote spend consumes the gaps after its instant, the earliest first
// (that is where its shift is absorbed), before it advances the TAT. A
// consumed stretch is busy from then on. The log is bounded (idleLen
// entries): when it is full, its two oldest entries merge into one that
// knows how much idle time lies in its span but not where. A spend dated
// inside such a span is credited as if the idle time lay as early in it as
// possible, which errs toward denial, by at most the span's busy time. A
// remote spend is placed at the start of its time bucket (a fiftieth of
// the burst offset), which errs the other way by at most that bucket's
// width.

// idleLen is how many entries a key's log holds.
const idleLen = 4

// idleGap is idle time a bucket's own spends discarded within [from, to),
// in Unix ns: idle of it. An exact gap (a spend at to found the bucket's TAT
// at from) has idle = to − from; a merged one, less.
type idleGap struct{ from, to, idle int64 }

func (g *idleGap) exact() bool { return g.idle == g.to-g.from }

// idleLog is a key's recent idle gaps, oldest first, in disjoint spans.
type idleLog struct {
	n    int
	gaps [idleLen]idleGap
}

// note records that a spend at to found the bucket idle since from
// (from < to). When the log is full its two oldest entries merge.
func (l *idleLog) note(from, to int64) {
	if from >= to {
		return
	}
	if l.n > 0 {
		if g := &l.gaps[l.n-1]; g.to == from && g.exact() {
			g.to, g.idle = to, g.idle+to-from // adjoining: one gap
			return
		}
	}
	if l.n == idleLen {
		g0, g1 := l.gaps[0], l.gaps[1]
		l.gaps[1] = idleGap{g0.from, g1.to, g0.idle + g1.idle}
		l.remove(0)
	}
	l.gaps[l.n] = idleGap{from, to, to - from}
	l.n++
}

// take consumes up to need ns of idle time at or after at, earliest first,
// and returns how much it consumed. The part of an exact gap before at
// stays idle (for a spend dated earlier still): the gap splits, or, when
// the log is full, becomes a merged entry. A merged
// entry's idle time is taken to lie as early in its span as it can.
func (l *idleLog) take(at, need int64) int64 {
	got := int64(0)
	for i := 0; i < l.n && got < need; i++ {
		g := &l.gaps[i]
		if g.to <= at {
			continue
		}
		if !g.exact() {
			avail := g.idle
			if at > g.from {
				avail = max(0, g.idle-(at-g.from))
			}
			x := min(need-got, avail)
			got += x
			if g.idle -= x; g.idle == 0 {
				l.remove(i)
				i--
			}
			continue
		}
		start := max(g.from, at)
		x := min(need-got, g.to-start)
		got += x
		switch {
		case start+x == g.to && start == g.from: // all of it
			l.remove(i)
			i--
		case start == g.from: // its head
			g.from += x
			g.idle -= x
		case start+x == g.to: // its tail
			g.to = start
			g.idle = g.to - g.from
		case l.n == idleLen: // its middle, with no room to split: merged
			g.idle -= x
		default: // its middle: split it
			tail := idleGap{start + x, g.to, g.to - start - x}
			g.to = start
			g.idle = g.to - g.from
			copy(l.gaps[i+2:l.n+1], l.gaps[i+1:l.n])
			l.gaps[i+1] = tail
			l.n++
			i++
		}
	}
	return got
}

func (l *idleLog) remove(i int) {
	copy(l.gaps[i:l.n], l.gaps[i+1:l.n])
	l.n--
	l.gaps[l.n] = idleGap{}
}

// last is the end of the newest gap, or 0.
func (l *idleLog) last() int64 {
	if l.n == 0 {
		return 0
	}
	return l.gaps[l.n-1].to
}

// gcraApplySpend is the TAT after a peer's spend of n tokens made at at
// (ns) is inserted into a chain whose TAT is tat and whose discarded idle
// gaps are in l (nil: none known). A spend after the chain's end discards
// the idle time before it like a local one, which l records.
func gcraApplySpend(p *gcraParams, tat, at, n int64, l *idleLog) int64 {
	shift := sat.Mul64(n, p.ei)
	if l != nil {
		if tat < at {
			l.note(tat, at)
		} else {
			shift -= l.take(at, shift)
		}
	}
	return sat.Add64(max(tat, at), shift)
}
