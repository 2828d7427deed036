package gossip

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// TestJoinFailOpenThenRejoin: a node whose seeds do not answer starts alone
// (New does not fail), and its rejoin loop, driven by a fake clock, joins
// the mesh once the seed is reachable.
func TestJoinFailOpenThenRejoin(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	seed := start(t, fn, "seed", nil)
	tr, err := fn.Listen()
	if err != nil {
		t.Fatal(err)
	}
	fn.Partition(tr.Addr()) // the seed is unreachable from the new node
	fake := clock.NewFake(time.Unix(0, 0))
	rec := &recorder{}
	n, err := New(Config{
		Name: "late", Transport: tr, Tune: quick, Logger: testLogger(t),
		Join: []string{seed.Addr()}, RejoinInterval: time.Second, Clock: fake,
		BeaconInterval: -1, // the fake clock drives the rejoin loop alone
	}, rec)
	if err != nil {
		t.Fatalf("New with an unreachable seed: %v", err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	if n.Live() != 1 {
		t.Fatalf("Live = %d, want 1 (alone)", n.Live())
	}
	fn.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal("the rejoin loop is not waiting on the clock")
	}
	fake.Advance(2 * time.Second)
	eventually(t, 10*time.Second, "the late node joins", func() bool { return n.Live() == 2 && seed.Live() == 2 })
	if !rec.has("seed", true, snapHash("seed"), 1) {
		t.Errorf("the rejoin carried no snapshot")
	}
	if got := n.rejoinStep(fake.Now()); got != 0 {
		t.Errorf("rejoin with every seed a member joined %d addresses", got)
	}
}

// TestBeaconRevivesAfterHeal: after a partition long enough for both sides
// to declare the other dead (and for memberlist's broadcasts about it to
// be spent), healing the network is noticed through the beacon: the cut
// node hears one, resyncs, and both sides see each other alive again. With
// beacons off (the control), nothing revives them within the same time:
// memberlist neither probes nor gossips to the dead, and push/pull and the
// rejoin loop are off here. The beacons tick on a fake clock, one round
// each time every node's loop waits for the next; memberlist runs on real
// time.
func TestBeaconRevivesAfterHeal(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("beacon=%v", on), func(t *testing.T) {
			t.Parallel()
			fn := gossiptest.NewFaultNet()
			fake := clock.NewFake(time.Unix(1_700_000_000, 0))
			nodes := mesh(t, fn, 3, func(c *Config) {
				c.Tune = func(mc *memberlist.Config) {
					fast(mc)
					mc.PushPullInterval = 0
				}
				c.Clock = fake
				if !on {
					c.BeaconInterval = -1
				}
			})
			fn.Partition(nodes[2].Addr())
			eventually(t, 15*time.Second, "both sides declare the other dead", func() bool {
				return nodes[0].Live() == 2 && nodes[1].Live() == 2 && nodes[2].Live() == 1
			})
			settled(t, fn, 10*time.Second, "memberlist's broadcasts about the deaths are spent")
			before := nodes[2].Stats().Resyncs + nodes[0].Stats().Resyncs + nodes[1].Stats().Resyncs
			fn.Heal()
			healed := time.Now()
			revived := func() bool {
				return nodes[0].Live() == 3 && nodes[1].Live() == 3 && nodes[2].Live() == 3
			}
			if !on {
				never(t, 3*time.Second, "without beacons the mesh revived anyway: the test does not isolate the beacon", revived)
				return
			}
			rounds := 0
			eventually(t, 3*time.Second, "every node sees the other two alive after the heal", func() bool {
				if fake.Waiters() == len(nodes) { // every beacon loop waits: the next round
					fake.Advance(defaultBeaconInterval)
					rounds++
				}
				return revived()
			})
			t.Logf("revived %v after the heal, after %d beacon rounds", time.Since(healed).Round(time.Millisecond), rounds)
			if after := nodes[2].Stats().Resyncs + nodes[0].Stats().Resyncs + nodes[1].Stats().Resyncs; after == before {
				t.Fatalf("no resync after the heal")
			}
		})
	}
}

