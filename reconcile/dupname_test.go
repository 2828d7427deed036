package reconcile

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
)

// holdsApplier keeps the peers' holds the cluster applies.
type holdsApplier struct {
	mu    sync.Mutex
	holds map[string]int64
}

func (a *holdsApplier) ApplyCount(string, string, int, int64, int64, int64, int64) {}
func (a *holdsApplier) ApplyEntry(string, string, int, int64, int64)               {}
func (a *holdsApplier) EachHold(func(string, string, int64))                       {}
func (a *holdsApplier) AddRemoteHolds(resource, domain string, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.holds[resource+"|"+domain] += n
}
func (a *holdsApplier) get(k string) int64 { a.mu.Lock(); defer a.mu.Unlock(); return a.holds[k] }

// TestDuplicateNodeName is the regression test of the hardening issue's
// second attack: two agents under one node name (the default was the
// hostname, so two agents on one host collided). The real node's later
// holds stayed invisible (its packets were taken for an older incarnation),
// and the impostor's hold was still counted 132 s after it died (memberlist
// never saw the name die). Now the conflict is detected and logged, and a
// name silent for 20 sync intervals (at least 10 s) has its holds dropped,
// after which the real node is heard again.
func TestDuplicateNodeName(t *testing.T) {
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	var logs bytes.Buffer
	c := New(Options{Name: "r", Clock: fc, SyncInterval: 250 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	app := &holdsApplier{holds: map[string]int64{}}
	c.SetApplier(app)
	name := []packet.Name{{Hash: 7, Resource: "c/jobs", Domain: "acme"}}
	var ver uint64
	pkt := func(inc uint64, holds int64) *packet.Packet {
		ver++
		return &packet.Packet{From: "x", Incarnation: inc, Names: name, Gauges: []packet.Gauge{{Hash: 7, Value: holds, Version: ver}}}
	}
	const real, impostor = 1, 2
	c.HandlePacket(pkt(real, 2)) // the real agent holds 2
	c.HandlePacket(pkt(impostor, 1))
	if got := app.get("c/jobs|acme"); got != 1 {
		t.Fatalf("holds %d after the impostor's packet, want its 1", got)
	}
	// Both keep sending for 8 s: the real agent's packets are ignored as an
	// older incarnation's, and the conflict is found.
	for i := range 32 {
		fc.Advance(250 * time.Millisecond)
		c.HandlePacket(pkt(real, 3))
		c.HandlePacket(pkt(impostor, 1))
		c.Step(fc.Now())
		_ = i
	}
	if c.Stats().NameConflicts == 0 || !strings.Contains(logs.String(), "two live agents share a node name") {
		t.Errorf("conflict not reported: %+v\n%s", c.Stats(), logs.String())
	}
	// The impostor dies; memberlist still sees "x" alive (the real one).
	// Within the silence bound its hold is dropped, and the real agent's
	// next packet is heard.
	died := fc.Now()
	for fc.Now().Sub(died) < 12*time.Second {
		fc.Advance(250 * time.Millisecond)
		c.HandlePacket(pkt(real, 3))
		c.Step(fc.Now())
	}
	if got := app.get("c/jobs|acme"); got != 3 {
		t.Errorf("holds %d 12 s after the impostor died, want the real agent's 3 (before the fix: the impostor's 1, for good)", got)
	}
	if c.Stats().SilentExpired != 1 {
		t.Errorf("silent expiries %d, want 1", c.Stats().SilentExpired)
	}
}

// TestSilentPeerHoldsExpire: a peer that stops sending (while memberlist
// never declares it dead) has its holds dropped after the silence bound, and
// a live peer, which sends at least a heartbeat every fourth tick, never.
func TestSilentPeerHoldsExpire(t *testing.T) {
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	c := New(Options{Name: "r", Clock: fc, SyncInterval: time.Second})
	app := &holdsApplier{holds: map[string]int64{}}
	c.SetApplier(app)
	names := []packet.Name{{Hash: 7, Resource: "c/jobs", Domain: "acme"}}
	c.HandlePacket(&packet.Packet{From: "live", Incarnation: 1, Names: names, Gauges: []packet.Gauge{{Hash: 7, Value: 2, Version: 1}}})
	c.HandlePacket(&packet.Packet{From: "ghost", Incarnation: 1, Names: names, Gauges: []packet.Gauge{{Hash: 7, Value: 5, Version: 1}}})
	for s := 1; s <= 25; s++ { // the bound is 20 intervals, seen within the next housekeeping tick (every fourth)
		fc.Advance(time.Second)
		if s%4 == 0 {
			c.HandlePacket(&packet.Packet{From: "live", Incarnation: 1}) // its heartbeat
		}
		c.Step(fc.Now())
		if s == 19 && app.get("c/jobs|acme") != 7 {
			t.Fatalf("holds %d at 19 s, want 7 (within the bound)", app.get("c/jobs|acme"))
		}
	}
	if got := app.get("c/jobs|acme"); got != 2 {
		t.Errorf("holds %d after the ghost's silence, want the live peer's 2", got)
	}
}

// TestOwnNameConflict: a packet that claims this node's own name with
// another incarnation is another live agent with the same name; it is
// reported (logged, counted, and the callback told) and merged nowhere.
func TestOwnNameConflict(t *testing.T) {
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	var logs bytes.Buffer
	var told []uint64
	c := New(Options{Name: "x", Incarnation: 5, Clock: fc, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		OnNameConflict: func(inc uint64) { told = append(told, inc) }})
	app := &holdsApplier{holds: map[string]int64{}}
	c.SetApplier(app)
	p := &packet.Packet{From: "x", Incarnation: 9, Names: []packet.Name{{Hash: 7, Resource: "c/jobs", Domain: "acme"}},
		Gauges: []packet.Gauge{{Hash: 7, Value: 4, Version: 1}}}
	for range 10 {
		c.HandlePacket(p)
		fc.Advance(time.Second)
	}
	if len(told) != 1 || told[0] != 9 || c.Stats().NameConflicts != 10 {
		t.Errorf("told %v, conflicts %d; want [9] once (a minute's rate limit) and 10 counted", told, c.Stats().NameConflicts)
	}
	if !strings.Contains(logs.String(), "another live agent uses this node's name") {
		t.Errorf("not logged: %s", logs.String())
	}
	if app.get("c/jobs|acme") != 0 {
		t.Errorf("the other agent's holds were merged as a peer's")
	}
	// Its own packets (same incarnation) are not a conflict.
	c.HandlePacket(&packet.Packet{From: "x", Incarnation: 5})
	if c.Stats().NameConflicts != 10 {
		t.Errorf("its own packet counted as a conflict")
	}
}

// TestSilentPeerComesBackWithoutDoubleCounting: a peer partitioned past the
// silence bound loses its holds here; when the same incarnation is heard
// again its counts go on from where they were: no hit is applied twice.
func TestSilentPeerComesBackWithoutDoubleCounting(t *testing.T) {
	tab := newTable("r")
	names := []packet.Name{{Hash: 7, Resource: "c/r", Domain: "d"}}
	sum := func(ops []op) (n int64) {
		for _, o := range ops {
			if o.kind == opCount {
				n += o.n
			}
		}
		return n
	}
	ops, _ := tab.merge(&packet.Packet{From: "p", Incarnation: 3, Names: names, Counts: []packet.Count{{Hash: 7, Bucket: 1000, Value: 5}}}, 1000, nil)
	if sum(ops) != 5 {
		t.Fatalf("first packet applied %d", sum(ops))
	}
	if _, expired := tab.expireSilent(30_000, 10_000, nil); len(expired) != 1 {
		t.Fatalf("expired %v", expired)
	}
	ops, ok := tab.merge(&packet.Packet{From: "p", Incarnation: 3, Counts: []packet.Count{{Hash: 7, Bucket: 1000, Value: 7}}}, 31_000, nil)
	if !ok || sum(ops) != 2 {
		t.Errorf("after the silence: applied %d (ok %v), want the 2 new hits only", sum(ops), ok)
	}
}
