package gossip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
)

// MaxDatagram is the most bytes one sync datagram takes on the wire (the UDP
// payload), memberlist's framing, the label header and encryption included.
// It is also memberlist's UDPBufferSize here, so memberlist's own gossip
// packets stay within it too. With IPv4/IPv6 and UDP headers (28/48 bytes) a
// datagram stays under a 1400-byte path MTU, leaving room for overlay
// network encapsulation (VXLAN: 50 bytes) on a 1500-byte link.
const MaxDatagram = 1350

// Budget returns the largest sync message (Encode/Split output) that fits
// in MaxDatagram under memberlist config c. The overheads, from memberlist
// v0.7.0's SendBestEffort → rawSendMsgPacket → labelWrappedTransport:
//
//	1             userMsg type byte, prepended by SendBestEffort
//	5             hasCrcMsg byte + CRC-32, added when the peer speaks protocol ≥ 5
//	              (every peer of memberlist ≥ 0.5; counted always)
//	0             compression: off here, and only used when it shrinks the message
//	29            AES-GCM when a key is set: version byte 1 + nonce 12 + tag 16
//	              (encryption version 1, used from protocol version 2 up; version 0,
//	              protocol 1 only, adds PKCS#7 padding and costs up to 45)
//	2+len(label)  label header (type byte, length byte, label) when a label is set
//
// SendBestEffort does not piggyback memberlist broadcasts, so nothing else is
// added. With a key and the label "obol": 1350 − 1 − 5 − 29 − 6 = 1309 bytes;
// plaintext without a label: 1344.
func Budget(c *memberlist.Config) int {
	b := MaxDatagram - 1 - 5
	if len(c.SecretKey) > 0 || c.Keyring != nil {
		if c.ProtocolVersion < 2 {
			b -= 45
		} else {
			b -= 29
		}
	}
	if c.Label != "" {
		b -= 2 + len(c.Label)
	}
	return b
}

// maxState caps the push/pull state a node sends: memberlist refuses a
// remote state over 20 MiB (user state plus membership), failing the whole
// exchange, so a larger snapshot is left out (and logged) rather than sent.
const maxState = 16 << 20

// goneRetention is how long Peers keeps listing a member after it left or
// died.
const goneRetention = 5 * time.Minute

