package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// recorder is a Handler that keeps what it is given.
type recorder struct {
	mu      sync.Mutex
	packets []*packet.Packet
	gone    []string
	snap    *packet.Packet
}

var _ Handler = (*recorder)(nil)

func (r *recorder) HandlePacket(p *packet.Packet) {
	r.mu.Lock()
	r.packets = append(r.packets, p)
	r.mu.Unlock()
}

func (r *recorder) Snapshot() *packet.Packet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snap
}

func (r *recorder) NodeGone(name string) {
	r.mu.Lock()
	r.gone = append(r.gone, name)
	r.mu.Unlock()
}

// goneCount returns how many times NodeGone(name) was called.
func (r *recorder) goneCount(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, g := range r.gone {
		if g == name {
			n++
		}
	}
	return n
}

// has reports whether a packet from `from` (Full as given) carried a count
// of hash with value.
func (r *recorder) has(from string, full bool, hash, value uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.packets {
		if p.From != from || p.Full != full {
			continue
		}
		for _, c := range p.Counts {
			if c.Hash == hash && c.Value == value {
				return true
			}
		}
	}
	return false
}

// hashes returns the distinct hashes of counts received from `from`.
func (r *recorder) hashes(from string) map[uint64]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[uint64]bool{}
	for _, p := range r.packets {
		if p.From == from && !p.Full {
			for _, c := range p.Counts {
				out[c.Hash] = true
			}
		}
	}
	return out
}

