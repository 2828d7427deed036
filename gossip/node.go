package gossip

// The node and its public API: New, Send, the views of the mesh (Live,
// Peers, Stats), Leave and Shutdown. What memberlist calls is in
// delegate.go, the node's background loops in loops.go, owner placement
// and SendTo in route.go.

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/gossip/stream"
	"github.com/obol-dev/obol/internal/clock"
)

// goneRetention is how long Peers keeps listing a member after it left or
// died, and how long after a death the beacon loop still calls on it.
const goneRetention = 5 * time.Minute

// Handler receives what the mesh delivers. It is implemented by the merging
// layer; all methods are called on memberlist's goroutines (or this
// package's), possibly concurrently, and must be safe for concurrent use.
type Handler interface {
	// HandlePacket merges a received packet. Sync messages arrive on the
	// node's receive workers, each origin's on one worker in the order
	// memberlist delivered them; push/pull state arrives on memberlist's
	// goroutines, with Full set, and may arrive before New returns (during
	// the initial join). Must not block: a worker that waits lets its
	// queue fill, and what then arrives for it is dropped. The packet is
	// the handler's to keep.
	HandlePacket(p *packet.Packet)
	// Snapshot returns the node's full state (Full set) for push/pull
	// anti-entropy and joiners. Must not block long. From, Incarnation and
	// Full are overwritten with this node's values. nil means no state.
	Snapshot() *packet.Packet
	// NodeGone is called once when memberlist declares a node left or dead
	// (not for self). It is called on a goroutine of this package, in the
	// order memberlist reported departures, and may call the Node's
	// methods other than Shutdown. It is skipped when packets from a newer incarnation of that
	// name have already been handled (the departure is the old instance's,
	// whose state the newer incarnation has already replaced). A node that
	// returns and departs again is reported again.
	NodeGone(name string)
}

// Peer describes a member as this node sees it.
type Peer struct {
	Name        string
	Addr        string // advertised "host:port"
	State       string // alive, dead or left (memberlist does not expose suspicion: a suspect member is alive)
	Self        bool
	Incarnation uint64    // from the member's meta (or its packets, before its meta is known)
	LastSync    time.Time // last sync packet or push/pull state received from it; zero: none
	BytesIn     uint64    // sync and push/pull bytes received from it
	BytesOut    uint64    // sync bytes sent to it
}

// Stats are a node's counters since New. Bytes count sync messages and
// push/pull states (the bytes packet.Encode and packet.Split produce), not
// memberlist's framing.
type Stats struct {
	BytesIn, BytesOut     uint64
	PacketsIn, PacketsOut uint64 // sync messages
	StatesIn, StatesOut   uint64 // push/pull states
	Dropped               uint64 // received messages that were undecodable, oversized or claimed this node's name, and states holding a sum
	SendErrors            uint64 // datagrams memberlist failed to send
	StatesSkipped         uint64 // snapshots not sent because they exceeded the push/pull limit
	StatesTrimmed         uint64 // states sent with some of the origins they hold left out, to fit the push/pull limit
	Resyncs               uint64 // push/pulls started with a peer back from a silence or a death
	UnheardResyncs        uint64 // push/pulls queued with a live member never heard from (it may not know of this node)
	QueueDrops            uint64 // sync messages dropped because their receive worker's queue was full (not in Dropped)
	// Repair of sequenced streams: seqs this node asked its peers for,
	// messages it sent again when asked, push/pulls started because a gap
	// could not be filled (also in Resyncs), messages heard twice (not
	// merged again), key names asked for and names told.
	Asked, Resent, RepairResyncs, Duplicates uint64
	NamesAsked, NamesSent                    uint64
	Targeted                                 uint64 // sync messages sent by SendTo (also in PacketsOut): owner mode's traffic
	// Targeted streams (Reships): their seqs missing and the messages
	// sent again count in Asked and Resent; reships this node asked
	// members for (a gap it gave up on) and made (asked for messages no
	// longer kept, or a reship).
	ReshipsAsked, ReshipsMade uint64
	// NotMember counts the sync messages and states dropped unread because
	// memberlist had declared their sender dead or left, or because it
	// spoke under an earlier incarnation than the member's: a replay of a
	// gone node's datagrams. Not in Dropped.
	NotMember uint64
}