// Handler receives what the mesh delivers. It is implemented by the merging
// layer; all methods are called on memberlist's goroutines (or this
// package's), possibly concurrently, and must be safe for concurrent use.
type Handler interface {
	// HandlePacket merges a received packet. Called on memberlist's
	// goroutines; must not block. The packet is the handler's to keep.
	// Push/pull state arrives here too, with Full set; it may arrive
	// before New returns (during the initial join).
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

// Config configures a Node. Only Name is required.
type Config struct {
	// Name is the node name; required, unique in the mesh.
	Name string
	// Bind is the "host:port" to listen on, TCP and UDP; host must be an
	// IP literal ("" or "0.0.0.0": every interface, advertising a private
	// IP). Port 0 picks a free port (see Addr). Empty: "0.0.0.0:7946".
	// Ignored when Transport is set, except as the port of seeds given
	// without one.
	Bind string
	// Advertise is the optional "host" or "host:port" to advertise to
	// peers (host an IP literal); a missing or zero port means the bound
	// port, and so does any port when Bind's port is 0 (memberlist's rule).
	// Empty: the bound address.
	Advertise string
	// Join lists seeds, "host:port" or "host" (the bind port); a DNS name
	// joins every address it resolves to (a Kubernetes headless service),
	// one push/pull each. New joins them once and waits up to JoinTimeout;
	// when no seed answers the node runs alone (fail open) and the rejoin
	// loop keeps trying.
	Join []string
	// JoinTimeout bounds how long New waits for the initial join (each
	// unreachable address can cost memberlist's TCPTimeout, 10 s); the join
	// goes on in the background past it. 0: 5 s.
	JoinTimeout time.Duration
	// SecretKey is the memberlist keyring key (AES-GCM): 16, 24 or 32
	// bytes. nil: plaintext. A node with another key cannot join, and its
	// packets are dropped by memberlist before they reach this package.
	SecretKey []byte
	// Label is the per-mesh label (memberlist Config.Label, at most 255
	// bytes); a node with another label cannot join or inject packets.
	// Empty: no label.
	Label string
	// Incarnation is carried in node meta and stamped on every packet;
	// a higher one replaces a lower one's state. 0: time.Now().UnixNano().
	Incarnation uint64
	// Logger receives memberlist's own log at debug level and this
	// package's: membership events at info (a peer joined, left, came
	// back, was updated) and warn (a peer declared dead), a name conflict
	// at error, the join's outcome (info, or warn when no peer answered),
	// a warning at start when gossip is exposed off loopback without a
	// key, and drops and resyncs at debug. nil: discard.
	Logger *slog.Logger
	// Transport is an optional memberlist transport (tests pass a
	// fault-injecting one); nil: memberlist's NetTransport on Bind.
	Transport memberlist.Transport
	// Tune, when set, runs last on the memberlist config and may change
	// anything, including what New sets; tests use it to shorten timers.
	Tune func(*memberlist.Config)
	// RejoinInterval is how often the node re-resolves its seeds and joins
	// every seed address that is not a live member, which reconnects a
	// node that started alone or a mesh split for longer than memberlist
	// keeps gossiping to dead nodes. Jittered by ±20%. 0: 30 s; negative:
	// never. Costs one DNS lookup per named seed per interval, and a TCP
	// push/pull per missing address.
	RejoinInterval time.Duration
	// ResyncAfter: a peer heard from again after a silence this long, or
	// that memberlist reports alive again after it was dead, gets a
	// push/pull (snapshots both ways) at once, so what the silence lost
	// arrives without waiting for the key to change or for memberlist's
	// 30 s anti-entropy. The sender of deltas sends an empty heartbeat when
	// it has been idle (reconcile: every fourth tick), so silence means
	// loss. 0: 2.5 s; negative: never.
	ResyncAfter time.Duration
	// BeaconInterval is how often the node sends an empty packet (one small
	// datagram) to each peer memberlist declared dead, not left, in the
	// last five minutes. memberlist neither probes nor, once its broadcasts
	// are spent, gossips to a dead node, so after a partition heals both
	// sides may go on thinking the other dead until a push/pull or a
	// rejoin, tens of seconds later. A peer that hears a beacon after a
	// silence resyncs at once (ResyncAfter), which revives both views and
	// exchanges what the partition kept apart. 0: 200 ms; negative: never.
	BeaconInterval time.Duration
	// Clock drives the rejoin and beacon loops; nil: the real clock.
	Clock clock.Clock
	// OnNameConflict is called when memberlist reports another node at
	// another address under this node's own name that started before this
	// one (its incarnation is lower): this node is the newcomer that took a
	// name in use. It must not block. nil: the conflict is only logged.
	OnNameConflict func(otherIncarnation uint64)
	// Rand jitters the rejoin loop; nil: seeded from the incarnation. Used
	// only by the loop's goroutine.
	Rand *rand.Rand
}

// ErrConfig is wrapped by every Config.Validate error.
var ErrConfig = errors.New("gossip: invalid config")

// Validate returns an error listing every problem in c, each wrapping
// ErrConfig, or nil.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if c.Name == "" {
		bad("name is required")
	}
	if c.Bind != "" {
		if _, _, err := splitAddr(c.Bind, true); err != nil {
			bad("bind %q: %v (want \"ip:port\", port 0 for any)", c.Bind, err)
		}
	}
	if c.Advertise != "" {
		if _, _, err := splitAddr(c.Advertise, false); err != nil {
			bad("advertise %q: %v (want \"ip\" or \"ip:port\")", c.Advertise, err)
		}
	}
	for i, s := range c.Join {
		if strings.TrimSpace(s) == "" {
			bad("join[%d] is empty (want \"host:port\" or \"host\")", i)
		}
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		bad("secret key is %d bytes (want 16, 24 or 32)", len(c.SecretKey))
	}
	if len(c.Label) > memberlist.LabelMaxSize {
		bad("label is %d bytes (want at most %d)", len(c.Label), memberlist.LabelMaxSize)
	}
	return errors.Join(errs...)
}