// TestRejoinStep calls the rejoin loop's step directly (the loop itself is
// off): it joins a seed that is not a member, and nothing once every seed
// is one or the node is shut down.
func TestRejoinStep(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name     string
		joined   bool // the seed is already a member
		shutdown bool
		want     int
	}{
		{name: "seed not a member", want: 1},
		{name: "seed a member", joined: true, want: 0},
		{name: "shut down", shutdown: true, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn := gossiptest.NewFaultNet()
			seed := start(t, fn, "seed", func(c *Config) { c.Tune = quiet })
			nd := start(t, fn, "n", func(c *Config) { c.Tune = quiet })
			nd.seeds = []string{seed.Addr()}
			if tc.joined {
				if _, err := nd.ml.Join(nd.seeds); err != nil {
					t.Fatal(err)
				}
			}
			if tc.shutdown {
				_ = nd.Shutdown()
			}
			if got := nd.rejoinStep(t0); got != tc.want {
				t.Fatalf("rejoinStep = %d, want %d", got, tc.want)
			}
			if tc.want > 0 && nd.Live() != 2 {
				t.Fatalf("Live = %d after the rejoin, want 2", nd.Live())
			}
		})
	}
}

// TestBeaconStep calls the beacon loop's step directly, at instants of a
// fake clock, after membership events about a peer x that listens at a
// real address: a beacon goes to x only while it is dead, not left, and
// for five minutes after its death.
func TestBeaconStep(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type event struct {
		state   string // alive, dead or left
		leaving bool   // x's meta says it is leaving
	}
	tests := []struct {
		name     string
		events   []event // at t0
		at       time.Duration
		shutdown bool
		want     int
	}{
		{name: "dead a second ago", events: []event{{state: "alive"}, {state: "dead"}}, at: time.Second, want: 1},
		{name: "dead five minutes ago to the nanosecond", events: []event{{state: "alive"}, {state: "dead"}}, at: goneRetention, want: 1},
		{name: "dead over five minutes ago", events: []event{{state: "alive"}, {state: "dead"}}, at: goneRetention + time.Millisecond, want: 0},
		{name: "left", events: []event{{state: "alive"}, {state: "left", leaving: true}}, at: time.Second, want: 0},
		{name: "announced its leave, then went", events: []event{{state: "alive"}, {state: "alive", leaving: true}, {state: "dead"}}, at: time.Second, want: 0},
		{name: "alive", events: []event{{state: "alive"}}, at: time.Second, want: 0},
		{name: "dead, then back", events: []event{{state: "alive"}, {state: "dead"}, {state: "alive"}}, at: time.Second, want: 0},
		{name: "shut down", events: []event{{state: "alive"}, {state: "dead"}}, at: time.Second, shutdown: true, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn := gossiptest.NewFaultNet()
			fake := clock.NewFake(t0)
			nd := start(t, fn, "solo", func(c *Config) { c.Tune, c.Clock, c.BeaconInterval = quiet, fake, time.Hour }) // the test steps the loop
			x := start(t, fn, "x", func(c *Config) { c.Tune = quiet })
			host, port, _ := net.SplitHostPort(x.Addr())
			pn, _ := strconv.Atoi(port)
			d := (*delegate)(nd.Node)
			for _, ev := range tc.events {
				m := &memberlist.Node{Name: "x", Addr: net.ParseIP(host), Port: uint16(pn), Meta: encodeMeta(1, ev.leaving)}
				switch ev.state {
				case "alive":
					if ev.leaving {
						d.NotifyUpdate(m)
					} else {
						d.NotifyJoin(m)
					}
				default:
					d.NotifyLeave(m)
				}
			}
			if tc.shutdown {
				_ = nd.Shutdown()
			}
			before := nd.Stats().PacketsOut
			if got := nd.beaconStep(t0.Add(tc.at)); got != tc.want {
				t.Fatalf("beaconStep = %d, want %d", got, tc.want)
			}
			if got := nd.Stats().PacketsOut - before; got != uint64(tc.want) {
				t.Errorf("PacketsOut grew by %d, want %d", got, tc.want)
			}
			if tc.want > 0 {
				eventually(t, 5*time.Second, "x hears the beacon", func() bool { return x.rec.from("solo") == 1 })
			}
		})
	}
}

