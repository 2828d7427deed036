package stream

import (
	"slices"
	"strings"
)

// Options tune a receiver. The zero value of a field is its default.
type Options struct {
	// Wait is how long a gap stays open before it is asked for: time for
	// a datagram that is only late (reordered) to arrive, ns. 0 = 5 ms.
	// It is each origin's least: a message that arrives twice (a repair
	// that crossed its late original) doubles that origin's wait, up to
	// MaxWait, and a gap filled by an answer to an ask takes an eighth of
	// it back, down to Wait. (A busy receiver reorders a lot: memberlist
	// hands the newest of its queued messages out first.)
	Wait int64
	// MaxWait caps an origin's wait, ns. 0 = 5 s (memberlist's queue of 4,096
	// messages, handed out newest first, can hold seconds of them).
	MaxWait int64
	// Retry is the least time between the first two asks of one seq, ns;
	// it doubles after each ask (Retry, 2·Retry, 4·Retry, …), so that a
	// peer slow to answer (a long receive queue) is not asked ever more
	// often. 0 = 50 ms.
	Retry int64
	// Tries is how many times a seq is asked for before the receiver
	// gives up on it and resyncs with its origin (with the defaults, 1.55
	// s after the first ask). 0 = 5.
	Tries int
	// MaxGap is the most seqs an origin may have missing at once; a gap
	// wider than that (a long partition, a peer far behind) resyncs with
	// the origin instead of asking message by message. 0 = 256.
	MaxGap int
}

// Defaults of Options.
const (
	DefaultWait    = 5e6
	DefaultMaxWait = 5e9
	DefaultRetry   = 50e6
	DefaultTries   = 5
	DefaultMaxGap  = 256
)