// splitAddr parses "ip:port" (or "ip" when !needPort; port 0 then). The host
// must be an IP literal or empty.
func splitAddr(s string, needPort bool) (string, int, error) {
	host, port := s, "0"
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if needPort {
		return "", 0, err
	}
	if host != "" && net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("host %q is not an IP address", host)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q is not a number in 0–65535", port)
	}
	return host, int(n), nil
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
// push/pull states (the bytes Encode and Split produce), not memberlist's
// framing.
type Stats struct {
	BytesIn, BytesOut     uint64
	PacketsIn, PacketsOut uint64 // sync messages
	StatesIn, StatesOut   uint64 // push/pull states
	Dropped               uint64 // received messages that were undecodable, oversized or claimed this node's name
	SendErrors            uint64 // datagrams memberlist failed to send
	StatesSkipped         uint64 // snapshots not sent because they exceeded the push/pull limit
	Resyncs               uint64 // push/pulls started with a peer back from a silence or a death
}

// Node is one member of the gossip mesh. Its methods are safe for concurrent
// use.
type Node struct {
	name       string
	inc        uint64
	onConflict func(uint64)
	h          Handler
	log        *slog.Logger
	ml         *memberlist.Memberlist
	budget     int
	addr       string
	seeds      []string
	port       int // default port for seeds

	leaving atomic.Bool
	metaOn  []byte // meta while running
	metaOff []byte // meta while leaving

	bytesIn, bytesOut, packetsIn, packetsOut atomic.Uint64
	statesIn, statesOut, dropped, sendErrors atomic.Uint64
	statesSkipped, resyncs                   atomic.Uint64

	mu          sync.Mutex
	peers       map[string]*peerState
	gone        []goneEvent // NodeGone queue
	resync      []string    // names of peers to push/pull with
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

type peerState struct {
	addr     string
	state    string // "" until memberlist reports the member
	inc      uint64 // from meta
	pktInc   uint64 // highest incarnation seen in its packets
	leaving  bool
	changed  time.Time // when state last changed
	lastSync time.Time
	in, out  uint64
	resynced time.Time // last push/pull this node started with it
}

type goneEvent struct {
	name string
	inc  uint64
}

// delegate adapts Node to memberlist's delegate interfaces.
type delegate Node

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
)

