package gossip

import (
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// newNode starts a node alone on a fault-injecting transport, with handler
// h, memberlist quiet and the node's loops off; mut adjusts the config.
func newNode(tb testing.TB, h Handler, mut func(*Config)) *Node {
	tb.Helper()
	tr, err := gossiptest.NewFaultNet().Listen()
	if err != nil {
		tb.Fatal(err)
	}
	cfg := Config{Name: "self", Transport: tr, Tune: quiet, RejoinInterval: -1, BeaconInterval: -1, ResyncAfter: -1}
	if mut != nil {
		mut(&cfg)
	}
	n, err := New(cfg, h)
	if err != nil {
		_ = tr.Shutdown()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = n.Shutdown() })
	return n
}

// seq is a sync message from `from` carrying the count i (its sequence).
func seq(from string, i int) []byte {
	return mustEncode(&packet.Packet{From: from, Counts: []packet.Count{{Hash: 1, Bucket: 1_700_000_000_000, Value: uint64(i)}}})
}

// within runs f on another goroutine and fails if it has not returned
// after d: a deadline on something that must not block, not a timing.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s blocked for %v", what, d)
	}
}

// TestReceiveKeepsOriginOrder: messages from many origins, interleaved,
// reach the handler each origin's in the order NotifyMsg got them, and
// none is dropped while the queues have room.
func TestReceiveKeepsOriginOrder(t *testing.T) {
	tests := []struct {
		name             string
		workers, origins int
		each             int // messages per origin
	}{
		{name: "one worker", workers: 1, origins: 5, each: 100},
		{name: "four workers", workers: 4, origins: 9, each: 100},
		{name: "more workers than origins", workers: 16, origins: 3, each: 200},
		{name: "the default", workers: 0, origins: 8, each: 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			n := newNode(t, rec, func(c *Config) { c.ReceiveWorkers, c.ReceiveQueue = tc.workers, tc.origins*tc.each })
			d := (*delegate)(n)
			for i := 1; i <= tc.each; i++ {
				for o := range tc.origins {
					d.NotifyMsg(seq("o"+strconv.Itoa(o), i))
				}
			}
			total := tc.origins * tc.each
			eventually(t, 10*time.Second, "every message handled", func() bool { return rec.count(func(*packet.Packet) bool { return true }) == total })
			rec.mu.Lock()
			next := map[string]uint64{}
			for _, p := range rec.packets {
				if want := next[p.From] + 1; p.Counts[0].Value != want {
					t.Fatalf("from %s: message %d handled when %d was due", p.From, p.Counts[0].Value, want)
				}
				next[p.From]++
			}
			rec.mu.Unlock()
			if s := n.Stats(); s.QueueDrops != 0 || s.Dropped != 0 || s.PacketsIn != uint64(total) {
				t.Fatalf("stats %+v, want %d packets in and no drops", s, total)
			}
		})
	}
}

// stalling is a Handler that holds every packet from stall until release
// is closed, announcing each on started first, and records everything.
type stalling struct {
	recorder
	stall   string
	started chan string
	release chan struct{}
	after   *atomic.Bool // set: a call now is a call after Shutdown returned
	late    atomic.Int64
	once    sync.Once
}

// free lets the held calls and every later one through.
func (h *stalling) free() { h.once.Do(func() { close(h.release) }) }

func newStalling(from string) *stalling {
	return &stalling{stall: from, started: make(chan string, 1024), release: make(chan struct{}), after: new(atomic.Bool)}
}

func (h *stalling) HandlePacket(p *packet.Packet) {
	if h.after.Load() {
		h.late.Add(1)
	}
	if p.From == h.stall {
		h.started <- p.From
		<-h.release
	}
	h.recorder.HandlePacket(p)
}

// waitStarted waits for the stalled handler call to start.
func (h *stalling) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not called")
	}
}

// otherOrigin returns an origin name whose messages go to another worker
// than from's.
func otherOrigin(n *Node, from string) string {
	for i := 0; ; i++ {
		o := "other" + strconv.Itoa(i)
		if n.recv.queueFor([]byte(o)) != n.recv.queueFor([]byte(from)) {
			return o
		}
	}
}

