package gossip

// The test mesh: a recording Handler, memberlist timer presets, and nodes
// started on fault-injecting transports.

import (
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/await"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// recorder is a Handler that keeps what it is given.
type recorder struct {
	mu      sync.Mutex
	packets []*packet.Packet
	gone    []string
	snap    *packet.Packet
	reships []string // ReshipTo's callers
}

var (
	_ Handler   = (*recorder)(nil)
	_ Reshipper = (*recorder)(nil)
)

func (r *recorder) ReshipTo(to string) {
	r.mu.Lock()
	r.reships = append(r.reships, to)
	r.mu.Unlock()
}

func (r *recorder) reshipped() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reships)
}

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

// fulls returns how many push/pull states (Full packets) came from `from`.
func (r *recorder) fulls(from string) int {
	return r.count(func(p *packet.Packet) bool { return p.From == from && p.Full })
}

// from returns how many packets came from name.
func (r *recorder) from(name string) int {
	return r.count(func(p *packet.Packet) bool { return p.From == name })
}

// count returns how many packets received satisfy match.
func (r *recorder) count(match func(*packet.Packet) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.packets {
		if match(p) {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or the deadline passes: it waits on
// memberlist's real events, never on a fixed sleep.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, cond) {
		t.Fatalf("after %v: %s", within, what)
	}
}

// never polls cond for the whole of d and fails as soon as it holds: a
// check that memberlist's real events do not bring something about.
func never(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if poll(d, cond) {
		t.Fatal(what)
	}
}

// poll returns whether cond holds within d (await.PollOK: re-checked at
// intervals from 1 ms doubling to 50 ms). It is a poll because what the
// tests wait for has no event to wait on: memberlist reports membership
// and its datagrams to the node, not to the test, and the conditions read
// the node's state and counters (Live, Stats, what the recorder was
// handed) across its goroutines.
func poll(d time.Duration, cond func() bool) bool { return await.PollOK(d, cond) }

// markers numbers the markers handledAfter sends.
var markers atomic.Uint64

// handledAfter sends a marker (a count of a hash no test uses) from node
// from to the member named to, whose handler is rec, and waits until rec
// has it. One origin's datagrams are handled in the order they were sent
// (the fault network sends at once when it neither drops nor delays,
// loopback UDP keeps their order, memberlist hands them to the node on one
// goroutine, and the node to one receive worker per sender), so once the
// marker is handled every request from sent to before it has been
// answered: the event a test waits on, in place of a fixed sleep, to see
// that a request was not answered.
func handledAfter(t *testing.T, from *Node, to string, rec *recorder) {
	t.Helper()
	h := 1<<62 + markers.Add(1)
	if err := from.SendTo(to, &packet.Packet{Counts: []packet.Count{{Hash: h, Bucket: 1_700_000_000_000, Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the marker from "+from.Name()+" is handled", func() bool {
		return rec.count(func(p *packet.Packet) bool {
			return p.From == from.Name() && len(p.Counts) == 1 && p.Counts[0].Hash == h
		}) == 1
	})
}

// settled polls until no datagram has crossed fn's partition for 200 ms
// (ten of the test timers' gossip intervals): memberlist has spent the
// broadcasts it still had for the other side. It fails after within.
func settled(t *testing.T, fn *gossiptest.FaultNet, within time.Duration, what string) {
	t.Helper()
	const quietFor = 200 * time.Millisecond
	cut := func() uint64 { s := fn.Stats(); return s.CutOut + s.CutIn }
	last, since := cut(), time.Now()
	eventually(t, within, what, func() bool {
		if c := cut(); c != last {
			last, since = c, time.Now()
		}
		return time.Since(since) >= quietFor
	})
}

// deadFor returns how long nd has known peer name dead (memberlist declared
// the death no later), on nd's clock; 0 when it is not dead.
func deadFor(nd *testNode, name string) time.Duration {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	ps := nd.peers[name]
	if ps == nil || ps.state != "dead" {
		return 0
	}
	return nd.clk.Now().Sub(ps.changed)
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

func mustEncode(p *packet.Packet) []byte {
	b, err := packet.Encode(p)
	if err != nil {
		panic(err)
	}
	return b
}