// New creates a node, starts memberlist and joins the seeds. Memberlist is
// configured from DefaultLANConfig (false suspicion is worse than slow
// detection when every node fails open) with compression off,
// DeadNodeReclaimTime 1 s, HandoffQueueDepth 4096, UDPBufferSize MaxDatagram, the key and label, then
// Tune. A failed join is logged, never fatal: the node runs alone and the
// rejoin loop retries. h must be ready before New is called.
func New(cfg Config, h Handler) (*Node, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bind := cfg.Bind
	if bind == "" {
		bind = "0.0.0.0:7946"
	}
	bindHost, bindPort, _ := splitAddr(bind, true)
	if bindHost == "" {
		bindHost = "0.0.0.0"
	}
	inc := cfg.Incarnation
	if inc == 0 {
		inc = uint64(time.Now().UnixNano())
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		name: cfg.Name,
		inc:  inc, onConflict: cfg.OnNameConflict,
		h:       h,
		log:     lg.With("component", "gossip"),
		seeds:   slices.Clone(cfg.Join),
		metaOn:  encodeMeta(inc, false),
		metaOff: encodeMeta(inc, true),
		peers:   map[string]*peerState{},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	switch {
	case cfg.ResyncAfter == 0:
		n.resyncAfter = 2500 * time.Millisecond
	case cfg.ResyncAfter > 0:
		n.resyncAfter = cfg.ResyncAfter
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.BindAddr, mc.BindPort = bindHost, bindPort
	mc.AdvertisePort = bindPort
	if cfg.Advertise != "" {
		host, port, _ := splitAddr(cfg.Advertise, false)
		mc.AdvertiseAddr = host
		if port != 0 {
			mc.AdvertisePort = port
		}
	}
	mc.EnableCompression = false
	// A node declared dead may come back under its name at a new address
	// (a restarted pod) a second after its death; memberlist's default, 0,
	// refuses it ("conflicting address") until the dead entry is reaped,
	// about 30 s later.
	mc.DeadNodeReclaimTime = time.Second
	mc.HandoffQueueDepth = 4096
	mc.UDPBufferSize = MaxDatagram
	mc.SecretKey = slices.Clone(cfg.SecretKey)
	mc.Label = cfg.Label
	mc.Delegate = (*delegate)(n)
	mc.Events = (*delegate)(n)
	mc.Conflict = (*delegate)(n)
	mc.Transport = cfg.Transport
	if cfg.Logger != nil {
		mc.Logger = log.New(logWriter{cfg.Logger.With("component", "memberlist")}, "", 0)
	} else {
		mc.Logger = log.New(io.Discard, "", 0)
	}
	if cfg.Tune != nil {
		cfg.Tune(mc)
	}
	n.budget = Budget(mc)
	if n.budget < 64 {
		return nil, fmt.Errorf("%w: message budget of %d bytes is too small (label %d bytes)", ErrConfig, n.budget, len(mc.Label))
	}

	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip: start memberlist on %s: %w", bind, err)
	}
	n.ml = ml
	n.addr = ml.LocalNode().Address()
	n.port = mc.BindPort // memberlist sets it to the bound port when it was 0
	if len(mc.SecretKey) == 0 && mc.Keyring == nil {
		// With a transport of its own the bind address is not used: judge
		// by the address peers are told to reach.
		exposed := net.ParseIP(mc.BindAddr)
		if cfg.Transport != nil {
			exposed = ml.LocalNode().Addr
		}
		if exposed == nil || !exposed.IsLoopback() {
			n.log.Warn("gossip: listening off loopback without a secret key: anyone who reaches this address can join the mesh and inject counts; give a key (16, 24 or 32 bytes) on a network you do not fully trust",
				"bind", net.JoinHostPort(mc.BindAddr, strconv.Itoa(n.port)), "advertise", n.addr)
		}
	}

	n.wg.Add(1)
	go n.dispatch()

	if len(n.seeds) > 0 {
		wait := cfg.JoinTimeout
		if wait <= 0 {
			wait = 5 * time.Second
		}
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
					"reached", k, "err", oneLine(err), "retry_every", rejoinEvery(cfg.RejoinInterval).String())
			case err != nil:
				n.log.Info("gossip: joined", "seeds", n.seeds, "reached", k, "members", ml.NumMembers(), "unreached", oneLine(err))
			default:
				n.log.Info("gossip: joined", "seeds", n.seeds, "reached", k, "members", ml.NumMembers())
			}
		}()
		select {
		case <-joined:
		case <-time.After(wait):
			n.log.Warn("gossip: join still in progress; continuing", "seeds", n.seeds, "waited", wait)
		}
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	if cfg.BeaconInterval >= 0 {
		every := cfg.BeaconInterval
		if every == 0 {
			every = 200 * time.Millisecond
		}
		n.wg.Add(1)
		go n.beaconLoop(clk, every)
	}
	if cfg.RejoinInterval >= 0 && len(n.seeds) > 0 {
		every := rejoinEvery(cfg.RejoinInterval)
		rng := cfg.Rand
		if rng == nil {
			rng = rand.New(rand.NewPCG(inc, 0x6f626f6c))
		}
		n.wg.Add(1)
		go n.rejoinLoop(clk, rng, every)
	}
	return n, nil
}