func (o Options) withDefaults() Options {
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.MaxWait < o.Wait {
		o.MaxWait = max(DefaultMaxWait, o.Wait)
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	if o.Tries <= 0 {
		o.Tries = DefaultTries
	}
	if o.MaxGap <= 0 {
		o.MaxGap = DefaultMaxGap
	}
	return o
}

// In is a receiver's view of the streams it hears: per origin, the
// highest seq heard and the seqs missing below it. The zero value is not
// usable: call NewIn. Not safe for concurrent use.
type In struct {
	opt     Options
	origins map[string]*origin
	open    int // origins with something missing or a resync to ask
	// gone keeps, for an origin forgotten (it left or died), the
	// incarnation and highest seq it had reached, so that a replay of its
	// old messages is not news once it is back; at most MaxGone of them.
	gone map[string]floor
}

// floor is where a forgotten origin's stream had got to.
type floor struct{ inc, high uint64 }

// MaxGone bounds the forgotten origins an In remembers (Forget): past it,
// an arbitrary one is dropped to make room, and a replay of that one's
// old messages is news again, as before it was ever heard.
const MaxGone = 4096

type origin struct {
	inc     uint64
	start   uint64 // the seq the stream was started at
	high    uint64 // the highest seq heard or covered
	missing []miss // ascending seq
	resync  bool
	wait    int64 // ns: how long its gaps stay open before an ask (Options.Wait)
}

// miss is a seq not heard yet.
type miss struct {
	seq   uint64
	since int64 // when its gap opened, ns
	asked int64 // when it was last asked for, ns (0: never)
	tries int
}

// NewIn returns a receiver that hears nothing yet.
func NewIn(o Options) *In {
	return &In{opt: o.withDefaults(), origins: make(map[string]*origin), gone: make(map[string]floor)}
}

// stream returns from's state for incarnation inc, starting it at seq
// high when it is new or inc is a newer incarnation; nil when inc is older
// than the one followed (its messages are stale: the merge ignores them).
func (in *In) stream(from string, inc, high uint64) (*origin, bool) {
	o := in.origins[from]
	switch {
	case o == nil:
		o = &origin{inc: inc, start: high, high: high, wait: in.opt.Wait}
		in.origins[strings.Clone(from)] = o
		return o, true
	case inc < o.inc:
		return nil, false
	case inc > o.inc:
		in.setOpen(o, false)
		*o = origin{inc: inc, start: high, high: high, wait: in.opt.Wait}
		return o, true
	}
	return o, false
}

func (in *In) setOpen(o *origin, resync bool) {
	was := len(o.missing) > 0 || o.resync
	if !resync {
		o.missing = o.missing[:0]
	}
	o.resync = resync
	if now := len(o.missing) > 0 || o.resync; now != was {
		if now {
			in.open++
		} else {
			in.open--
		}
	}
}

// Heard records that message seq of from's incarnation inc arrived at now,
// and reports whether it is news: false for one heard before (a repair
// that crossed a late original, a duplicate) and true otherwise, a stale
// incarnation's included (the merge judges those). The first seq heard of
// an incarnation starts its stream: nothing before it is asked for (a
// joiner's push/pull covers it), and what arrives from before it (a
// message overtaken by a later one) is news.
func (in *In) Heard(from string, inc, seq uint64, now int64) bool {
	if seq == 0 {
		return true // unsequenced
	}
	if f, ok := in.gone[from]; ok {
		if inc < f.inc || inc == f.inc && seq <= f.high {
			return false // from before the origin was forgotten: a replay
		}
		if inc > f.inc {
			delete(in.gone, from)
		}
	}
	o, fresh := in.stream(from, inc, seq)
	if o == nil || fresh {
		return true
	}
	switch {
	case seq > o.high:
		gap := seq - o.high - 1
		if gap > 0 {
			if gap+uint64(len(o.missing)) > uint64(in.opt.MaxGap) {
				in.setOpen(o, true) // too much to ask for: a snapshot instead
				o.missing = o.missing[:0]
			} else {
				was := len(o.missing) > 0 || o.resync
				for s := o.high + 1; s < seq; s++ {
					o.missing = append(o.missing, miss{seq: s, since: now})
				}
				if !was {
					in.open++
				}
			}
		}
		o.high = seq
		return true
	case seq == o.high:
		o.slower(in.opt.MaxWait)
		return false
	case seq < o.start:
		return true // from before the stream started here: untracked
	}
	i, ok := slices.BinarySearchFunc(o.missing, seq, func(m miss, s uint64) int {
		switch {
		case m.seq < s:
			return -1
		case m.seq > s:
			return 1
		}
		return 0
	})
	if !ok {
		o.slower(in.opt.MaxWait)
		return false
	}
	if o.missing[i].asked != 0 {
		o.wait = max(in.opt.Wait, o.wait-o.wait/8)
	}
	o.missing = slices.Delete(o.missing, i, i+1)
	if len(o.missing) == 0 && !o.resync {
		in.open--
	}
	return true
}

// slower doubles o's wait: a message arrived twice, the second copy most
// likely an answer to an ask made while the original was only late.
func (o *origin) slower(most int64) { o.wait = min(2*o.wait, most) }

// Covered records that a snapshot of from's incarnation inc, taken when
// the origin's next message was to be seq next, holds the content of every
// message before next: gaps below it close, and a stream not followed yet
// starts there (a loss of message next itself is then found).
func (in *In) Covered(from string, inc, next uint64) {
	if next == 0 {
		return
	}
	o, fresh := in.stream(from, inc, next-1)
	if o == nil {
		return
	}
	if fresh {
		o.start = next
		return
	}
	was := len(o.missing) > 0 || o.resync
	k := 0
	for k < len(o.missing) && o.missing[k].seq < next {
		k++
	}
	o.missing = slices.Delete(o.missing, 0, k)
	o.high = max(o.high, next-1)
	o.resync = false
	if was && len(o.missing) == 0 {
		in.open--
	}
}

// Forget drops from's stream (it left or died); a later message starts it
// again, but one from an earlier incarnation, or from the same one and no
// later than the highest seq heard before, is not news (Heard): a replay
// of the origin's old messages. Up to MaxGone forgotten origins are
// remembered so.
func (in *In) Forget(from string) {
	o := in.origins[from]
	if o == nil {
		return
	}
	in.setOpen(o, false)
	delete(in.origins, from)
	if _, ok := in.gone[from]; !ok && len(in.gone) >= MaxGone {
		for name := range in.gone {
			delete(in.gone, name)
			break
		}
	}
	in.gone[from] = floor{inc: o.inc, high: o.high}
}

// Pending reports whether any origin has a gap open or a resync to ask.
func (in *In) Pending() bool { return in.open > 0 }

// NextDue returns the earliest instant, ns, at which Due has something to
// do, and false when nothing is pending.
func (in *In) NextDue() (int64, bool) {
	if in.open == 0 {
		return 0, false
	}
	var at int64
	found := false
	for _, o := range in.origins {
		if o.resync {
			return 0, true // at once
		}
		for _, m := range o.missing {
			t := m.since + o.wait
			if m.asked != 0 {
				t = m.asked + o.retry(in.opt.Retry, m.tries)
			}
			if !found || t < at {
				at, found = t, true
			}
		}
	}
	return at, found
}

// retry is how long after its tries-th ask a seq of o is asked again (or,
// after the last, given up on): Retry (or o's wait, when longer) doubled
// tries−1 times.
func (o *origin) retry(base int64, tries int) int64 {
	return max(base, o.wait) << min(max(tries-1, 0), 20)
}

// Due returns what is due at now: it calls ask with each origin whose
// missing seqs are due to be asked for (open for Wait, and past their
// retry since the last ask), at most limit per call, in seq order, origins in name order; and
// it returns the origins to resync with instead, in name order (a gap
// wider than MaxGap, or seqs asked Tries times in vain), whose gaps it
// closes. A message of a closed gap that still arrives is taken for a
// duplicate: the resync's snapshot holds what it held.
func (in *In) Due(now int64, limit int, ask func(from string, inc uint64, seqs []uint64)) (resync []string) {
	if in.open == 0 {
		return nil
	}
	names := make([]string, 0, in.open)
	for name, o := range in.origins {
		if len(o.missing) > 0 || o.resync {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var seqs []uint64
	for _, name := range names {
		o := in.origins[name]
		if !o.resync {
			for i := range o.missing {
				if m := &o.missing[i]; m.tries >= in.opt.Tries && now-m.asked >= o.retry(in.opt.Retry, m.tries) {
					o.resync = true
					break
				}
			}
		}
		if o.resync {
			resync = append(resync, name)
			o.missing = o.missing[:0]
			o.resync = false
			in.open--
			continue
		}
		seqs = seqs[:0]
		for i := range o.missing {
			m := &o.missing[i]
			if now-m.since < o.wait || (m.asked != 0 && now-m.asked < o.retry(in.opt.Retry, m.tries)) {
				continue
			}
			m.asked, m.tries = now, m.tries+1
			seqs = append(seqs, m.seq)
			if len(seqs) == limit {
				ask(name, o.inc, seqs)
				seqs = seqs[:0]
			}
		}
		if len(seqs) > 0 {
			ask(name, o.inc, seqs)
		}
	}
	return resync
}
