package stream

import "strings"

// Targets is a node's outgoing targeted streams: its messages to one
// receiver each (owner mode's counts to a key's owner, and sums), numbered
// 1, 2, … per receiver, and the recent ones of all receivers together,
// kept to be sent again to the receiver that asks: the last maxMsgs
// messages, fewer when they hold more than maxBytes bytes, oldest
// forgotten first. A receiver notes the seqs it hears with an In like any
// stream's. The zero value is not usable: call NewTargets. Not safe for
// concurrent use.
type Targets struct {
	next     map[string]uint64 // receiver → the seq of its next message
	kept     map[lane][]byte
	fifo     []lane // kept lanes, oldest first, from head
	head     int
	bytes    int
	maxMsgs  int
	maxBytes int
}

// lane is one message of one receiver's stream.
type lane struct {
	to  string
	seq uint64
}

// NewTargets returns targeted streams whose first message to any receiver
// is seq 1, keeping the last maxMsgs messages (at least 1) in at most
// maxBytes bytes (the newest is always kept).
func NewTargets(maxMsgs, maxBytes int) *Targets {
	return &Targets{next: make(map[string]uint64), kept: make(map[lane][]byte), maxMsgs: max(maxMsgs, 1), maxBytes: maxBytes}
}

// Next returns the seq the next message to receiver to gets. A receiver's
// numbering goes on for the node's lifetime, whatever becomes of the
// receiver: one that forgot it (a restart) starts again where it resumes.
func (t *Targets) Next(to string) uint64 {
	if s, ok := t.next[to]; ok {
		return s
	}
	return 1
}

// Sent records msgs as the messages to receiver to numbered Next(to),
// Next(to)+1, … and keeps them (not copies: the caller must not change
// them). What no longer fits is forgotten, oldest first.
func (t *Targets) Sent(to string, msgs [][]byte) {
	if len(msgs) == 0 {
		return
	}
	s, ok := t.next[to]
	if !ok {
		s = 1
		to = strings.Clone(to)
	}
	for _, m := range msgs {
		l := lane{to, s}
		t.kept[l] = m
		t.fifo = append(t.fifo, l)
		t.bytes += len(m)
		s++
		for len(t.fifo)-t.head > t.maxMsgs || (t.bytes > t.maxBytes && len(t.fifo)-t.head > 1) {
			old := t.fifo[t.head]
			t.fifo[t.head] = lane{}
			t.head++
			t.bytes -= len(t.kept[old])
			delete(t.kept, old)
		}
		if t.head > len(t.fifo)/2 && t.head > 64 { // compact
			t.fifo = append(t.fifo[:0], t.fifo[t.head:]...)
			t.head = 0
		}
	}
	t.next[to] = s
}

// Get returns message seq of the stream to receiver to if it is still
// kept.
func (t *Targets) Get(to string, seq uint64) ([]byte, bool) {
	m, ok := t.kept[lane{to, seq}]
	return m, ok
}

// Kept returns how many messages and bytes are kept.
func (t *Targets) Kept() (msgs, bytes int) { return len(t.fifo) - t.head, t.bytes }

// Begin starts from's stream of incarnation inc at seq first when it is
// not followed yet, so that seqs from first on that never arrive are
// missing: a targeted stream starts at 1, and a receiver hears its
// beginning (or, having restarted, finds everything before the seq it
// resumes at missing, which is a reship). It does nothing to a stream
// already followed.
func (in *In) Begin(from string, inc, first uint64) {
	if first == 0 {
		return
	}
	if f, ok := in.gone[from]; ok && f.inc == inc && first <= f.high {
		first = f.high + 1 // heard before it was forgotten (Forget)
	}
	if o, fresh := in.stream(from, inc, first-1); fresh {
		o.start = first
	}
}