// rejoinEvery returns the rejoin loop's interval for Config.RejoinInterval
// (0: 30 s; negative: never, returned as 0).
func rejoinEvery(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return 30 * time.Second
	case d < 0:
		return 0
	}
	return d
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
// are set to this node's (p is not modified). It does not wait for the
// network beyond handing datagrams to the kernel. It returns packet.ErrTooLarge
// from Split, or every send failure joined (each also counted in
// Stats.SendErrors); with no other member it sends nothing.
func (n *Node) Send(p *packet.Packet) error {
	if p == nil {
		return fmt.Errorf("%w: nil packet", packet.ErrInvalid)
	}
	if n.stopped() {
		return ErrShutdown
	}
	cp := *p
	cp.From, cp.Incarnation = n.name, n.inc
	msgs, err := packet.Split(&cp, n.budget)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range n.ml.Members() {
		if m.Name == n.name {
			continue
		}
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
		StatesSkipped: n.statesSkipped.Load(),
		Resyncs:       n.resyncs.Load(),
	}
}

// ErrShutdown is returned by Leave and Send after Shutdown.
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
	start := time.Now()
	n.leaving.Store(true)
	if err := n.ml.UpdateNode(timeout / 2); err != nil {
		n.log.Debug("gossip: leave: meta update not confirmed", "err", err)
	}
	rest := max(timeout-time.Since(start), time.Millisecond)
	if err := n.ml.Leave(rest); err != nil {
		return fmt.Errorf("gossip: leave: %w", err)
	}
	return nil
}

// Shutdown stops memberlist, its listeners and this package's goroutines,
// without announcing a leave (peers will declare the node dead; call Leave
// first for a graceful exit). It waits for Handler calls in progress, and
// none starts once it returns; a Handler method must therefore not call it.
// Calling it again returns nil.
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

// received records a packet or state of size bytes from p.From.
func (n *Node) received(p *packet.Packet, size int) {
	now := time.Now()
	n.mu.Lock()
	ps := n.peer(p.From)
	silent := !ps.lastSync.IsZero() && now.Sub(ps.lastSync) > n.resyncAfter
	if n.resyncAfter > 0 && (silent || ps.state == "dead") { // a dead peer speaking is back
		n.queueResyncLocked(p.From, ps, now)
	}
	ps.lastSync = now
	ps.in += uint64(size)
	ps.pktInc = max(ps.pktInc, p.Incarnation)
	n.mu.Unlock()
}

// queueResyncLocked asks the dispatcher for a push/pull with peer name, at
// most once per ResyncAfter (the caller holds mu).
func (n *Node) queueResyncLocked(name string, ps *peerState, now time.Time) {
	if n.resyncAfter <= 0 || now.Sub(ps.resynced) < n.resyncAfter {
		return
	}
	ps.resynced = now
	n.resync = append(n.resync, name)
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// pushPull exchanges snapshots with the named peers (memberlist's Join of
// a known member is one push/pull with it).
func (n *Node) pushPull(names []string) {
	for _, name := range names {
		n.mu.Lock()
		var addr string
		if ps := n.peers[name]; ps != nil {
			addr = ps.addr
		}
		n.mu.Unlock()
		if addr == "" || n.stopped() {
			continue
		}
		if _, err := n.ml.Join([]string{addr}); err != nil {
			n.log.Debug("gossip: resync failed", "node", name, "addr", addr, "err", err)
			continue
		}
		n.resyncs.Add(1)
		n.log.Debug("gossip: resynced", "node", name, "addr", addr)
	}
}

// dispatch delivers NodeGone events in order, and runs resyncs, until
// Shutdown.
func (n *Node) dispatch() {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case <-n.wake:
		}
		n.mu.Lock()
		evs := n.gone
		n.gone = nil
		rs := n.resync
		n.resync = nil
		n.mu.Unlock()
		if len(rs) > 0 {
			n.pushPull(rs)
		}
		for _, ev := range evs {
			if n.stopped() {
				return
			}
			n.mu.Lock()
			stale := false
			if ps := n.peers[ev.name]; ps != nil && ev.inc != 0 && ps.pktInc > ev.inc {
				stale = true
			}
			n.mu.Unlock()
			if stale {
				n.log.Debug("gossip: departure of an older incarnation ignored", "node", ev.name, "incarnation", ev.inc)
				continue
			}
			if !n.enter() {
				return
			}
			n.h.NodeGone(ev.name)
			n.exit()
		}
	}
}