func (r *recorder) from(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.packets {
		if p.From == name {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or the deadline passes: it waits on
// memberlist's real events, never on a fixed sleep.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// quick shortens memberlist's gossip so joins spread fast, keeping failure
// detection at its LAN default (no false deaths on a busy test machine).
func quick(c *memberlist.Config) {
	c.GossipInterval = 20 * time.Millisecond
	c.TCPTimeout = 2 * time.Second
}

// fast also shortens failure detection, for tests that wait for a death.
func fast(c *memberlist.Config) {
	quick(c)
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 150 * time.Millisecond
	c.SuspicionMult = 2
	c.GossipToTheDeadTime = 2 * time.Second
}

// quiet stops memberlist's periodic traffic (probes, gossip, push/pull), so
// that a test can account for every datagram.
func quiet(c *memberlist.Config) {
	c.ProbeInterval = time.Hour
	c.GossipInterval = time.Hour
	c.PushPullInterval = 0
	c.TCPTimeout = 2 * time.Second
}

type testNode struct {
	*Node
	rec *recorder
	tr  *gossiptest.FaultTransport
}

// start starts a node named name on a new transport of fn, with a snapshot
// holding one count (hash = its index+1000, value 1) so that push/pull can be
// observed. mut adjusts the config.
func start(t *testing.T, fn *gossiptest.FaultNet, name string, mut func(*Config)) *testNode {
	t.Helper()
	tr, err := fn.Listen()
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{snap: &packet.Packet{
		Names:  []packet.Name{{Hash: snapHash(name), Resource: "test/snap", Domain: name}},
		Counts: []packet.Count{{Hash: snapHash(name), Bucket: 1_700_000_000_000, Value: 1}},
	}}
	cfg := Config{Name: name, Transport: tr, Tune: quick, Logger: testLogger(t), RejoinInterval: -1}
	if mut != nil {
		mut(&cfg)
	}
	n, err := New(cfg, rec)
	if err != nil {
		_ = tr.Shutdown()
		t.Fatalf("New(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	return &testNode{Node: n, rec: rec, tr: tr}
}

func snapHash(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return h
}

// testLogger sends memberlist's and the package's logs to the test log when
// GOSSIP_TEST_LOG is set.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("GOSSIP_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlog struct{ t *testing.T }

func (w tlog) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

// mesh starts n nodes "n0"…, each joining n0, and waits until every node
// sees all of them.
func mesh(t *testing.T, fn *gossiptest.FaultNet, n int, mut func(*Config)) []*testNode {
	t.Helper()
	nodes := []*testNode{start(t, fn, "n0", mut)}
	for i := 1; i < n; i++ {
		nodes = append(nodes, start(t, fn, "n"+strconv.Itoa(i), func(c *Config) {
			c.Join = []string{nodes[0].Addr()}
			if mut != nil {
				mut(c)
			}
		}))
	}
	eventually(t, 10*time.Second, "every node sees the whole mesh", func() bool {
		for _, nd := range nodes {
			if nd.Live() != n {
				return false
			}
		}
		return true
	})
	return nodes
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// TestMeshJoinSnapshotSend: joins exchange snapshots both ways, Send reaches
// every other member, and no datagram exceeds MaxDatagram with a key and a
// label.
func TestMeshJoinSnapshotSend(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 4, func(c *Config) {
		c.SecretKey = testKey
		c.Label = "obol-test"
	})
	if got, want := nodes[0].Budget(), MaxDatagram-1-5-29-(2+len("obol-test")); got != want {
		t.Fatalf("Budget = %d, want %d", got, want)
	}

	// Push/pull on join: each joiner got n0's snapshot and n0 got theirs.
	for _, nd := range nodes[1:] {
		if !nd.rec.has("n0", true, snapHash("n0"), 1) {
			t.Errorf("%s has no snapshot from n0", nd.Name())
		}
		if !nodes[0].rec.has(nd.Name(), true, snapHash(nd.Name()), 1) {
			t.Errorf("n0 has no snapshot from %s", nd.Name())
		}
	}

	// A delta of 300 named keys spans several datagrams.
	p := &packet.Packet{From: "ignored", Incarnation: 99}
	for k := range 300 {
		h := uint64(k+1) * 0x9e3779b97f4a7c15
		p.Names = append(p.Names, packet.Name{Hash: h, Resource: "api/search", Domain: "tenant-" + strconv.Itoa(k)})
		p.Counts = append(p.Counts, packet.Count{Hash: h, Bucket: 1_700_000_000_000, Value: uint64(k + 1)})
	}
	msgs, err := packet.Split(&packet.Packet{From: "n1", Incarnation: nodes[1].Incarnation(), Names: p.Names, Counts: p.Counts}, nodes[1].Budget())
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) < 3 {
		t.Fatalf("test packet fits in %d messages; want several", len(msgs))
	}
	before := nodes[1].Stats()
	if err := nodes[1].Send(p); err != nil {
		t.Fatal(err)
	}
	for _, nd := range []*testNode{nodes[0], nodes[2], nodes[3]} {
		eventually(t, 5*time.Second, nd.Name()+" receives all 300 keys from n1", func() bool {
			return len(nd.rec.hashes("n1")) == 300
		})
		nd.rec.mu.Lock()
		for _, q := range nd.rec.packets {
			if q.From == "n1" && !q.Full && q.Incarnation != nodes[1].Incarnation() {
				t.Errorf("%s: packet from n1 has incarnation %d, want the node's %d", nd.Name(), q.Incarnation, nodes[1].Incarnation())
			}
		}
		nd.rec.mu.Unlock()
	}
	after := nodes[1].Stats()
	if got, want := after.PacketsOut-before.PacketsOut, uint64(3*len(msgs)); got != want {
		t.Errorf("PacketsOut grew by %d, want %d", got, want)
	}
	if nodes[1].rec.from("n1") != 0 {
		t.Errorf("n1 received its own packets")
	}

	st := fn.Stats()
	t.Logf("mesh datagrams: %d, largest %d bytes (budget %d + overhead)", st.Datagrams, st.MaxSize, nodes[1].Budget())
	if st.MaxSize > MaxDatagram {
		t.Errorf("a datagram of %d bytes exceeds %d", st.MaxSize, MaxDatagram)
	}
	if st.MaxSize < MaxDatagram-60 {
		t.Errorf("largest datagram %d bytes: Send does not fill datagrams", st.MaxSize)
	}

	// Peers: n0 sees n1's traffic; n1 sees what it sent.
	var p1 Peer
	for _, pe := range nodes[0].Peers() {
		if pe.Name == "n1" {
			p1 = pe
		}
	}
	if p1.State != "alive" || p1.LastSync.IsZero() || p1.BytesIn == 0 || p1.Incarnation != nodes[1].Incarnation() || p1.Addr != nodes[1].Addr() {
		t.Errorf("n0's view of n1 = %+v", p1)
	}
	peers := nodes[1].Peers()
	if len(peers) != 4 {
		t.Fatalf("n1 Peers = %+v, want 4", peers)
	}
	for _, pe := range peers {
		if pe.Self != (pe.Name == "n1") {
			t.Errorf("Peer %s Self = %v", pe.Name, pe.Self)
		}
		if !pe.Self && pe.BytesOut == 0 {
			t.Errorf("n1 sent nothing to %s", pe.Name)
		}
	}
}

func TestNodeGone(t *testing.T) {
	tests := []struct {
		name  string
		leave bool
		state string
	}{
		{name: "leave", leave: true, state: "left"},
		{name: "death", leave: false, state: "dead"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nodes := mesh(t, gossiptest.NewFaultNet(), 3, func(c *Config) { c.Tune = fast })
			if tc.leave {
				if err := nodes[2].Leave(2 * time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if err := nodes[2].Shutdown(); err != nil {
				t.Fatal(err)
			}
			for _, nd := range nodes[:2] {
				eventually(t, 10*time.Second, nd.Name()+" gets NodeGone(n2)", func() bool { return nd.rec.goneCount("n2") > 0 })
				eventually(t, 5*time.Second, nd.Name()+" sees 2 live", func() bool { return nd.Live() == 2 })
				var st string
				for _, p := range nd.Peers() {
					if p.Name == "n2" {
						st = p.State
					}
				}
				if st != tc.state {
					t.Errorf("%s sees n2 %q, want %q", nd.Name(), st, tc.state)
				}
			}
			// Another departure, later, proves the first was reported
			// once: events are delivered in order.
			_ = nodes[1].Leave(2 * time.Second)
			_ = nodes[1].Shutdown()
			eventually(t, 10*time.Second, "n0 gets NodeGone(n1)", func() bool { return nodes[0].rec.goneCount("n1") > 0 })
			if got := nodes[0].rec.goneCount("n2"); got != 1 {
				t.Errorf("NodeGone(n2) called %d times on n0, want 1", got)
			}
			if got := nodes[0].rec.goneCount("n0"); got != 0 {
				t.Errorf("NodeGone(self) called %d times", got)
			}
		})
	}
}

// TestRestartNewIncarnation: a node restarted under its name, on a new port
// with a new incarnation, is alive again in its peers' view with that
// incarnation, after a leave or after a death.
func TestRestartNewIncarnation(t *testing.T) {
	for _, leave := range []bool{true, false} {
		t.Run(fmt.Sprintf("leave=%v", leave), func(t *testing.T) {
			t.Parallel()
			fn := gossiptest.NewFaultNet()
			tune := fast // the default DeadNodeReclaimTime lets the dead name back at a new address
			nodes := mesh(t, fn, 3, func(c *Config) { c.Tune = tune })
			old := nodes[2]
			if leave {
				_ = old.Leave(2 * time.Second)
			}
			_ = old.Shutdown()
			eventually(t, 10*time.Second, "n0 and n1 see n2 gone", func() bool {
				return nodes[0].rec.goneCount("n2") == 1 && nodes[1].rec.goneCount("n2") == 1
			})
			if !leave {
				time.Sleep(1100 * time.Millisecond) // the dead name is reclaimable a second after the death
			}

			inc := old.Incarnation() + 1
			re := start(t, fn, "n2", func(c *Config) {
				c.Tune = tune
				c.Incarnation = inc
				c.Join = []string{nodes[0].Addr()}
			})
			if re.Addr() == old.Addr() {
				t.Fatalf("restart reused the address %s", re.Addr())
			}
			for _, nd := range nodes[:2] {
				eventually(t, 10*time.Second, nd.Name()+" sees n2 alive with the new incarnation", func() bool {
					for _, p := range nd.Peers() {
						if p.Name == "n2" {
							return p.State == "alive" && p.Incarnation == inc && p.Addr == re.Addr()
						}
					}
					return false
				})
			}
			if err := re.Send(&packet.Packet{Counts: []packet.Count{{Hash: 7, Value: 3}}}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "n1 receives the restarted node's packet", func() bool { return nodes[1].rec.has("n2", false, 7, 3) })
		})
	}
}

// TestNodeGoneStaleIncarnation: the departure of an instance whose name has
// already sent packets with a newer incarnation is not reported.
func TestNodeGoneStaleIncarnation(t *testing.T) {
	nd := start(t, gossiptest.NewFaultNet(), "solo", func(c *Config) { c.Tune = quiet })
	d := (*delegate)(nd.Node)
	d.NotifyMsg(mustEncode(&packet.Packet{From: "x", Incarnation: 5}))
	d.NotifyJoin(&memberlist.Node{Name: "x", Meta: encodeMeta(4, false)})
	d.NotifyLeave(&memberlist.Node{Name: "x", Meta: encodeMeta(4, false)}) // the old instance
	d.NotifyJoin(&memberlist.Node{Name: "y", Meta: encodeMeta(1, false)})
	d.NotifyLeave(&memberlist.Node{Name: "y", Meta: encodeMeta(1, false)})
	eventually(t, 5*time.Second, "NodeGone(y)", func() bool { return nd.rec.goneCount("y") == 1 })
	if got := nd.rec.goneCount("x"); got != 0 {
		t.Fatalf("NodeGone(x) called %d times for a stale incarnation", got)
	}
	d.NotifyLeave(&memberlist.Node{Name: "x", Meta: encodeMeta(5, false)}) // the current one
	eventually(t, 5*time.Second, "NodeGone(x)", func() bool { return nd.rec.goneCount("x") == 1 })
}

// TestIntruderRejected: a node with another key or label, or none, cannot
// join, and a datagram it sends never reaches the handler.
func TestIntruderRejected(t *testing.T) {
	tests := []struct {
		name  string
		key   []byte
		label string
	}{
		{name: "wrong key", key: []byte("fedcba9876543210fedcba9876543210"), label: "obol-test"},
		{name: "wrong label", key: testKey, label: "other-mesh"},
		{name: "no label", key: testKey, label: ""},
		{name: "plaintext", key: nil, label: "obol-test"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn := gossiptest.NewFaultNet()
			nodes := mesh(t, fn, 2, func(c *Config) {
				c.SecretKey, c.Label, c.Tune = testKey, "obol-test", quiet
			})
			bad := start(t, fn, "intruder", func(c *Config) {
				c.SecretKey, c.Label, c.Tune = tc.key, tc.label, quiet
				c.Join = []string{nodes[0].Addr()}
			})
			if bad.Live() != 1 || nodes[0].Live() != 2 || nodes[1].Live() != 2 {
				t.Fatalf("after the intruder's join: live %d/%d/%d, want 1/2/2", bad.Live(), nodes[0].Live(), nodes[1].Live())
			}

			// The intruder sends one datagram straight to n0.
			host, port, _ := net.SplitHostPort(nodes[0].Addr())
			pn, _ := strconv.Atoi(port)
			target := &memberlist.Node{Name: "n0", Addr: net.ParseIP(host), Port: uint16(pn)}
			recv := nodes[0].tr.Stats().Received
			if err := bad.ml.SendBestEffort(target, mustEncode(&packet.Packet{From: "intruder", Counts: []packet.Count{{Hash: 1, Value: 1}}})); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "n0's transport takes the intruder's datagram", func() bool {
				return nodes[0].tr.Stats().Received > recv
			})
			// memberlist handles datagrams in order: once a later
			// legitimate one is handled, the intruder's has been refused.
			if err := nodes[1].Send(&packet.Packet{Counts: []packet.Count{{Hash: 2, Value: 2}}}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "n0 gets n1's packet", func() bool { return nodes[0].rec.has("n1", false, 2, 2) })
			if got := nodes[0].rec.from("intruder"); got != 0 {
				t.Fatalf("n0 handled %d packets from the intruder", got)
			}
			for _, p := range nodes[0].Peers() {
				if p.Name == "intruder" {
					t.Fatalf("n0 lists the intruder: %+v", p)
				}
			}
		})
	}
}

// TestPartitionHeal: a partition stops delivery both ways (datagrams and
// streams), and healing restores it.
func TestPartitionHeal(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	nodes := mesh(t, fn, 3, nil)
	fn.Partition(nodes[2].Addr())

	before := fn.Stats()
	if err := nodes[0].Send(&packet.Packet{Counts: []packet.Count{{Hash: 1, Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "n1 gets the packet", func() bool { return nodes[1].rec.has("n0", false, 1, 1) })
	if got := fn.Stats().CutOut - before.CutOut; got == 0 {
		t.Fatalf("no datagram was cut")
	}
	if nodes[2].rec.has("n0", false, 1, 1) {
		t.Fatalf("n2 got a packet across the partition")
	}
	if err := nodes[2].Send(&packet.Packet{Counts: []packet.Count{{Hash: 3, Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[2].ml.Join([]string{nodes[0].Addr()}); err == nil {
		t.Fatalf("a push/pull crossed the partition")
	}
	if fn.Stats().StreamsCut == 0 {
		t.Fatalf("no stream was cut")
	}

	fn.Heal()
	if err := nodes[0].Send(&packet.Packet{Counts: []packet.Count{{Hash: 2, Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "n2 gets a packet after the heal", func() bool { return nodes[2].rec.has("n0", false, 2, 2) })
	if nodes[2].rec.has("n0", false, 1, 1) || nodes[0].rec.has("n2", false, 3, 3) {
		t.Fatalf("a packet sent during the partition arrived after the heal")
	}
}

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
	if got := n.rejoin(); got != 0 {
		t.Errorf("rejoin with every seed a member joined %d addresses", got)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings, one per expected problem
	}{
		{name: "minimal", cfg: Config{Name: "a"}},
		{name: "full", cfg: Config{Name: "a", Bind: "127.0.0.1:0", Advertise: "10.0.0.1", Join: []string{"peers.svc:7946"}, SecretKey: testKey[:24], Label: "x"}},
		{name: "ipv6", cfg: Config{Name: "a", Bind: "[::1]:7946", Advertise: "[::1]:8000"}},
		{name: "everything wrong", cfg: Config{
			Bind: "localhost:7946", Advertise: "10.0.0.1:99999", Join: []string{" "},
			SecretKey: []byte("short"), Label: string(make([]byte, 300)),
		}, want: []string{
			"name is required",
			`bind "localhost:7946": host "localhost" is not an IP address`,
			`advertise "10.0.0.1:99999": port "99999" is not a number`,
			"join[0] is empty",
			"secret key is 5 bytes (want 16, 24 or 32)",
			"label is 300 bytes (want at most 255)",
		}},
		{name: "bind without port", cfg: Config{Name: "a", Bind: "127.0.0.1"}, want: []string{`bind "127.0.0.1": address 127.0.0.1: missing port`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want ErrConfig", err)
			}
			var joined interface{ Unwrap() []error }
			if errors.As(err, &joined) {
				if got := len(joined.Unwrap()); got != len(tc.want) {
					t.Errorf("%d problems, want %d: %v", got, len(tc.want), err)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to mention %q", err, w)
				}
			}
			if _, err := New(tc.cfg, &recorder{}); !errors.Is(err, ErrConfig) {
				t.Errorf("New = %v, want ErrConfig", err)
			}
		})
	}
}

func TestMeta(t *testing.T) {
	for _, inc := range []uint64{0, 1, 127, 128, 1 << 20, 1 << 40, 1<<64 - 1} {
		for _, leaving := range []bool{false, true} {
			gi, gl, ok := decodeMeta(encodeMeta(inc, leaving))
			if !ok || gi != inc || gl != leaving {
				t.Fatalf("decodeMeta(encodeMeta(%d, %v)) = %d, %v, %v", inc, leaving, gi, gl, ok)
			}
		}
	}
	for _, b := range [][]byte{nil, {0x93}, {0x92, 0x01, 0x01}, {0x93, 0x02, 0x01, 0xc2}, {0x93, 0x01, 0x01, 0x01}, append(encodeMeta(1, false), 0)} {
		if _, _, ok := decodeMeta(b); ok {
			t.Fatalf("decodeMeta(% x) accepted", b)
		}
	}
}

func TestSendAfterShutdown(t *testing.T) {
	nd := start(t, gossiptest.NewFaultNet(), "solo", func(c *Config) { c.Tune = quiet })
	if err := nd.Send(&packet.Packet{}); err != nil {
		t.Fatalf("Send alone: %v", err)
	}
	if err := nd.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := nd.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if err := nd.Send(&packet.Packet{}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Send after Shutdown = %v, want ErrShutdown", err)
	}
	if err := nd.Leave(time.Second); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Leave after Shutdown = %v, want ErrShutdown", err)
	}
}

// TestBudgetIsExact checks the overhead arithmetic against memberlist
// itself: a message of exactly Budget bytes leaves as a datagram of exactly
// MaxDatagram bytes, one byte more as one byte more. The receiver counts
// both (not sync messages) as dropped.
func TestBudgetIsExact(t *testing.T) {
	tests := []struct {
		name  string
		key   []byte
		label string
	}{
		{name: "plaintext"},
		{name: "label", label: "obol"},
		{name: "aes-128", key: testKey[:16]},
		{name: "aes-256 and label", key: testKey, label: "obol-production-mesh"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nodes := mesh(t, gossiptest.NewFaultNet(), 2, func(c *Config) {
				c.SecretKey, c.Label, c.Tune = tc.key, tc.label, quiet
			})
			a, b := nodes[0], nodes[1]
			target := b.ml.LocalNode()
			for i, size := range []int{a.Budget(), a.Budget() + 1} {
				msg := make([]byte, size)
				for j := range msg {
					msg[j] = 0xc1 // msgpack's never-used code: undecodable
				}
				if err := a.ml.SendBestEffort(target, msg); err != nil {
					t.Fatal(err)
				}
				if got, want := a.tr.Stats().MaxSize, MaxDatagram+i; got != want {
					t.Fatalf("a %d-byte message left as a datagram of %d bytes, want %d", size, got, want)
				}
				eventually(t, 5*time.Second, "the receiver drops it", func() bool { return b.Stats().Dropped == uint64(i+1) })
			}
		})
	}
}

// TestRealTransport runs two nodes on memberlist's own transport, bound to
// port 0: Addr reports the port actually bound, and they join and exchange.
func TestRealTransport(t *testing.T) {
	var nodes []*Node
	recs := []*recorder{{}, {}}
	for i := range 2 {
		cfg := Config{Name: "r" + strconv.Itoa(i), Bind: "127.0.0.1:0", Tune: quick, Logger: testLogger(t), RejoinInterval: -1}
		if i > 0 {
			cfg.Join = []string{nodes[0].Addr()}
		}
		n, err := New(cfg, recs[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Shutdown() })
		if host, port, _ := net.SplitHostPort(n.Addr()); host != "127.0.0.1" || port == "0" {
			t.Fatalf("Addr = %q, want 127.0.0.1 and the bound port", n.Addr())
		}
		nodes = append(nodes, n)
	}
	eventually(t, 5*time.Second, "both see 2 live", func() bool { return nodes[0].Live() == 2 && nodes[1].Live() == 2 })
	if err := nodes[0].Send(&packet.Packet{Counts: []packet.Count{{Hash: 5, Value: 8}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "r1 gets the packet", func() bool { return recs[1].has("r0", false, 5, 8) })
}

// TestJoinTimeout: a seed that accepts a connection and never answers does
// not hold New past JoinTimeout.
func TestJoinTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent
		}
	}()
	begin := time.Now()
	nd := start(t, gossiptest.NewFaultNet(), "hopeful", func(c *Config) {
		c.Join = []string{ln.Addr().String()}
		c.JoinTimeout = 100 * time.Millisecond
	})
	if took := time.Since(begin); took > 1500*time.Millisecond {
		t.Fatalf("New took %v with JoinTimeout 100ms", took)
	}
	if nd.Live() != 1 {
		t.Fatalf("Live = %d, want 1", nd.Live())
	}
}

// TestBeaconRevivesAfterHeal: after a partition long enough for both sides
// to declare the other dead (and for memberlist's broadcasts about it to
// be spent), healing the network is noticed through the beacon: the cut
// node hears one, resyncs, and both sides see each other alive again. With
// beacons off (the control), nothing revives them within the same time:
// memberlist neither probes nor gossips to the dead, and push/pull and the
// rejoin loop are off here.
func TestBeaconRevivesAfterHeal(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("beacon=%v", on), func(t *testing.T) {
			t.Parallel()
			fn := gossiptest.NewFaultNet()
			nodes := mesh(t, fn, 3, func(c *Config) {
				c.Tune = func(mc *memberlist.Config) {
					fast(mc)
					mc.PushPullInterval = 0
				}
				if !on {
					c.BeaconInterval = -1
				}
			})
			fn.Partition(nodes[2].Addr())
			eventually(t, 15*time.Second, "both sides declare the other dead", func() bool {
				return nodes[0].Live() == 2 && nodes[1].Live() == 2 && nodes[2].Live() == 1
			})
			time.Sleep(time.Second) // memberlist's broadcasts about the deaths are spent
			before := nodes[2].Stats().Resyncs + nodes[0].Stats().Resyncs + nodes[1].Stats().Resyncs
			fn.Heal()
			healed := time.Now()
			revived := func() bool {
				return nodes[0].Live() == 3 && nodes[1].Live() == 3 && nodes[2].Live() == 3
			}
			if !on {
				time.Sleep(3 * time.Second)
				if revived() {
					t.Fatalf("without beacons the mesh revived anyway: the test does not isolate the beacon")
				}
				return
			}
			eventually(t, 3*time.Second, "every node sees the other two alive after the heal", revived)
			t.Logf("revived %v after the heal", time.Since(healed).Round(time.Millisecond))
			if after := nodes[2].Stats().Resyncs + nodes[0].Stats().Resyncs + nodes[1].Stats().Resyncs; after == before {
				t.Fatalf("no resync after the heal")
			}
		})
	}
}

func mustEncode(p *packet.Packet) []byte {
	b, err := packet.Encode(p)
	if err != nil {
		panic(err)
	}
	return b
}
