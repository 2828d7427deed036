package cluster

import "github.com/obol-dev/obol/gossip/packet"

// queue.go is the event queue: a binary min-heap of events by (instant,
// sequence), so that events at one instant run in the order they were
// scheduled.

type eventKind uint8

const (
	evRequest   eventKind = iota // the node's next request
	evTick                       // the node's sync tick
	evHousekeep                  // the engine's Step, every second
	evDeliver                    // a datagram reaches the nodes in to
	evDeath                      // the node dies
	evDetect                     // survivors learn of the node's death
	evProbe                      // a probe hit (Scenario.ProbeEvery)
	evFlush                      // the node's drift flush, deferred to the end of its gap
	evRepair                     // the node asks for what its peers' streams are missing
	evAsk                        // a Request from node from reaches node
	evState                      // a push/pull snapshot from node from reaches node
	evRestart                    // the node's agent stops and another takes its place (Scenario.Restarts[from])
	evLeave                      // the node's agent stops cleanly for good (Scenario.Leaves)
	evUp                         // a new agent starts at the node (Scenario.Restarts[from], or a Start when from < 0)
	evJoin                       // the other nodes learn of the node's agent (Scenario.JoinSpread after evUp)
	evSnap                       // the node writes its state file (Scenario.StateInterval)
	evPushPull                   // the node's periodic push/pull (Scenario.PushPullEvery)
)

type event struct {
	at   int64 // ns from the run's start
	seq  uint64
	kind eventKind
	node int32
	dg   *datagram
	to   []int32 // evDeliver: the receivers
	from int32   // evAsk, evState: the sender; evDetect: the departure; evRestart, evUp: the restart
	gen  uint32  // the agent of node the event is for (node.gen): stale when another took its place
	req  *packet.Request
	st   *packet.Packet // evState: the snapshot
}

// datagram is one sent datagram, decoded once for every receiver.
type datagram struct {
	from int32
	size int // payload bytes
	pkt  *packet.Packet
}

type queue struct {
	h   []event
	seq uint64
}

func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *queue) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (q *queue) pop() event {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h[last] = event{}
	q.h = q.h[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q.h) && q.less(l, m) {
			m = l
		}
		if r < len(q.h) && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}

func (q *queue) len() int { return len(q.h) }