// beaconLoop sends a beacon to the recently dead peers every interval
// until Shutdown.
func (n *Node) beaconLoop(clk clock.Clock, every time.Duration) {
	defer n.wg.Done()
	beacon, err := packet.Encode(&packet.Packet{From: n.name, Incarnation: n.inc})
	if err != nil {
		n.log.Error("gossip: beacon", "err", err)
		return
	}
	for {
		select {
		case <-n.done:
			return
		case <-clk.After(every):
		}
		n.beacon(beacon)
	}
}

// beacon sends b to every peer declared dead (not left) within
// goneRetention, and returns how many it sent to.
func (n *Node) beacon(b []byte) int {
	if n.stopped() {
		return 0
	}
	now := time.Now()
	var to []*memberlist.Node
	n.mu.Lock()
	for name, ps := range n.peers {
		if ps.state != "dead" || ps.leaving || now.Sub(ps.changed) > goneRetention || name == n.name {
			continue
		}
		host, port, err := net.SplitHostPort(ps.addr)
		if err != nil {
			continue
		}
		p, err := strconv.Atoi(port)
		ip := net.ParseIP(host)
		if err != nil || ip == nil {
			continue
		}
		to = append(to, &memberlist.Node{Name: name, Addr: ip, Port: uint16(p)})
	}
	n.mu.Unlock()
	for _, m := range to {
		if err := n.ml.SendBestEffort(m, b); err != nil {
			n.sendErrors.Add(1)
			continue
		}
		n.packetsOut.Add(1)
		n.bytesOut.Add(uint64(len(b)))
	}
	return len(to)
}

// rejoinLoop calls rejoin every interval (±20%) until Shutdown.
func (n *Node) rejoinLoop(clk clock.Clock, rng *rand.Rand, every time.Duration) {
	defer n.wg.Done()
	for {
		d := every - every/5 + time.Duration(rng.Int64N(int64(every)*2/5+1))
		select {
		case <-n.done:
			return
		case <-clk.After(d):
		}
		n.rejoin()
	}
}

// rejoin resolves the seeds and joins every resolved address that is not a
// live member (nor this node). It returns how many it joined. It is the
// rejoin loop's step.
func (n *Node) rejoin() int {
	if n.stopped() {
		return 0
	}
	live := map[string]bool{n.addr: true}
	for _, m := range n.ml.Members() {
		live[m.Address()] = true
	}
	var missing []string
	for _, a := range n.resolveSeeds() {
		if !live[a] {
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return 0
	}
	k, err := n.ml.Join(missing)
	if k > 0 {
		n.log.Info("gossip: rejoined", "addresses", missing, "reached", k, "members", n.ml.NumMembers())
	} else {
		n.log.Debug("gossip: rejoin found no peer", "addresses", missing, "err", oneLine(err))
	}
	return k
}

// resolveSeeds returns the seeds as "ip:port", names resolved (each to every
// address), unresolvable ones logged and left out.
func (n *Node) resolveSeeds() []string {
	var out []string
	for _, s := range n.seeds {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			host, port = s, strconv.Itoa(n.port)
		}
		if ip := net.ParseIP(host); ip != nil {
			out = append(out, net.JoinHostPort(ip.String(), port))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		cancel()
		if err != nil {
			n.log.Debug("gossip: seed does not resolve", "seed", s, "err", err)
			continue
		}
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip.IP.String(), port))
		}
	}
	return out
}

// Memberlist delegate.

func (d *delegate) node() *Node { return (*Node)(d) }

// NodeMeta returns the incarnation and the leaving flag.
func (d *delegate) NodeMeta(limit int) []byte {
	n := d.node()
	if n.leaving.Load() {
		return n.metaOff
	}
	return n.metaOn
}