// TestResyncAfterSilence: a peer heard from again after a silence of
// ResyncAfter or more, on the node's clock, gets a push/pull at once (its
// snapshot and this node's both ways); one heard from within it does not,
// nor one heard from again right after a resync. The fake clock makes the
// silences; the packets and the push/pull are real.
func TestResyncAfterSilence(t *testing.T) {
	const after = 2 * time.Second
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	nodes := mesh(t, gossiptest.NewFaultNet(), 2, func(c *Config) {
		c.Tune, c.Clock, c.ResyncAfter, c.BeaconInterval = quiet, fake, after, -1
	})
	n0, n1 := nodes[0], nodes[1]
	steps := []struct {
		name    string
		silence time.Duration // fake time since the last step
		resync  bool
	}{
		{name: "first packet after the join", silence: 0, resync: false},
		{name: "within ResyncAfter", silence: after / 2, resync: false},
		{name: "at ResyncAfter", silence: after, resync: false},
		{name: "after a silence", silence: after + time.Millisecond, resync: true},
		{name: "right after the resync", silence: 0, resync: false},
		{name: "after another silence", silence: 3 * after, resync: true},
	}
	var resyncs uint64
	for i, st := range steps {
		fake.Advance(st.silence)
		fulls, last := n1.rec.fulls("n0"), resyncedWith(n0, "n1")
		h := uint64(100 + i)
		// n0 notes the silence before it hands the packet over. The send is
		// repeated while it is not heard: a loaded machine can lose a
		// loopback datagram, and the fake clock does not move in between, so
		// a repeat changes no silence.
		got := func() bool { return n0.rec.has("n1", false, h, 1) }
		for try := 0; try < 10 && !got(); try++ {
			if err := n1.Send(&packet.Packet{Counts: []packet.Count{{Hash: h, Value: 1}}}); err != nil {
				t.Fatal(err)
			}
			poll(time.Second, got)
		}
		eventually(t, time.Second, st.name+": n0 receives the packet", got)
		if queued := !resyncedWith(n0, "n1").Equal(last); queued != st.resync {
			t.Fatalf("%s: resync queued = %v, want %v", st.name, queued, st.resync)
		}
		if st.resync {
			resyncs++
			// At least: on a machine loaded enough that memberlist's probes
			// time out, a peer it declared dead and heard again is resynced
			// too.
			eventually(t, 5*time.Second, st.name+": the push/pull runs", func() bool {
				return n0.Stats().Resyncs >= resyncs && n1.rec.fulls("n0") > fulls
			})
			resyncs = n0.Stats().Resyncs
		}
	}
}

// resyncedWith returns when n last queued a push/pull with peer name.
func resyncedWith(n *testNode, name string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ps := n.peers[name]; ps != nil {
		return ps.resynced
	}
	return time.Time{}
}

