package cluster

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
)

// churn.go is agents that come and go: restarts (clean or crashed, under
// the same name or a new one, with or without a state file), late starts
// and clean leaves, the joins that follow (a push/pull with a seed, then,
// JoinSpread later, the others' Welcome), the departures that precede
// NodeGone, the state files, and memberlist's periodic push/pull.

// departure is an agent that stopped, until the others learn of it.
type departure struct {
	name string
	idx  int
	gen  uint32
}

// lifeEvent is one of a node's churn events, for validation.
type lifeEvent struct {
	at, down time.Duration
	field    string
	kind     byte // 's'tart, 'r'estart, 'l'eave, 'd'eath
}

// validateChurn checks the churn fields: each node's starts, restarts,
// leaves and deaths must follow one another (see Scenario.Restarts).
func (s *Scenario) validateChurn() error {
	switch {
	case s.StateInterval < 0 || (s.StateInterval > 0 && s.StateInterval < time.Millisecond):
		return bad("state_interval", "must be 0 (%s) or at least 1ms, got %s", DefaultStateInterval, s.StateInterval)
	case s.JoinSpread < 0 && s.JoinSpread != NoDelay:
		return bad("join_spread", "must be ≥ 0 (0 = %s; NoDelay for none), got %s", DefaultJoinSpread, s.JoinSpread)
	case s.PushPullEvery < 0 || (s.PushPullEvery > 0 && s.PushPullEvery < time.Millisecond):
		return bad("push_pull_every", "must be 0 (not modelled) or at least 1ms, got %s", s.PushPullEvery)
	}
	per := map[int][]lifeEvent{}
	node := func(f string, n int, at time.Duration) error {
		if n < 0 || n >= s.Nodes {
			return bad(f+".node", "node %d is not in 0 to %d", n, s.Nodes-1)
		}
		if at < 0 {
			return bad(f+".at", "must be ≥ 0, got %s", at)
		}
		return nil
	}
	for i, r := range s.Restarts {
		f := fmt.Sprintf("restarts[%d]", i)
		if err := node(f, r.Node, r.At); err != nil {
			return err
		}
		if r.Down < 0 {
			return bad(f+".down", "must be ≥ 0, got %s", r.Down)
		}
		per[r.Node] = append(per[r.Node], lifeEvent{at: r.At, down: r.Down, field: f, kind: 'r'})
	}
	started := map[int]bool{}
	for i, st := range s.Starts {
		f := fmt.Sprintf("starts[%d]", i)
		if err := node(f, st.Node, st.At); err != nil {
			return err
		}
		if started[st.Node] {
			return bad(f+".node", "node %d starts twice", st.Node)
		}
		started[st.Node] = true
		per[st.Node] = append(per[st.Node], lifeEvent{at: st.At, field: f, kind: 's'})
	}
	for i, l := range s.Leaves {
		f := fmt.Sprintf("leaves[%d]", i)
		if err := node(f, l.Node, l.At); err != nil {
			return err
		}
		per[l.Node] = append(per[l.Node], lifeEvent{at: l.At, field: f, kind: 'l'})
	}
	for i, d := range s.Deaths {
		per[d.Node] = append(per[d.Node], lifeEvent{at: d.At, field: fmt.Sprintf("deaths[%d]", i), kind: 'd'})
	}
	for n, evs := range per {
		slices.SortStableFunc(evs, func(a, b lifeEvent) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			if a.kind == 's' || b.kind == 's' { // a start before what follows it
				return boolInt(b.kind == 's') - boolInt(a.kind == 's')
			}
			return 0
		})
		up, from, gone := !started[n], time.Duration(-1), ""
		for _, e := range evs {
			switch {
			case e.kind == 's' && (up || gone != ""):
				return bad(e.field+".at", "node %d must start before any other of its events", n)
			case e.kind == 's':
				up, from = true, e.at
				continue
			case gone != "":
				return bad(e.field+".at", "node %d is gone by then (%s)", n, gone)
			case !up:
				return bad(e.field+".at", "node %d has not started by %s", n, e.at)
			case e.at <= from:
				return bad(e.field+".at", "node %d is up again only at %s, got %s", n, from, e.at)
			}
			if e.kind == 'r' {
				from = e.at + e.down
				continue
			}
			gone = e.field
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// churnSetup schedules the churn events and marks the nodes that start
// late (before the first Step).
func (sm *sim) churnSetup() {
	for i, r := range sm.sc.Restarts {
		if r.StateFile {
			sm.nodes[r.Node].stateFile = true
		}
		sm.q.push(event{at: int64(r.At), kind: evRestart, node: int32(r.Node), from: int32(i)})
	}
	for _, st := range sm.sc.Starts {
		sm.q.push(event{at: int64(st.At), kind: evUp, node: int32(st.Node), from: -1})
	}
	for _, l := range sm.sc.Leaves {
		sm.q.push(event{at: int64(l.At), kind: evLeave, node: int32(l.Node)})
	}
	if iv := sm.stateEvery(); iv > 0 {
		for _, nd := range sm.nodes {
			if nd.stateFile {
				sm.q.push(event{at: iv, kind: evSnap, node: int32(nd.idx)})
			}
		}
	}
	if sm.sc.PushPullEvery > 0 {
		for _, nd := range sm.nodes {
			if !nd.late {
				sm.q.push(event{at: int64(sm.ppRand.Float64() * float64(sm.pushPullEvery())), kind: evPushPull, node: int32(nd.idx)})
			}
		}
	}
}

func (sm *sim) stateEvery() int64 {
	if sm.sc.StateInterval > 0 {
		return int64(sm.sc.StateInterval)
	}
	return int64(DefaultStateInterval)
}

// pushPullEvery is memberlist's push/pull interval at the current size:
// scaled by ⌈log2(N) − log2(32)⌉ + 1 past 32 members.
func (sm *sim) pushPullEvery() int64 {
	iv := int64(sm.sc.PushPullEvery)
	if sm.live > 32 {
		iv = int64(float64(iv) * (math.Ceil(math.Log2(float64(sm.live))-5) + 1))
	}
	return iv
}

// churn runs a churn event; it reports false for one that is stale or
// past the end of the load.
func (sm *sim) churn(e event, nd *node) {
	switch e.kind {
	case evRestart:
		r := sm.sc.Restarts[e.from]
		sm.stop(nd, !r.Crash)
		sm.q.push(event{at: e.at + int64(r.Down), kind: evUp, node: e.node, from: e.from})
	case evLeave:
		sm.stop(nd, true)
	case evUp:
		sm.up(nd, int(e.from))
	case evJoin:
		if e.gen == nd.gen && !nd.dead {
			sm.joined(nd)
		}
	case evSnap:
		if !nd.dead {
			sm.writeState(nd)
		}
		sm.q.push(event{at: e.at + sm.stateEvery(), kind: evSnap, node: e.node})
	case evPushPull:
		if e.gen != nd.gen || nd.dead {
			return
		}
		sm.periodicPushPull(nd)
		sm.q.push(event{at: e.at + sm.pushPullEvery(), kind: evPushPull, node: e.node, gen: nd.gen})
	}
}

// stop ends nd's agent: cleanly (a last Step ships what it has not
// shipped, in owner mode it hands its counts on (reconcile.Cluster.
// Handover), it writes its state file when it keeps one, and the others
// learn of it at once) or as a crash (they learn of it DetectAfter
// later).
func (sm *sim) stop(nd *node, clean bool) {
	at := sm.now + sm.detect
	if clean {
		nd.rec.Step(sm.at(sm.now))
		nd.rec.Handover(sm.at(sm.now))
		if nd.stateFile {
			sm.writeState(nd)
		}
		at = sm.now
	}
	nd.dead = true
	sm.conv.died(nd.idx, sm.now)
	sm.departs = append(sm.departs, departure{name: nd.name, idx: nd.idx, gen: nd.gen})
	sm.q.push(event{at: at, kind: evDetect, node: int32(nd.idx), from: int32(len(sm.departs) - 1)})
}

// departed is the others learning that departure d's agent is gone, as
// gossip hands memberlist's leave or death on: unless its name is back
// (a restart under the same name that memberlist saw alive first), it is
// no longer a member, and every running node calls NodeGone for it and
// forgets its streams.
func (sm *sim) departed(d departure) {
	cur := sm.nodes[d.idx]
	if cur.gen != d.gen && cur.name == d.name && !cur.dead {
		return // the name is alive again
	}
	if !sm.listed[d.name] {
		return
	}
	delete(sm.listed, d.name)
	if cur.name == d.name {
		cur.listed = false
	}
	sm.live--
	sm.placeRing()
	for _, o := range sm.nodes {
		if !o.dead {
			o.rec.NodeGone(d.name)
			if o.in != nil {
				o.in.Forget(d.name)
			}
			if o.tin != nil {
				o.tin.Forget(d.name)
			}
		}
	}
}

// up starts a new agent at nd for restart r (a Start when r < 0): it
// restores the node's state file when the restart says so, joins with a
// push/pull with the lowest-index running node (none: it starts alone),
// and JoinSpread later the others learn of it. Its load starts once the
// seed's state reached it, as the agent listens only after its join's
// push/pull returned (or at once when the join failed: it runs alone).
func (sm *sim) up(nd *node, r int) {
	name := nd.name
	stateFile := false
	if r >= 0 {
		rs := sm.sc.Restarts[r]
		nd.restarts++
		if !rs.SameName {
			name = sm.nodePrefix + strconv.Itoa(nd.idx) + "-r" + strconv.Itoa(nd.restarts)
		}
		stateFile = rs.StateFile
	}
	if sm.byName[nd.name] == nd.idx && name != nd.name {
		delete(sm.byName, nd.name)
	}
	inc := uint64(base.UnixNano()+sm.now) + uint64(nd.idx)
	if nd.rec != nil && inc <= nd.rec.Incarnation() {
		inc = nd.rec.Incarnation() + 1
	}
	nd.gen++
	sm.agent(nd, name, inc)
	nd.dead, nd.late = false, false
	nd.listed = sm.listed[name]
	sm.byName[name] = nd.idx
	t := sm.at(sm.now)
	if stateFile && nd.state != nil {
		p, err := packet.DecodeState(nd.state)
		if err != nil {
			sm.err = fmt.Errorf("sim/cluster: node %d: its state file does not decode: %w", nd.idx, err)
			return
		}
		nd.rec.Restore(p)
	}
	sm.res.Joins++
	ready := sm.now // the first request: the agent listens once its join returned
	for _, o := range sm.nodes {
		if o != nd && !o.dead {
			if sm.pushPull(nd, o, true) {
				ready = sm.now + sm.delay // the seed's state reached it (an event before any request at that instant)
			}
			break
		}
	}
	nd.rec.Step(t)
	sm.joins = append(sm.joins, joinRec{idx: nd.idx, gen: nd.gen, at: sm.now, lag: -1})
	nd.join = len(sm.joins) - 1
	sm.q.push(event{at: sm.now + int64(nd.jit.Float64()*float64(sm.sync)), kind: evTick, node: int32(nd.idx), gen: nd.gen})
	sm.q.push(event{at: sm.now + int64(time.Second), kind: evHousekeep, node: int32(nd.idx), gen: nd.gen})
	sm.q.push(event{at: sm.now + sm.spread, kind: evJoin, node: int32(nd.idx), gen: nd.gen})
	if sm.sc.PushPullEvery > 0 {
		sm.q.push(event{at: sm.now + sm.pushPullEvery(), kind: evPushPull, node: int32(nd.idx), gen: nd.gen})
	}
	if nd.rate > 0 {
		if sm.sc.Arrivals == ArrivalsPoisson {
			nd.next = ready
		} else {
			nd.k = max(0, int64(math.Ceil(float64(ready)/1e9*nd.rate-nd.phase)))
		}
		sm.scheduleRequest(nd)
	}
}

// joined is every other member learning of nd's agent: it is a member,
// counted live, and every running node sends it what it changed lately
// (reconcile.Cluster.Welcome).
func (sm *sim) joined(nd *node) {
	if !sm.listed[nd.name] {
		sm.listed[nd.name] = true
		sm.live++
		sm.placeRing()
	}
	nd.listed = true
	for _, o := range sm.nodes {
		if o != nd && !o.dead {
			o.rec.Welcome(nd.name)
		}
	}
}

// writeState writes nd's state file: its Snapshot, as the agent encodes
// it (packet.EncodeState).
func (sm *sim) writeState(nd *node) {
	b, err := packet.EncodeState(nd.rec.Snapshot())
	if err != nil {
		sm.err = fmt.Errorf("sim/cluster: node %d: state file: %w", nd.idx, err)
		return
	}
	nd.state = b
	sm.res.StateWrites++
}

// periodicPushPull is memberlist's periodic push/pull of nd with one
// member picked at random (not itself); it fails, as a TCP dial would,
// when that member is down or cut off.
func (sm *sim) periodicPushPull(nd *node) {
	if sm.live < 2 {
		return
	}
	for range 8 { // a member other than nd
		j := sm.ppRand.IntN(len(sm.nodes))
		if o := sm.nodes[j]; o != nd && o.listed {
			if sm.pushPull(nd, o, false) && sm.measured() {
				sm.res.PushPulls++
			}
			return
		}
	}
}
