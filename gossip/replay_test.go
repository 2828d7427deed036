package gossip

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// tap is a transport that records the datagrams it receives from one
// address, as they come off the network (encrypted), and can hand them to
// memberlist again: an attacker on the path capturing and replaying them.
type tap struct {
	*gossiptest.FaultTransport
	in chan *memberlist.Packet

	mu       sync.Mutex
	from     string // the address whose datagrams are recorded
	captured []*memberlist.Packet
}

func newTap(inner *gossiptest.FaultTransport) *tap {
	t := &tap{FaultTransport: inner, in: make(chan *memberlist.Packet, 1024)}
	go func() {
		for p := range inner.PacketCh() {
			t.mu.Lock()
			if t.from != "" && p.From.String() == t.from {
				t.captured = append(t.captured, &memberlist.Packet{Buf: append([]byte(nil), p.Buf...), From: p.From})
			}
			t.mu.Unlock()
			t.in <- p
		}
	}()
	return t
}

func (t *tap) PacketCh() <-chan *memberlist.Packet { return t.in }

func (t *tap) record(from string) {
	t.mu.Lock()
	t.from = from
	t.mu.Unlock()
}

func (t *tap) stop() []*memberlist.Packet {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.from = ""
	return t.captured
}

// replay hands the captured datagrams to memberlist again, stamped now.
func (t *tap) replay(pkts []*memberlist.Packet) {
	for _, p := range pkts {
		t.in <- &memberlist.Packet{Buf: append([]byte(nil), p.Buf...), From: p.From, Timestamp: time.Now()}
	}
}

// TestReplayedGossipFromDeadPeerIgnored: the encrypted datagrams a peer
// sent while it held 5 copies, captured and replayed (again and again)
// after memberlist declared it dead, reach memberlist (they decrypt: no
// key is needed to replay) but not the handler, which would bring its
// holds back, and they do not refresh the peer's last sync.
func TestReplayedGossipFromDeadPeerIgnored(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	secure := func(c *Config) {
		c.SecretKey, c.Label, c.BeaconInterval = testKey, "obol-test", -1
		c.Tune = func(mc *memberlist.Config) { fast(mc); mc.PushPullInterval = 0 }
	}
	tr, err := fn.Listen()
	if err != nil {
		t.Fatal(err)
	}
	tp := newTap(tr)
	rec := &recorder{}
	cfg := Config{Name: "n0", Transport: tp, Logger: testLogger(t), RejoinInterval: -1}
	secure(&cfg)
	n0, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n0.Shutdown() })
	peer := start(t, fn, "n1", func(c *Config) { secure(c); c.Join = []string{n0.Addr()} })
	eventually(t, 10*time.Second, "the two nodes see each other", func() bool { return n0.Live() == 2 && peer.Live() == 2 })

	// The peer holds 5 copies of a key; n0 hears of it.
	const hash = 42
	holds := func(p *packet.Packet) bool {
		return p.From == "n1" && len(p.Gauges) == 1 && p.Gauges[0].Hash == hash && p.Gauges[0].Value == 5
	}
	tp.record(peer.Addr())
	for v := uint64(1); v <= 3; v++ {
		if err := peer.Send(&packet.Packet{Gauges: []packet.Gauge{{Hash: hash, Value: 5, Version: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "n0 hears the holds", func() bool { return rec.count(holds) == 3 })
	captured := tp.stop()
	if len(captured) == 0 {
		t.Fatal("no datagram captured")
	}

	// The peer dies (no leave: it stops answering).
	_ = peer.Shutdown()
	eventually(t, 20*time.Second, "n0 declares the peer dead", func() bool { return deadFor(&testNode{Node: n0}, "n1") > 0 })
	eventually(t, 10*time.Second, "NodeGone(n1)", func() bool { return rec.goneCount("n1") == 1 })
	lastSync := func() time.Time {
		for _, p := range n0.Peers() {
			if p.Name == "n1" {
				return p.LastSync
			}
		}
		return time.Time{}
	}
	before, handled := lastSync(), rec.from("n1")

	// The replay, three times over.
	for round := 1; round <= 3; round++ {
		dropped := n0.Stats().NotMember
		tp.replay(captured)
		eventually(t, 10*time.Second, "n0 drops the replayed sync messages", func() bool { return n0.Stats().NotMember >= dropped+3 })
	}
	if got := rec.from("n1"); got != handled {
		t.Errorf("the handler got %d packets from the dead peer after the replay, want %d", got, handled)
	}
	if got := rec.count(holds); got != 3 {
		t.Errorf("the holds reached the handler %d times, want 3 (before the death)", got)
	}
	if got := lastSync(); !got.Equal(before) {
		t.Errorf("the dead peer's last sync moved from %v to %v", before, got)
	}
}

// TestPacketsFromNonMembersDropped: a sync message from a sender declared
// dead, or left leftGrace ago or more, or under an earlier incarnation than
// the member's, is counted in NotMember and refreshes nothing; one from a
// live member, one memberlist has not reported yet, or one that has just
// left (its last messages) is handed on.
func TestPacketsFromNonMembersDropped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  string // "" for a sender never reported by memberlist
		inc    uint64 // the member's incarnation
		pktInc uint64
		handed bool
	}{
		{"not reported yet (a joiner's packets may outrun the news)", "", 0, 7, true},
		{"declared dead", "dead", 7, 7, false},
		{"left a moment ago (its last messages)", "left", 7, 7, true},
		{"left longer than leftGrace ago", "left-long-ago", 7, 7, false},
		{"alive, an earlier incarnation", "alive", 7, 6, false},
		{"alive", "alive", 7, 7, true},
		{"alive, a later incarnation (its meta not heard yet)", "alive", 7, 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			fake := clock.NewFake(time.Unix(1_700_000_000, 0))
			n := newNode(t, rec, func(c *Config) { c.ReceiveWorkers, c.Clock = 1, fake })
			if tc.state != "" {
				n.member(&memberlist.Node{Name: "p", Meta: encodeMeta(tc.inc, false)}, "alive")
				switch tc.state {
				case "alive":
				case "left-long-ago":
					n.member(&memberlist.Node{Name: "p", Meta: encodeMeta(tc.inc, true)}, "left")
					fake.Advance(leftGrace + time.Millisecond)
				default:
					n.member(&memberlist.Node{Name: "p", Meta: encodeMeta(tc.inc, tc.state == "left")}, tc.state)
				}
			}
			d := (*delegate)(n)
			d.NotifyMsg(mustEncode(&packet.Packet{From: "p", Incarnation: tc.pktInc, Seq: 1, Counts: []packet.Count{{Hash: 1, Bucket: 1_700_000_000_000, Value: 1}}}))
			d.NotifyMsg(seq("a", 1)) // handled after p's: p's is settled then
			eventually(t, 10*time.Second, "the member's message handled", func() bool { return rec.from("a") == 1 })
			if got := rec.from("p") == 1; got != tc.handed {
				t.Fatalf("handed to the handler: %v, want %v", got, tc.handed)
			}
			s := n.Stats()
			if want := uint64(map[bool]int{true: 0, false: 1}[tc.handed]); s.NotMember != want {
				t.Errorf("NotMember %d, want %d", s.NotMember, want)
			}
			for _, p := range n.Peers() {
				if p.Name == "p" && !tc.handed && !p.LastSync.IsZero() {
					t.Errorf("the sender's last sync was set to %v", p.LastSync)
				}
			}
		})
	}
}