// Node is one member of the gossip mesh. Its methods are safe for concurrent
// use.
type Node struct {
	name       string
	inc        uint64
	onConflict func(uint64)
	h          Handler
	log        *slog.Logger
	clk        clock.Clock // stamps what the node hears; see Config.Clock
	ml         *memberlist.Memberlist
	budget     int
	addr       string
	seeds      []string
	port       int    // default port for seeds
	beacon     []byte // the beacon: an empty packet from this node; nil with the loop off

	leaving atomic.Bool
	metaOn  []byte // meta while running
	metaOff []byte // meta while leaving

	bytesIn, bytesOut, packetsIn, packetsOut atomic.Uint64
	statesIn, statesOut, dropped, sendErrors atomic.Uint64
	statesSkipped, resyncs, queueDrops       atomic.Uint64
	statesTrimmed                            atomic.Uint64
	asked, resent, repairResyncs, duplicates atomic.Uint64
	notMember, unheardResyncs                atomic.Uint64
	namesAsked, namesSent                    atomic.Uint64
	targeted, reshipsAsked, reshipsMade      atomic.Uint64

	unsequenced bool
	allRepair   atomic.Bool     // every live peer repairs (recount)
	allState    atomic.Bool     // every live peer reads a mesh state (recount)
	allSums     atomic.Bool     // every live peer reads a mesh state's sums (recount)
	noOwners    bool            // Config.NoOwners
	allOwners   atomic.Bool     // every live member aggregates (recount)
	allTargeted atomic.Bool     // every live member reads targeted messages (recount)
	hbPeers     int             // stream.HeartbeatPeers (tests set fewer), under mu
	stretch     atomic.Int64    // HeartbeatStretch (recount)
	laneMu      sync.Mutex      // numbers messages to one member (SendTo) and keeps them
	tout        *stream.Targets // those streams (under laneMu)
	epoch       atomic.Uint64   // membership epoch: bumped, under mu, when the live set changes
	placeMu     sync.Mutex      // held by the one goroutine rebuilding place
	placeKick   chan struct{}   // wakes the placer: the live set changed
	place       atomic.Pointer[placement]
	sendMu      sync.Mutex         // numbers messages and sends them in order
	out         *stream.Out        // this node's stream (under sendMu)
	recipients  []*memberlist.Node // Send's (under sendMu)
	inMu        sync.Mutex         // guards in
	in          *stream.In         // the peers' streams
	tin         *stream.In         // the peers' targeted streams to this node (under inMu)
	repairKick  chan struct{}      // wakes the repair loop

	recv         receiver      // the receive workers' queues
	dropsLogged  atomic.Uint64 // queueDrops when last logged
	dropLoggedAt atomic.Int64  // when, unix ns on clk; 0: never

	mu          sync.Mutex
	peers       map[string]*peerState
	gone        []goneEvent // NodeGone queue
	resync      []string    // names of peers to push/pull with
	welcome     []string    // names of members new to this node, for Welcomer
	resyncAfter time.Duration

	wake      chan struct{} // signals the NodeGone dispatcher
	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once

	// gate is held shared around every Handler call; Shutdown takes it
	// exclusively to set closed, so no call runs after Shutdown returns.
	gate   sync.RWMutex
	closed bool
}

// peerState is what a node knows of a peer (or of itself), under Node.mu.
type peerState struct {
	addr string
	// node is this node's own copy of memberlist's record of the member,
	// taken in its callbacks (under memberlist's lock): memberlist's
	// Members returns pointers into records it rewrites as members change,
	// which cannot be read outside that lock without a data race.
	node     *memberlist.Node
	state    string // "" until memberlist reports the member
	inc      uint64 // from meta
	pktInc   uint64 // highest incarnation seen in its packets
	leaving  bool
	changed  time.Time // when state last changed
	protoMax uint8     // memberlist's delegate protocol max: repairProtocol or more reads sequenced messages, ownerProtocol or more aggregates
	lastSync time.Time
	in, out  uint64
	resynced time.Time // last push/pull this node started with it
}

