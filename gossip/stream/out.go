package stream

// Out is an origin's outgoing stream: the seq its next message gets and
// the recent messages, kept to be sent again on request. The zero value is
// not usable: call NewOut. Not safe for concurrent use.
type Out struct {
	next     uint64  // seq of the next message
	first    uint64  // the oldest seq still kept (== next when none)
	ring     []entry // indexed by seq % len(ring); grows to maxMsgs
	bytes    int     // bytes kept
	maxMsgs  int
	maxBytes int
}

// firstRing is the length of a new stream's ring. It doubles, up to
// maxMsgs, each time a message would overwrite one still kept: a stream
// costs memory for what it has kept, not for what it may keep (the
// cluster simulator's 200 nodes each allocated a ring of 4,096 entries, 26
// MB a run, and collecting it took more of the processor than the run).
const firstRing = 16

type entry struct {
	seq uint64
	msg []byte
}

// NewOut returns a stream whose first message is seq 1 and which keeps the
// last maxMsgs messages (at least 1), fewer when they hold more than
// maxBytes bytes (the newest is always kept).
func NewOut(maxMsgs, maxBytes int) *Out {
	maxMsgs = max(maxMsgs, 1)
	return &Out{next: 1, first: 1, ring: make([]entry, min(maxMsgs, firstRing)), maxMsgs: maxMsgs, maxBytes: maxBytes}
}

// grow doubles the ring, up to maxMsgs, keeping every message kept.
func (o *Out) grow() {
	ring := make([]entry, min(2*len(o.ring), o.maxMsgs))
	for seq := o.first; seq < o.next; seq++ {
		ring[seq%uint64(len(ring))] = o.ring[seq%uint64(len(o.ring))]
	}
	o.ring = ring
}

// Next returns the seq the next message gets.
func (o *Out) Next() uint64 { return o.next }

// Last returns the seq of the last message sent, 0 before the first.
func (o *Out) Last() uint64 { return o.next - 1 }

// Sent records msgs as the messages numbered Next(), Next()+1, … and keeps
// them (not copies: the caller must not change them). What no longer fits
// is forgotten, oldest first.
func (o *Out) Sent(msgs [][]byte) {
	for _, m := range msgs {
		e := &o.ring[o.next%uint64(len(o.ring))]
		if e.msg != nil && len(o.ring) < o.maxMsgs {
			o.grow()
			e = &o.ring[o.next%uint64(len(o.ring))]
		}
		if e.msg != nil {
			o.drop(e) // the slot's message is len(ring) seqs old
		}
		*e = entry{seq: o.next, msg: m}
		o.bytes += len(m)
		o.next++
		for o.bytes > o.maxBytes && o.first < o.next-1 {
			o.drop(&o.ring[o.first%uint64(len(o.ring))])
		}
	}
}

// drop forgets e, the oldest message kept.
func (o *Out) drop(e *entry) {
	o.bytes -= len(e.msg)
	o.first = e.seq + 1
	*e = entry{}
}

// Get returns message seq if it is still kept.
func (o *Out) Get(seq uint64) ([]byte, bool) {
	if seq < o.first || seq >= o.next {
		return nil, false
	}
	e := o.ring[seq%uint64(len(o.ring))]
	return e.msg, e.seq == seq && e.msg != nil
}

// Kept returns how many messages and bytes are kept.
func (o *Out) Kept() (msgs, bytes int) { return int(o.next - o.first), o.bytes }