// NotifyMsg decodes a sync message and hands it to the handler.
func (d *delegate) NotifyMsg(b []byte) {
	n := d.node()
	n.bytesIn.Add(uint64(len(b)))
	n.packetsIn.Add(1)
	if len(b) > MaxDatagram {
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped oversized message", "bytes", len(b))
		return
	}
	p, err := packet.Decode(b)
	if err != nil {
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped undecodable message", "bytes", len(b), "err", err)
		return
	}
	if p.From == n.name {
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped message claiming this node's name")
		return
	}
	if !n.enter() {
		return
	}
	defer n.exit()
	n.received(p, len(b))
	n.h.HandlePacket(p)
}

// GetBroadcasts returns nothing: sync goes by direct fan-out.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState returns the handler's snapshot for a push/pull.
func (d *delegate) LocalState(join bool) []byte {
	n := d.node()
	if !n.enter() {
		return nil
	}
	p := n.h.Snapshot()
	n.exit()
	if p == nil {
		p = &packet.Packet{}
	}
	cp := *p
	cp.From, cp.Incarnation, cp.Full = n.name, n.inc, true
	b, err := packet.Encode(&cp)
	if err != nil {
		n.log.Warn("gossip: snapshot not encoded", "err", err)
		return nil
	}
	if len(b) > maxState {
		n.statesSkipped.Add(1)
		n.log.Warn("gossip: snapshot too large for push/pull, not sent", "bytes", len(b), "limit", maxState)
		return nil
	}
	n.statesOut.Add(1)
	n.bytesOut.Add(uint64(len(b)))
	return b
}

// MergeRemoteState decodes a peer's push/pull state and hands it to the
// handler with Full set.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	n := d.node()
	if len(buf) == 0 {
		return
	}
	n.statesIn.Add(1)
	n.bytesIn.Add(uint64(len(buf)))
	p, err := packet.Decode(buf)
	if err != nil {
		n.dropped.Add(1)
		n.log.Debug("gossip: dropped undecodable state", "bytes", len(buf), "err", err)
		return
	}
	if p.From == n.name {
		n.dropped.Add(1)
		return
	}
	if !n.enter() {
		return
	}
	defer n.exit()
	p.Full = true
	n.received(p, len(buf))
	n.h.HandlePacket(p)
}

// NotifyJoin records a member that became alive (self included) and logs
// it: "peer joined" for a member new to this node, "peer back" for one
// alive again after it was dead or had left (a healed partition, a false
// death, a restart), "peer rejoined at a new address" when it came back
// elsewhere (a rescheduled pod). A member back is resynced with a
// push/pull: what it and this node did meanwhile was shipped to no one.
func (d *delegate) NotifyJoin(node *memberlist.Node) {
	n := d.node()
	n.mu.Lock()
	var was, oldAddr string
	var oldInc uint64
	if ps := n.peers[node.Name]; ps != nil {
		was, oldAddr, oldInc = ps.state, ps.addr, ps.inc
	}
	n.mu.Unlock()
	back := (was == "dead" || was == "left") && node.Name != n.name
	n.member(node, "alive")
	if node.Name == n.name {
		return
	}
	inc, _, _ := decodeMeta(node.Meta)
	switch {
	case !back:
		n.log.Info("gossip: peer joined", "node", node.Name, "addr", node.Address(), "incarnation", inc)
	case oldAddr != node.Address():
		n.log.Info("gossip: peer rejoined at a new address", "node", node.Name, "addr", node.Address(),
			"old_addr", oldAddr, "was", was, "restarted", inc != oldInc, "incarnation", inc)
	default:
		n.log.Info("gossip: peer back", "node", node.Name, "addr", node.Address(), "was", was,
			"restarted", inc != oldInc, "incarnation", inc)
	}
	if back {
		n.mu.Lock()
		n.queueResyncLocked(node.Name, n.peer(node.Name), time.Now())
		n.mu.Unlock()
	}
}

// NotifyUpdate records a member's new meta (its incarnation, its leaving
// flag) and logs it.
func (d *delegate) NotifyUpdate(node *memberlist.Node) {
	n := d.node()
	n.member(node, "")
	if node.Name == n.name {
		return
	}
	inc, leaving, _ := decodeMeta(node.Meta)
	n.log.Info("gossip: peer updated", "node", node.Name, "addr", node.Address(), "incarnation", inc, "leaving", leaving)
}