// goneEvent is a departure waiting for Handler.NodeGone.
type goneEvent struct {
	name string
	inc  uint64
}

// New creates a node, starts memberlist and joins the seeds. Memberlist is
// configured from DefaultLANConfig (false suspicion is worse than slow
// detection when every node fails open) with compression off,
// DeadNodeReclaimTime 1 s, HandoffQueueDepth 4096, UDPBufferSize
// MaxDatagram, the key and label, then Tune. A failed join is logged, never
// fatal: the node runs alone and the rejoin loop retries. h must be ready
// before New is called.
func New(cfg Config, h Handler) (*Node, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	set := cfg.settings(clock.Real{}.Now()) // an incarnation is a wall-clock start
	n := &Node{
		name: cfg.Name,
		inc:  set.inc, onConflict: cfg.OnNameConflict,
		h:           h,
		log:         set.log,
		clk:         set.clk,
		seeds:       slices.Clone(cfg.Join),
		metaOn:      encodeMeta(set.inc, false),
		metaOff:     encodeMeta(set.inc, true),
		peers:       map[string]*peerState{},
		resyncAfter: set.resyncAfter,
		hbPeers:     stream.HeartbeatPeers,
		wake:        make(chan struct{}, 1),
		done:        make(chan struct{}),
		recv:        newReceiver(set.workers, set.queue),
		unsequenced: cfg.Unsequenced,
		noOwners:    cfg.NoOwners,
		out:         stream.NewOut(RepairMessages, RepairBytes),
		in:          newIn(),
		tin:         newIn(),
		tout:        stream.NewTargets(RepairMessages, RepairBytes),
		repairKick:  make(chan struct{}, 1),
		placeKick:   make(chan struct{}, 1),
	}
	n.allRepair.Store(true) // alone: nobody to wait for
	n.allState.Store(true)
	n.allSums.Store(true)
	n.allOwners.Store(true)
	n.allTargeted.Store(true)
	n.stretch.Store(1)

	mc := profile(cfg)
	mc.Delegate = (*delegate)(n)
	mc.Events = (*delegate)(n)
	mc.Conflict = (*delegate)(n)
	if cfg.Tune != nil {
		cfg.Tune(mc)
	}
	n.budget = Budget(mc)
	if n.budget < 64 {
		return nil, fmt.Errorf("%w: message budget of %d bytes is too small (label %d bytes)", ErrConfig, n.budget, len(mc.Label))
	}

	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip: start memberlist on %s: %w", cmp.Or(cfg.Bind, defaultBind), err)
	}
	n.ml = ml
	n.addr = ml.LocalNode().Address()
	n.port = mc.BindPort // memberlist sets it to the bound port when it was 0
	n.warnExposed(mc, cfg.Transport != nil)

	for _, q := range n.recv.queues { // what memberlist queued meanwhile waits in q
		n.wg.Add(1)
		go n.receiveLoop(q)
	}
	n.wg.Add(1)
	go n.dispatch()
	n.wg.Add(1)
	go n.placer()
	if len(n.seeds) > 0 {
		n.join(set.joinTimeout, set.rejoinEvery)
	}
	if set.beaconEvery > 0 {
		if b, err := packet.Encode(&packet.Packet{From: n.name, Incarnation: n.inc}); err != nil {
			n.log.Error("gossip: beacon", "err", err)
		} else {
			n.beacon = b
			n.wg.Add(1)
			// One loop reaches the members that cannot hear this node:
			// the dead ones (beacons) and the live ones that never spoke.
			go n.every(set.clk, func() time.Duration { return set.beaconEvery }, func(now time.Time) int {
				return n.beaconStep(now) + n.unheardStep(now)
			})
		}
	}
	n.wg.Add(1)
	go n.repairLoop(set.clk)
	if set.rejoinEvery > 0 {
		every, rng := set.rejoinEvery, set.rng // rng: this goroutine's alone
		n.wg.Add(1)
		go n.every(set.clk, func() time.Duration { return jitter(every, rng) }, n.rejoinStep)
	}
	return n, nil
}

