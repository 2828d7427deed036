package gossip

// The node's configuration: Config, its validation and its defaults. What
// memberlist is told is in profile.go.

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/internal/clock"
)

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
	// a higher one replaces a lower one's state. 0: the wall clock at New,
	// in unix ns.
	Incarnation uint64
	// Logger receives memberlist's own log at debug level and this
	// package's: membership events at info (a peer joined, left, came
	// back, was updated) and warn (a peer declared dead), a name conflict
	// at error, the join's outcome (info, or warn when no peer answered),
	// a warning at start when gossip is exposed off loopback without a
	// key, datagrams dropped on a full receive queue at warn (at most once
	// a minute), and other drops and resyncs at debug. nil: discard.
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
	// loss; in a mesh of more than 101 members that all stretch their
	// heartbeats the silence is ResyncAfter × Node.HeartbeatStretch. 0:
	// 2.5 s; negative: never.
	ResyncAfter time.Duration
	// BeaconInterval is how often the node sends an empty packet (one small
	// datagram) to each peer memberlist declared dead, not left, in the
	// last five minutes. memberlist neither probes nor, once its broadcasts
	// are spent, gossips to a dead node, so after a partition heals both
	// sides may go on thinking the other dead until a push/pull or a
	// rejoin, tens of seconds later. A peer that hears a beacon after a
	// silence resyncs at once (ResyncAfter), which revives both views and
	// exchanges what the partition kept apart. The same loop asks each
	// live member never heard from in ResyncAfter × the heartbeat stretch
	// since memberlist reported it for a push/pull (it most likely does
	// not know of this node, and ships its counts to the others only).
	// 0: 200 ms; negative: never (neither).
	BeaconInterval time.Duration
	// Clock is the node's own time: it drives the rejoin and beacon loops
	// and stamps what it hears (the silences ResyncAfter measures, the five
	// minutes a departed peer is kept). nil: the real clock. The waits on
	// memberlist's network (JoinTimeout, Leave's timeout) and the default
	// Incarnation read the wall clock whatever Clock is.
	Clock clock.Clock
	// OnNameConflict is called when memberlist reports another node at
	// another address under this node's own name that started before this
	// one (its incarnation is lower): this node is the newcomer that took a
	// name in use. It must not block. nil: the conflict is only logged.
	OnNameConflict func(otherIncarnation uint64)
	// Rand jitters the rejoin loop; nil: seeded from the incarnation. Used
	// only by the loop's goroutine.
	Rand *rand.Rand
	// ReceiveWorkers is how many goroutines decode received sync messages
	// and hand them to Handler.HandlePacket. memberlist delivers every
	// datagram on its one packet goroutine; the node only checks its size,
	// copies it and queues it for the worker its sender's name hashes to,
	// so one origin's messages are handled one at a time, in the order
	// memberlist delivered them, and different origins' in parallel. More
	// workers decode more in parallel; the merge behind the Handler may
	// still serialize them. 0: min(4, GOMAXPROCS at New); at most 256.
	ReceiveWorkers int
	// ReceiveQueue is how many datagrams may wait for each worker. A
	// datagram whose worker's queue is full is dropped, never waited for,
	// counted in Stats.QueueDrops and logged at warn (at most once a
	// minute); the receiver asks its origin for it again (see Node.Repairs), or
	// the sender's resends and resyncs repair it, as they repair any loss.
	// Full queues hold up to ReceiveWorkers × ReceiveQueue × MaxDatagram
	// bytes. 0: 1024; at most 65536.
	ReceiveQueue int
	// Unsequenced makes the node send unsequenced (packet.MsgSync) messages,
	// as releases before sequenced streams did, so that its reconcile
	// layer resends every change on its schedule instead of shipping it
	// once: for comparisons, and a way back should repair misbehave. The
	// node still follows and repairs its peers' numbered streams. Off, a
	// node numbers its messages whenever every live peer reads them.
	Unsequenced bool
	// NoOwners keeps the node out of owner mode: Aggregates reports false,
	// and the node advertises the delegate protocol max of a release that
	// does not aggregate, so its peers' Aggregates report false too while
	// it is live and the whole mesh sends every change to every member:
	// for comparisons, and a way back should owner mode misbehave. The
	// node still reads sums and places keys (Owners).
	NoOwners bool
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
	if c.ReceiveWorkers < 0 || c.ReceiveWorkers > maxReceiveWorkers {
		bad("receive workers %d (want 1 to %d, or 0 for min(%d, GOMAXPROCS))", c.ReceiveWorkers, maxReceiveWorkers, defaultReceiveWorkers)
	}
	if c.ReceiveQueue < 0 || c.ReceiveQueue > maxReceiveQueue {
		bad("receive queue %d (want 1 to %d datagrams per worker, or 0 for %d)", c.ReceiveQueue, maxReceiveQueue, defaultReceiveQueue)
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

// The defaults of Config's zero values.
const (
	defaultBind           = "0.0.0.0:7946"
	defaultJoinTimeout    = 5 * time.Second
	defaultRejoinInterval = 30 * time.Second
	defaultResyncAfter    = 2500 * time.Millisecond
	defaultBeaconInterval = 200 * time.Millisecond
	defaultReceiveWorkers = 4 // at most; fewer with fewer GOMAXPROCS
	defaultReceiveQueue   = 1024
	maxReceiveWorkers     = 256
	maxReceiveQueue       = 1 << 16
)

// settings is what a node runs with: a valid Config with its defaults
// applied. A zero interval means never.
type settings struct {
	inc         uint64
	joinTimeout time.Duration
	rejoinEvery time.Duration // 0: no rejoin loop
	resyncAfter time.Duration // 0: no resync
	beaconEvery time.Duration // 0: no beacon loop
	workers     int           // receive workers
	queue       int           // datagrams per receive worker
	clk         clock.Clock
	log         *slog.Logger // this package's records, component=gossip
	rng         *rand.Rand   // the rejoin loop's jitter
}

// settings returns c's settings, wall being the instant a zero Incarnation
// is taken from. c must be valid (Validate).
func (c Config) settings(wall time.Time) settings {
	s := settings{
		inc:         c.Incarnation,
		joinTimeout: c.JoinTimeout,
		rejoinEvery: rejoinEvery(c.RejoinInterval),
		resyncAfter: orDefault(c.ResyncAfter, defaultResyncAfter),
		beaconEvery: orDefault(c.BeaconInterval, defaultBeaconInterval),
		workers:     c.ReceiveWorkers,
		queue:       c.ReceiveQueue,
		clk:         c.Clock,
		log:         c.Logger,
		rng:         c.Rand,
	}
	if s.inc == 0 {
		s.inc = uint64(wall.UnixNano())
	}
	if s.joinTimeout <= 0 {
		s.joinTimeout = defaultJoinTimeout
	}
	if len(c.Join) == 0 {
		s.rejoinEvery = 0 // nothing to rejoin
	}
	if s.workers == 0 {
		s.workers = min(defaultReceiveWorkers, runtime.GOMAXPROCS(0))
	}
	if s.queue == 0 {
		s.queue = defaultReceiveQueue
	}
	if s.clk == nil {
		s.clk = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "gossip")
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(s.inc, 0x6f626f6c))
	}
	return s
}

// bind returns the host and port to bind: Bind's, "0.0.0.0:7946" when it is
// empty, "0.0.0.0" when its host is. c must be valid (Validate).
func (c Config) bind() (host string, port int) {
	b := c.Bind
	if b == "" {
		b = defaultBind
	}
	host, port, _ = splitAddr(b, true)
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port
}

// rejoinEvery returns the rejoin loop's interval for Config.RejoinInterval
// (0: 30 s; negative: never, returned as 0).
func rejoinEvery(d time.Duration) time.Duration {
	return orDefault(d, defaultRejoinInterval)
}

// orDefault returns d, def when d is 0, and 0 (never) when d is negative.
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}