// TestReceiveQueueFullDrops: with the handler stalled on one origin, its
// worker's queue fills; what arrives for it then is dropped and counted,
// NotifyMsg never waits, other workers go on, and the warning comes at most
// once a minute on the node's clock. Released, the worker handles what was
// queued.
func TestReceiveQueueFullDrops(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name           string
		workers, queue int
		over           int // messages sent once the queue is full
	}{
		{name: "one worker", workers: 1, queue: 4, over: 10},
		{name: "a queue of one", workers: 1, queue: 1, over: 3},
		{name: "two workers", workers: 2, queue: 8, over: 20},
		{name: "eight workers", workers: 8, queue: 2, over: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logCapture{}
			fake := clock.NewFake(t0)
			h := newStalling("a")
			n := newNode(t, h, func(c *Config) {
				c.ReceiveWorkers, c.ReceiveQueue, c.Logger, c.Clock = tc.workers, tc.queue, logs.logger(), fake
			})
			t.Cleanup(h.free) // before the node's Shutdown, should the test fail
			d := (*delegate)(n)
			const warning = "gossip: receive queue full, dropping sync messages; asks, resends and resyncs repair the loss"

			d.NotifyMsg(seq("a", 1))
			h.waitStarted(t) // the worker holds message 1
			within(t, 10*time.Second, "NotifyMsg on a full queue", func() {
				for i := 2; i <= 1+tc.queue+tc.over; i++ {
					d.NotifyMsg(seq("a", i))
				}
			})
			if s := n.Stats(); s.QueueDrops != uint64(tc.over) || s.Dropped != 0 {
				t.Fatalf("QueueDrops %d, Dropped %d; want %d and 0", s.QueueDrops, s.Dropped, tc.over)
			}
			// The first drop is logged at once, the next ones a minute on.
			if got := logs.match(warning, map[string]string{"dropped": "1", "total": "1", "from": "a",
				"workers": strconv.Itoa(tc.workers), "queue": strconv.Itoa(tc.queue)}); len(got) != 1 || got[0].level != slog.LevelWarn || len(logs.match(warning, nil)) != 1 {
				t.Fatalf("want one warning, for the first drop:\n%s", logs)
			}

			sent := 1 + tc.queue + tc.over
			if tc.workers > 1 {
				sent++
				b := otherOrigin(n, "a")
				d.NotifyMsg(seq(b, 1))
				eventually(t, 10*time.Second, "another worker handles "+b, func() bool { return h.from(b) == 1 })
			}

			fake.Advance(dropLogEvery - time.Second)
			d.NotifyMsg(seq("a", 1000))
			if got := logs.match(warning, nil); len(got) != 1 {
				t.Fatalf("%d warnings within the minute, want 1:\n%s", len(got), logs)
			}
			fake.Advance(time.Second)
			d.NotifyMsg(seq("a", 1001))
			total := tc.over + 2
			sent += 2
			if got := logs.match(warning, map[string]string{"dropped": strconv.Itoa(total - 1), "total": strconv.Itoa(total)}); len(got) != 1 || len(logs.match(warning, nil)) != 2 {
				t.Fatalf("want a second warning a minute on, for the %d drops since the first:\n%s", total-1, logs)
			}

			h.free()
			eventually(t, 10*time.Second, "the queued messages are handled", func() bool { return h.from("a") == 1+tc.queue })
			if s := n.Stats(); s.QueueDrops != uint64(total) || s.PacketsIn != uint64(sent) {
				t.Fatalf("stats %+v, want %d drops", s, total)
			}
		})
	}
}