// warnExposed logs a warning when memberlist, configured by mc, listens off
// loopback without a key. With a transport of its own (own) the bind
// address is not used: it judges by the address peers are told to reach.
func (n *Node) warnExposed(mc *memberlist.Config, own bool) {
	if len(mc.SecretKey) > 0 || mc.Keyring != nil {
		return
	}
	exposed := net.ParseIP(mc.BindAddr)
	if own {
		exposed = n.ml.LocalNode().Addr
	}
	if exposed == nil || !exposed.IsLoopback() {
		n.log.Warn("gossip: listening off loopback without a secret key: anyone who reaches this address can join the mesh and inject counts; give a key (16, 24 or 32 bytes) on a network you do not fully trust",
			"bind", net.JoinHostPort(mc.BindAddr, strconv.Itoa(n.port)), "advertise", n.addr)
	}
}

// join joins the seeds once, in the background, and waits for it up to
// wait (on the wall clock: the join is memberlist's dialing), logging the
// outcome; retry is the rejoin interval it reports.
func (n *Node) join(wait, retry time.Duration) {
	ml := n.ml
	joined := make(chan struct{})
	go func() { // not in wg: a dial in progress may outlive Shutdown by TCPTimeout
		defer close(joined)
		k, err := ml.Join(n.seeds)
		switch {
		case n.stopped():
		case err != nil && k == 0 || ml.NumMembers() < 2:
			if err == nil {
				err = errors.New("no seed address is another member")
			}
			n.log.Warn("gossip: join failed: no peer reached; running alone, retrying", "seeds", n.seeds,
				"reached", k, "err", oneLine(err), "retry_every", retry.String())
		case err != nil:
			n.log.Info("gossip: joined", "seeds", n.seeds, "reached", k, "members", ml.NumMembers(), "unreached", oneLine(err))
		default:
			n.log.Info("gossip: joined", "seeds", n.seeds, "reached", k, "members", ml.NumMembers())
		}
	}()
	select {
	case <-joined:
	case <-clock.Real{}.After(wait):
		n.log.Warn("gossip: join still in progress; continuing", "seeds", n.seeds, "waited", wait)
	}
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Incarnation returns the node's incarnation.
func (n *Node) Incarnation() uint64 { return n.inc }

// Addr returns the "host:port" this node advertises to peers: the bound
// address with the port actually bound (or Advertise). Peers join it.
func (n *Node) Addr() string { return n.addr }

// Budget returns the largest message Send puts in one datagram.
func (n *Node) Budget() int { return n.budget }

// Live returns the number of live (alive or suspect) members, self
// included. It takes memberlist's member lock briefly.
func (n *Node) Live() int { return n.ml.NumMembers() }

// Send splits p into messages of at most Budget bytes and sends each, best
// effort over UDP, to every live member except self. From and Incarnation
// are set to this node's, and, while the node Repairs, the messages are
// the next of its numbered stream and kept to be sent again (p is not
// modified). It does not wait for the network beyond handing datagrams to
// the kernel. It returns packet.ErrTooLarge from packet.Split, or every
// send failure joined (each also counted in Stats.SendErrors); with no
// other member it sends nothing.
func (n *Node) Send(p *packet.Packet) error {
	if p == nil {
		return fmt.Errorf("%w: nil packet", packet.ErrInvalid)
	}
	if n.stopped() {
		return ErrShutdown
	}
	cp := *p
	cp.From, cp.Incarnation, cp.Seq = n.name, n.inc, 0
	n.sendMu.Lock() // one stream, sent in order
	defer n.sendMu.Unlock()
	numbered := n.Repairs()
	if numbered {
		cp.Seq = n.out.Next()
	}
	msgs, err := packet.Split(&cp, n.budget)
	if err != nil {
		return err
	}
	if numbered {
		n.out.Sent(msgs)
	}
	var errs []error
	n.recipients = n.liveNodes(n.recipients[:0])
	for _, m := range n.recipients {
		var sent uint64
		for _, b := range msgs {
			if err := n.ml.SendBestEffort(m, b); err != nil {
				n.sendErrors.Add(1)
				errs = append(errs, fmt.Errorf("gossip: send to %s (%s): %w", m.Name, m.Address(), err))
				continue
			}
			sent += uint64(len(b))
			n.packetsOut.Add(1)
		}
		n.bytesOut.Add(sent)
		n.mu.Lock()
		n.peer(m.Name).out += sent
		n.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Peers returns self and every member memberlist has reported, including
// those that left or died in the last five minutes, sorted by name.
func (n *Node) Peers() []Peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Peer, 0, len(n.peers))
	for name, ps := range n.peers {
		if ps.state == "" {
			continue
		}
		inc := ps.inc
		if inc == 0 {
			inc = ps.pktInc
		}
		out = append(out, Peer{
			Name: name, Addr: ps.addr, State: ps.state, Self: name == n.name,
			Incarnation: inc, LastSync: ps.lastSync, BytesIn: ps.in, BytesOut: ps.out,
		})
	}
	slices.SortFunc(out, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{
		BytesIn: n.bytesIn.Load(), BytesOut: n.bytesOut.Load(),
		PacketsIn: n.packetsIn.Load(), PacketsOut: n.packetsOut.Load(),
		StatesIn: n.statesIn.Load(), StatesOut: n.statesOut.Load(),
		Dropped: n.dropped.Load(), SendErrors: n.sendErrors.Load(),
		StatesSkipped: n.statesSkipped.Load(), StatesTrimmed: n.statesTrimmed.Load(),
		Resyncs:    n.resyncs.Load(),
		QueueDrops: n.queueDrops.Load(),
		Asked:      n.asked.Load(), Resent: n.resent.Load(),
		RepairResyncs: n.repairResyncs.Load(), Duplicates: n.duplicates.Load(), NotMember: n.notMember.Load(), UnheardResyncs: n.unheardResyncs.Load(),
		NamesAsked: n.namesAsked.Load(), NamesSent: n.namesSent.Load(),
		Targeted: n.targeted.Load(), ReshipsAsked: n.reshipsAsked.Load(), ReshipsMade: n.reshipsMade.Load(),
	}
}

// ErrShutdown is returned by Leave, Send and SendTo after Shutdown.
var ErrShutdown = errors.New("gossip: node is shut down")

// Leave announces that this node is leaving, so that peers report it left
// (not dead) and drop its state at once, and waits up to timeout for the
// announcements to go out: first its meta marked leaving (half the
// timeout at most), then memberlist's leave. The node keeps running until
// Shutdown.
func (n *Node) Leave(timeout time.Duration) error {
	select {
	case <-n.done:
		return ErrShutdown
	default:
	}
	wall := clock.Real{} // the timeout bounds memberlist's waits on the network
	start := wall.Now()
	n.leaving.Store(true)
	if err := n.ml.UpdateNode(timeout / 2); err != nil {
		n.log.Debug("gossip: leave: meta update not confirmed", "err", err)
	}
	rest := max(timeout-wall.Now().Sub(start), time.Millisecond)
	if err := n.ml.Leave(rest); err != nil {
		return fmt.Errorf("gossip: leave: %w", err)
	}
	return nil
}

// Shutdown stops memberlist, its listeners and this package's goroutines
// (the receive workers among them), without announcing a leave (peers will
// declare the node dead; call Leave first for a graceful exit). It waits
// for Handler calls in progress, and none starts once it returns; a Handler
// method must therefore not call it. Sync messages still queued for the
// receive workers, or arriving later, are discarded, not counted. Calling
// it again returns nil.
func (n *Node) Shutdown() error {
	var err error
	n.closeOnce.Do(func() {
		close(n.done)
		n.gate.Lock()
		n.closed = true
		n.gate.Unlock()
		err = n.ml.Shutdown()
		n.wg.Wait()
	})
	return err
}

// enter reports whether a Handler call may start; if so, exit must follow.
func (n *Node) enter() bool {
	n.gate.RLock()
	if n.closed {
		n.gate.RUnlock()
		return false
	}
	return true
}

func (n *Node) exit() { n.gate.RUnlock() }

func (n *Node) stopped() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// peer returns the state for name, creating it. n.mu must be held.
func (n *Node) peer(name string) *peerState {
	ps := n.peers[name]
	if ps == nil {
		ps = &peerState{}
		n.peers[name] = ps
	}
	return ps
}