// TestHeartbeatStretch: past HeartbeatPeers + 1 live members that all
// stretch, a node's HeartbeatStretch is stream.Stretch of them and it
// reads a silence of ResyncAfter × the stretch as normal; a member that
// does not stretch (an older release's protocol max, here NoOwners' 1)
// takes the mesh back to 1 and the plain ResyncAfter, and its leaving
// stretches again.
func TestHeartbeatStretch(t *testing.T) {
	const after = 2 * time.Second
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	tune := func(c *Config) { c.Tune, c.Clock, c.ResyncAfter, c.BeaconInterval = quick, fake, after, -1 }
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 3, tune)
	n0, n1 := nodes[0], nodes[1]
	if got := n0.HeartbeatStretch(); got != 1 {
		t.Fatalf("3 members, 100 heartbeat peers: stretch %d, want 1", got)
	}
	n0.mu.Lock()
	n0.hbPeers = 1 // as 102 members would with 100
	n0.recount()
	n0.mu.Unlock()
	if got := n0.HeartbeatStretch(); got != 2 {
		t.Fatalf("3 members, 1 heartbeat peer: stretch %d, want 2", got)
	}
	h := uint64(1)
	hear := func(name string, silence time.Duration, resync bool) {
		t.Helper()
		fake.Advance(silence)
		last := resyncedWith(n0, "n1")
		h++
		if err := n1.Send(&packet.Packet{Counts: []packet.Count{{Hash: h, Value: 1}}}); err != nil {
			t.Fatal(err)
		}
		// A push/pull state of n1's crossing the packet may cover its seq
		// (the state's seq is n1's next, taken after Send), and the
		// packet's counts, sent by hand, are not in n1's state as a real
		// shipment's are: n0 then takes the packet for a duplicate. Send
		// it again under a new seq.
		if !waitUntil(2*time.Second, func() bool { return n0.rec.has("n1", false, h, 1) }) {
			if err := n1.Send(&packet.Packet{Counts: []packet.Count{{Hash: h, Value: 1}}}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 5*time.Second, name+": n0 receives the packet", func() bool { return n0.rec.has("n1", false, h, 1) })
		if queued := !resyncedWith(n0, "n1").Equal(last); queued != resync {
			t.Fatalf("%s: resync queued = %v, want %v", name, queued, resync)
		}
	}
	hear("first packet", 0, false)
	hear("a silence of 1.5 ResyncAfter, stretched 2", after*3/2, false)
	hear("a silence of 2 ResyncAfter", 2*after, false)
	hear("past 2 ResyncAfter", 2*after+time.Millisecond, true)

	old := start(t, fn, "old", func(c *Config) {
		tune(c)
		c.NoOwners = true // advertises protocol 1: it does not stretch
		c.Join = []string{n0.Addr()}
	})
	eventually(t, 10*time.Second, "n0 sees a member that does not stretch", func() bool { return n0.Live() == 4 && n0.HeartbeatStretch() == 1 })
	hear("1.5 ResyncAfter with a member that does not stretch", after*3/2, true)
	if err := old.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "n0 stretches again once it left", func() bool { return n0.Live() == 3 && n0.HeartbeatStretch() == 2 })
}

// waitUntil polls f until it holds or d has passed.
func waitUntil(d time.Duration, f func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !f() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond): // polling the receiver's record: no event to wait on
		}
	}
	return true
}

// TestUnheardStep: a live member never heard from for ResyncAfter (× the
// heartbeat stretch) after memberlist reported it is most likely unaware
// of this node (memberlist's news of its join was lost), and ships its
// counts to the others only: this node asks it for a push/pull, once per
// ResyncAfter, which tells it of this node and brings its counts. Seen
// as two of ten agents missing a third's hits for over 5 s on a loaded
// machine (cmd/agent's rolling restart test, before its roll).
func TestUnheardStep(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name  string
		heard bool          // x sent this node a packet after it joined
		state string        // x's last state: alive or dead
		at    time.Duration // after t0, when x was reported
		want  int
	}{
		{name: "never heard, reported long ago", state: "alive", at: defaultResyncAfter + time.Millisecond, want: 1},
		{name: "never heard, reported just now", state: "alive", at: defaultResyncAfter, want: 0},
		{name: "heard from", heard: true, state: "alive", at: time.Minute, want: 0},
		{name: "dead", state: "dead", at: time.Minute, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn := gossiptest.NewFaultNet()
			fake := clock.NewFake(t0)
			nd := start(t, fn, "solo", func(c *Config) { c.Tune, c.Clock = quiet, fake })
			x := start(t, fn, "x", func(c *Config) { c.Tune = quiet })
			host, port, _ := net.SplitHostPort(x.Addr())
			pn, _ := strconv.Atoi(port)
			d := (*delegate)(nd.Node)
			m := &memberlist.Node{Name: "x", Addr: net.ParseIP(host), Port: uint16(pn), Meta: encodeMeta(1, false)}
			d.NotifyJoin(m)
			if tc.state == "dead" {
				d.NotifyLeave(m)
			}
			if tc.heard {
				nd.received(&packet.Packet{From: "x", Incarnation: 1}, 10)
			}
			now := t0.Add(tc.at)
			if got := nd.unheardStep(now); got != tc.want {
				t.Fatalf("unheardStep = %d, want %d", got, tc.want)
			}
			if got := nd.Stats().UnheardResyncs; got != uint64(tc.want) {
				t.Errorf("UnheardResyncs = %d, want %d", got, tc.want)
			}
			if tc.want > 0 {
				// Once per ResyncAfter: the next step finds it asked.
				if got := nd.unheardStep(now.Add(time.Millisecond)); got != 0 {
					t.Errorf("a second step within ResyncAfter queued %d, want 0", got)
				}
			}
		})
	}
}