// TestReceiveShutdown: Shutdown waits for the handler call in progress,
// discards what is queued, and no handler call starts once it returned;
// the receive workers are gone.
func TestReceiveShutdown(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		queued  int // messages queued behind a stalled one; -1: none sent
	}{
		{name: "idle, default workers", workers: 0, queued: -1},
		{name: "idle, many workers", workers: 32, queued: -1},
		{name: "a call in progress", workers: 1, queued: 0},
		{name: "a call in progress and a queue", workers: 2, queued: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newStalling("a")
			n := newNode(t, h, func(c *Config) { c.ReceiveWorkers = tc.workers })
			t.Cleanup(h.free)
			d := (*delegate)(n)
			handled := 0
			if tc.queued >= 0 {
				d.NotifyMsg(seq("a", 1))
				h.waitStarted(t)
				for i := range tc.queued {
					d.NotifyMsg(seq("a", 2+i))
				}
				handled = 1
			}

			down := make(chan error, 1)
			go func() { down <- n.Shutdown() }()
			if tc.queued >= 0 {
				eventually(t, 10*time.Second, "Shutdown starts", n.stopped)
				select {
				case err := <-down:
					t.Fatalf("Shutdown returned (%v) while a handler call was in progress", err)
				default:
				}
				h.free()
			}
			select {
			case err := <-down:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Shutdown did not return")
			}
			h.after.Store(true)

			within(t, 10*time.Second, "NotifyMsg after Shutdown", func() {
				for i := range 2 * defaultReceiveQueue {
					d.NotifyMsg(seq("b", i+1))
				}
			})
			if got := h.from("a") + h.from("b"); got != handled || h.late.Load() != 0 {
				t.Fatalf("%d handled (%d after Shutdown), want %d", got, h.late.Load(), handled)
			}
			if s := n.Stats(); s.QueueDrops != 0 {
				t.Fatalf("QueueDrops %d after Shutdown, want 0 (discarded, not counted)", s.QueueDrops)
			}
			eventually(t, 10*time.Second, "no receive worker left", func() bool { return !goroutineIn("gossip.(*Node).receiveLoop") })
		})
	}
}

