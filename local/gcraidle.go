package local

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
// So a clustered gcra key keeps the last few idle gaps its own spends
// discarded, and a remote spend consumes the gaps after its instant, the
// earliest first (that is where its shift is absorbed), before it advances
// the TAT. A consumed stretch is busy from then on. The log is bounded
// (idleLen gaps, newest kept): a gap that fell out of it is treated as not
// there, which errs toward denial, by at most what a peer's spend older
// than the log would have been forgiven. A remote spend is placed at the
// start of its time bucket (a fiftieth of the burst offset), which errs the
// other way by at most that bucket's width.

// idleLen is how many idle gaps a key remembers.
const idleLen = 4

// idleGap is idle time [from, to) a bucket's own spend discarded, in Unix
// ns: the bucket's TAT was from when a spend came at to.
type idleGap struct{ from, to int64 }

// idleLog is a key's recent idle gaps, oldest first.
type idleLog struct {
	n    int
	gaps [idleLen]idleGap
}

// note records that a spend at to found the bucket idle since from
// (from < to). The oldest gap is dropped when the log is full.
func (l *idleLog) note(from, to int64) {
	if from >= to {
		return
	}
	if l.n > 0 && l.gaps[l.n-1].to == from {
		l.gaps[l.n-1].to = to // adjoining (after a split): one gap
		return
	}
	if l.n == idleLen {
		copy(l.gaps[:], l.gaps[1:])
		l.n--
	}
	l.gaps[l.n] = idleGap{from, to}
	l.n++
}

// take consumes up to need ns of idle time at or after at, earliest first,
// and returns how much it consumed. The part of a gap before at stays idle
// (for a spend dated earlier still), room permitting.
func (l *idleLog) take(at, need int64) int64 {
	got := int64(0)
	for i := 0; i < l.n && got < need; i++ {
		g := &l.gaps[i]
		if g.to <= at {
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
		case start+x == g.to: // its tail
			g.to = start
		default: // its middle: split it, or keep the head only when full
			tail := idleGap{start + x, g.to}
			g.to = start
			if l.n < idleLen {
				copy(l.gaps[i+2:l.n+1], l.gaps[i+1:l.n])
				l.gaps[i+1] = tail
				l.n++
				i++
			}
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
	shift := n * p.ei
	if l != nil {
		if tat < at {
			l.note(tat, at)
		} else {
			shift -= l.take(at, shift)
		}
	}
	return max(tat, at) + shift
}