// NotifyLeave records a departure, logs it ("peer left" for a graceful
// leave, "peer declared dead" when it failed: stopped answering probes)
// and queues NodeGone. memberlist calls it with its member lock held, so
// it only queues.
func (d *delegate) NotifyLeave(node *memberlist.Node) {
	n := d.node()
	state := "dead"
	inc, leaving, _ := decodeMeta(node.Meta)
	if leaving {
		state = "left"
	}
	n.mu.Lock()
	ps := n.peers[node.Name]
	if ps != nil && ps.leaving {
		state = "left"
	}
	n.mu.Unlock()
	n.member(node, state)
	if node.Name == n.name {
		return
	}
	if state == "left" {
		n.log.Info("gossip: peer left", "node", node.Name, "addr", node.Address(), "incarnation", inc)
	} else {
		n.log.Warn("gossip: peer declared dead", "node", node.Name, "addr", node.Address(), "incarnation", inc)
	}
	n.mu.Lock()
	n.gone = append(n.gone, goneEvent{name: node.Name, inc: inc})
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// NotifyConflict logs a node at another address claiming a member's name;
// memberlist keeps the member it knows and ignores the other. Names must be
// unique in a mesh; a restarted node is let back at a new address once its
// old self has been dead for DeadNodeReclaimTime (1 s), so a conflict that
// does not pass is two nodes sharing a name.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	n := d.node()
	n.log.Warn("gossip: node name conflict: a node at another address claims a member's name; names must be unique in a mesh",
		"node", existing.Name, "addr", existing.Address(), "other_addr", other.Address())
	if existing.Name != n.name || n.onConflict == nil {
		return
	}
	// Both nodes of a conflict hear of it; the newer one (higher
	// incarnation, a later start) is the one that took a name in use. A
	// node restarted at a new address (a rescheduled pod) hears of its own
	// old self until memberlist declares it dead: that is no conflict, and
	// the old self no longer answers. So the other is reported only if its
	// address answers (memberlist's TCP port), checked off memberlist's
	// goroutine.
	inc, _, ok := decodeMeta(other.Meta)
	if !ok || inc >= n.inc {
		return
	}
	addr := other.Address()
	go func() {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			n.log.Info("gossip: the other node under this name does not answer: taken for this node's former self", "node", n.name, "other_addr", addr)
			return
		}
		c.Close()
		n.onConflict(inc)
	}()
}

// member records what memberlist reports about node; state "" keeps the
// current state. It also forgets members gone for longer than
// goneRetention.
func (n *Node) member(node *memberlist.Node, state string) {
	now := time.Now()
	inc, leaving, ok := decodeMeta(node.Meta)
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := n.peer(node.Name)
	ps.addr = node.Address()
	if ok {
		ps.inc = inc
		ps.leaving = leaving
	}
	if state != "" && state != ps.state {
		ps.state = state
		ps.changed = now
	}
	if state == "alive" && !leaving {
		ps.leaving = false
	}
	for name, q := range n.peers {
		gone := (q.state == "dead" || q.state == "left") && now.Sub(q.changed) > goneRetention
		stray := q.state == "" && now.Sub(q.lastSync) > goneRetention // sent packets, never a member
		if gone || stray {
			delete(n.peers, name)
		}
	}
}

// oneLine renders err (memberlist's multierror spans lines) on one line.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n\t* ", "; ")), " ")
}

// logWriter turns memberlist's log lines ("[LEVEL] memberlist: message")
// into debug records.
type logWriter struct{ l *slog.Logger }

func (w logWriter) Write(b []byte) (int, error) {
	msg := strings.TrimSpace(string(b))
	level := ""
	if strings.HasPrefix(msg, "[") {
		if i := strings.IndexByte(msg, ']'); i > 0 {
			level, msg = msg[1:i], strings.TrimSpace(msg[i+1:])
		}
	}
	msg = strings.TrimPrefix(msg, "memberlist: ")
	w.l.Debug(msg, "memberlist_level", level)
	return len(b), nil
}
