package local

import (
	"sync"

	"github.com/obol-dev/obol/internal/sat"
)

// window.go holds the two hit records the tiers algorithm reads: a per-key
// deque of (millisecond, hits) stamps and a per-resource ring of the last
// second's hits, one slot per millisecond. Times are Unix milliseconds.

// stamp is n hits made in millisecond at.
type stamp struct{ at, n int64 }

// deque is an ordered run of stamps with their sum. The zero value is empty.
// Appending reuses freed space at the front, so a steady stream of hits
// allocates nothing once the buffer has grown to its working size.
type deque struct {
	buf  []stamp
	head int
	sum  int64
}

// push records n hits at at; stamps of the same millisecond are merged.
func (d *deque) push(at, n int64) {
	d.sum = sat.Add64(d.sum, n)
	if len(d.buf) > d.head {
		if last := &d.buf[len(d.buf)-1]; last.at == at {
			last.n = sat.Add64(last.n, n)
			return
		}
	}
	if len(d.buf) == cap(d.buf) && d.head > 0 {
		k := copy(d.buf, d.buf[d.head:])
		d.buf = d.buf[:k]
		d.head = 0
	}
	d.buf = append(d.buf, stamp{at, n})
}

// prune drops the stamps made at or before cut.
func (d *deque) prune(cut int64) {
	for d.head < len(d.buf) && d.buf[d.head].at <= cut {
		d.sum -= d.buf[d.head].n
		d.head++
	}
	if d.head == len(d.buf) {
		d.buf, d.head = d.buf[:0], 0
	}
}

// clone returns a copy of d's live stamps sharing no memory with it.
func (d *deque) clone() deque { return deque{buf: append([]stamp(nil), d.live()...), sum: d.sum} }

// reset empties the deque, keeping its buffer.
func (d *deque) reset() { d.buf, d.head, d.sum = d.buf[:0], 0, 0 }

// live returns the stamps still held, oldest first.
func (d *deque) live() []stamp { return d.buf[d.head:] }

// remove takes up to n hits out of the stamps made in [from, to), newest
// first, and returns how many it took.
func (d *deque) remove(from, to, n int64) int64 {
	took := int64(0)
	for i := len(d.buf) - 1; i >= d.head && took < n; i-- {
		st := &d.buf[i]
		if st.at >= to {
			continue
		}
		if st.at < from {
			break
		}
		x := min(st.n, n-took)
		st.n -= x
		took += x
	}
	d.sum -= took
	return took
}

// first returns the time of the oldest stamp, or false when empty.
func (d *deque) first() (int64, bool) {
	if d.head == len(d.buf) {
		return 0, false
	}
	return d.buf[d.head].at, true
}

// last returns the time of the newest stamp, or false when empty.
func (d *deque) last() (int64, bool) {
	if d.head == len(d.buf) {
		return 0, false
	}
	return d.buf[len(d.buf)-1].at, true
}

// ringSize is the number of millisecond slots in a second.
const ringSize = 1000

// secondRing counts a resource's hits of the last second across all domains,
// one slot per millisecond. Safe for concurrent use through mu. Every
// decision of the resource writes mu, head and sum: they share a cache
// line, ahead of the slots.
type secondRing struct {
	mu    sync.Mutex
	head  int64 // newest millisecond advanced to; slots hold (head−1000, head]
	sum   int64
	slots [ringSize]int64
}

// advance moves the ring to millisecond t, dropping what left the second.
// Time that goes backwards leaves the ring where it is.
func (r *secondRing) advance(t int64) {
	if t <= r.head {
		return
	}
	if t-r.head >= ringSize || r.sum == 0 {
		if r.sum != 0 {
			r.slots = [ringSize]int64{}
			r.sum = 0
		}
		r.head = t
		return
	}
	for ms := r.head + 1; ms <= t; ms++ {
		s := &r.slots[ms%ringSize]
		r.sum -= *s
		*s = 0
	}
	r.head = t
}

// add records n hits at millisecond t (callers hold mu).
func (r *secondRing) add(t, n int64) {
	r.advance(t)
	if t <= r.head-ringSize {
		return
	}
	r.slots[t%ringSize] += n
	r.sum += n
}

// count returns the hits within the second before t, inclusive of t (callers hold mu).
func (r *secondRing) count(t int64) int64 {
	r.advance(t)
	return r.sum
}

// ringCursor walks a ring's future: the hits it still counts at a later
// millisecond, with no new traffic. It reads the ring without changing it.
type ringCursor struct {
	r    *secondRing
	next int64 // oldest millisecond not yet dropped
	sum  int64
}

func newRingCursor(r *secondRing) ringCursor {
	return ringCursor{r: r, next: r.head - ringSize + 1, sum: r.sum}
}

// countAt returns the ring's hits within the second before x (x ≥ head,
// called with ascending x).
func (c *ringCursor) countAt(x int64) int64 {
	for c.next <= x-ringSize && c.next <= c.r.head {
		c.sum -= c.r.slots[c.next%ringSize]
		c.next++
	}
	return c.sum
}

// nextEvent returns the first millisecond after x at which a hit leaves the
// second, or false when none will.
func (c *ringCursor) nextEvent(x int64) (int64, bool) {
	ms := max(c.next, x-ringSize+1)
	for ; ms <= c.r.head; ms++ {
		if c.r.slots[ms%ringSize] != 0 {
			return ms + ringSize, true
		}
	}
	return 0, false
}

// insert records n hits at at, which may be older than the newest stamp (a
// peer's hits arrive late, placed at the start of their time bucket): the
// stamp goes where its time belongs, so prune and the cursors still see the
// deque in time order.
func (d *deque) insert(at, n int64) {
	last, ok := d.last()
	if !ok || at >= last {
		d.push(at, n)
		return
	}
	d.sum = sat.Add64(d.sum, n)
	i := len(d.buf) - 1
	for i > d.head && d.buf[i-1].at >= at {
		i--
	}
	if d.buf[i].at == at {
		d.buf[i].n = sat.Add64(d.buf[i].n, n)
		return
	}
	d.buf = append(d.buf, stamp{})
	copy(d.buf[i+1:], d.buf[i:])
	d.buf[i] = stamp{at, n}
}
