package gossip

// The memberlist side of a node: the profile New starts memberlist with,
// the datagram budget it leaves for sync messages, and memberlist's log.

import (
	"io"
	"log"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// MaxDatagram is the most bytes one sync datagram takes on the wire (the UDP
// payload), memberlist's framing, the label header and encryption included.
// It is also memberlist's UDPBufferSize here, so memberlist's own gossip
// packets stay within it too. With IPv4/IPv6 and UDP headers (28/48 bytes) a
// datagram stays under a 1400-byte path MTU, leaving room for overlay
// network encapsulation (VXLAN: 50 bytes) on a 1500-byte link.
const MaxDatagram = 1350

// Budget returns the largest sync message (packet.Encode or packet.Split
// output) that fits
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

// deadNodeReclaim is memberlist's DeadNodeReclaimTime here: a node declared
// dead may come back under its name at a new address (a restarted pod) this
// long after its death; memberlist's default, 0, refuses it ("conflicting
// address") until the dead entry is reaped, about 30 s later.
const deadNodeReclaim = time.Second

// handoffQueueDepth is memberlist's HandoffQueueDepth here: how many
// received messages may wait for its handler goroutine before it drops
// them (its default is 1024), logging at warn in its own log (debug in
// ours). That goroutine spends well under a microsecond on a sync message
// (NotifyMsg only queues it for a receive worker), so the queue drains as
// fast as datagrams arrive.
const handoffQueueDepth = 4096

// profile returns the memberlist configuration a node with config c starts
// from: DefaultLANConfig (false suspicion is worse than slow detection when
// every node fails open) with c's name, bind and advertise addresses, key
// and label, compression off, DeadNodeReclaimTime 1 s, HandoffQueueDepth
// 4096, UDPBufferSize MaxDatagram, c's transport and memberlist's log at
// debug level on c's logger (discarded without one). It leaves the
// delegates unset and does not run c.Tune: New does both. c must be valid
// (Validate). It starts nothing.
func profile(c Config) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.Name
	mc.BindAddr, mc.BindPort = c.bind()
	mc.AdvertisePort = mc.BindPort
	if c.Advertise != "" {
		host, port, _ := splitAddr(c.Advertise, false)
		mc.AdvertiseAddr = host
		if port != 0 {
			mc.AdvertisePort = port
		}
	}
	mc.EnableCompression = false
	// The delegate protocol's range says what this build reads: version 1
	// reads sequenced messages and answers Requests (repair.go), version 2
	// also reads sums and places keys on the ring (route.go). A node
	// speaks version 0 (what every release accepts), so memberlist's
	// version check lets old and new nodes share a mesh; a sender numbers
	// its messages only while every live peer's max is 1 or more, and
	// the mesh runs in owner mode only while every live member's is 2 or
	// more, numbers its messages to one member only while every live
	// member's is 3 or more, and stretches its idle heartbeats in a large
	// mesh only while every live member's is 4 or more (version 4 reads a
	// longer silence as normal there); a push/pull state passes on what
	// a node holds for other origins only while every live peer's is 5
	// or more (it reads a mesh state), and a join's state carries the
	// owners' sums a node holds only while every live peer's is 6 or more
	// (it reads a state's sums). A NoOwners node advertises 1.
	mc.DelegateProtocolMin = 0
	mc.DelegateProtocolVersion = 0
	mc.DelegateProtocolMax = sumsProtocol
	if c.NoOwners {
		mc.DelegateProtocolMax = repairProtocol
	}
	mc.DeadNodeReclaimTime = deadNodeReclaim
	mc.HandoffQueueDepth = handoffQueueDepth
	mc.UDPBufferSize = MaxDatagram
	mc.SecretKey = slices.Clone(c.SecretKey)
	mc.Label = c.Label
	mc.Transport = c.Transport
	if c.Logger != nil {
		mc.Logger = log.New(logWriter{c.Logger.With("component", "memberlist")}, "", 0)
	} else {
		mc.Logger = log.New(io.Discard, "", 0)
	}
	return mc
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