// goroutineIn reports whether a goroutine is in function fn.
func goroutineIn(fn string) bool {
	buf := make([]byte, 1<<20)
	for {
		k := runtime.Stack(buf, true)
		if k < len(buf) {
			return strings.Contains(string(buf[:k]), fn)
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestReceiveDropsBeforeQueueing: what cannot be a sync message is counted
// in Dropped, by NotifyMsg (oversized, no readable sender) or by the worker
// (a sender but a bad body, or this node's name), and never reaches the
// handler.
func TestReceiveDropsBeforeQueueing(t *testing.T) {
	good := seq("a", 1)
	tests := []struct {
		name string
		in   []byte
	}{
		{name: "oversized", in: make([]byte, MaxDatagram+1)},
		{name: "not msgpack", in: []byte("hello")},
		{name: "another version", in: []byte{0x96, 0x02, 0xa1, 'a'}},
		{name: "a sender but a bad body", in: good[:len(good)-1]},
		{name: "this node's name", in: seq("self", 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			n := newNode(t, rec, func(c *Config) { c.ReceiveWorkers = 1 })
			(*delegate)(n).NotifyMsg(tc.in)
			(*delegate)(n).NotifyMsg(good) // handled after in: in is settled then
			eventually(t, 10*time.Second, "the good message handled", func() bool { return rec.from("a") == 1 })
			if s := n.Stats(); s.Dropped != 1 || s.QueueDrops != 0 || s.PacketsIn != 2 {
				t.Fatalf("stats %+v, want one drop of two packets", s)
			}
			if got := rec.count(func(*packet.Packet) bool { return true }); got != 1 {
				t.Fatalf("%d packets handled, want 1", got)
			}
		})
	}
}

// TestReceiveCopies: NotifyMsg keeps no reference to its argument, which
// memberlist may reuse once it returns.
func TestReceiveCopies(t *testing.T) {
	h := newStalling("a")
	n := newNode(t, h, func(c *Config) { c.ReceiveWorkers = 1 })
	t.Cleanup(h.free)
	d := (*delegate)(n)
	d.NotifyMsg(seq("a", 1))
	h.waitStarted(t) // later messages wait in the queue
	b := seq("a", 2)
	d.NotifyMsg(b)
	copy(b, seq("a", 9)) // as memberlist's next datagram would
	h.free()
	eventually(t, 10*time.Second, "both handled", func() bool { return h.from("a") == 2 })
	if !h.has("a", false, 1, 2) || h.has("a", false, 1, 9) {
		t.Fatal("the queued message changed with the caller's buffer")
	}
}

// realistic returns the datagrams a node named from sends for one tick of
// keys keys (names for a quarter, counts in two buckets each, some marks
// and gauges), split at the budget of a keyed mesh labelled "obol".
func realistic(from string, keys int) [][]byte {
	p := &packet.Packet{From: from, Incarnation: 1_700_000_000_123_456_789}
	now := int64(1_700_000_000_000)
	for k := range keys {
		h := uint64(k+1) * 0x9e3779b97f4a7c15
		if k%4 == 0 {
			p.Names = append(p.Names, packet.Name{Hash: h, Resource: "api/search", Domain: "tenant-" + strconv.Itoa(k)})
		}
		p.Counts = append(p.Counts, packet.Count{Hash: h, Bucket: now, Value: uint64(k)}, packet.Count{Hash: h, Bucket: now + 250, Value: uint64(k + 3)})
		if k%10 == 0 {
			p.Marks = append(p.Marks, packet.Mark{Hash: h, Slot: 1, At: now + 17})
		}
		if k%20 == 0 {
			p.Gauges = append(p.Gauges, packet.Gauge{Hash: h, Value: 3, Version: uint64(k)})
		}
	}
	msgs, err := packet.Split(p, 1309)
	if err != nil {
		panic(err)
	}
	return msgs
}

// counting is a Handler that counts packets and frees a slot of the
// benchmark's window for each.
type counting struct {
	recorder
	slots chan struct{}
	wg    sync.WaitGroup
}

func (h *counting) HandlePacket(*packet.Packet) { <-h.slots; h.wg.Done() }

// BenchmarkReceive: datagrams through NotifyMsg, a receive worker, Decode
// and a handler that only counts, from 32 origins, 200 keys each, with at
// most ReceiveQueue datagrams in flight (so none is dropped). The handler
// does none of the merge's work: this is the receive path's own capacity.
func BenchmarkReceive(b *testing.B) {
	var msgs [][]byte
	for o := range 32 {
		msgs = append(msgs, realistic(fmt.Sprintf("obol-7d9f8c6b5-%03d", o), 200)...)
	}
	var bytes int
	for _, m := range msgs {
		bytes += len(m)
	}
	for _, workers := range []int{1, 0} {
		name := "workers=" + strconv.Itoa(workers)
		if workers == 0 {
			name = "workers=default(" + strconv.Itoa(min(defaultReceiveWorkers, runtime.GOMAXPROCS(0))) + ")"
		}
		b.Run(name, func(b *testing.B) {
			h := &counting{slots: make(chan struct{}, defaultReceiveQueue)}
			n := newNode(b, h, func(c *Config) { c.ReceiveWorkers = workers })
			d := (*delegate)(n)
			b.SetBytes(int64(bytes / len(msgs)))
			b.ReportAllocs()
			h.wg.Add(b.N)
			b.ResetTimer()
			for i := range b.N {
				h.slots <- struct{}{}
				d.NotifyMsg(msgs[i%len(msgs)])
			}
			h.wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "datagrams/s")
			if s := n.Stats(); s.QueueDrops != 0 || s.Dropped != 0 {
				b.Fatalf("stats %+v: dropped", s)
			}
		})
	}
}

// BenchmarkNotifyMsg: the time memberlist's goroutine spends on one
// datagram (size check, PeekFrom, copy, queueing), the copy then taken back
// off the queue on the same goroutine (a channel receive and a pool Put,
// tens of nanoseconds) so that the queue never fills.
func BenchmarkNotifyMsg(b *testing.B) {
	msgs := realistic("obol-7d9f8c6b5-x2x4k", 200)
	n := &Node{log: slog.New(slog.DiscardHandler), clk: clock.Real{}, done: make(chan struct{}), recv: newReceiver(1, defaultReceiveQueue)}
	q := n.recv.queues[0]
	d := (*delegate)(n)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d.NotifyMsg(msgs[i%len(msgs)])
		datagrams.Put(<-q)
		i++
	}
	if n.queueDrops.Load() != 0 {
		b.Fatal("dropped")
	}
}
