package gossiptest

import (
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// FaultNet is an in-process network of fault-injecting transports that share
// one policy: packet loss, a fixed packet delay and partitions. Tests give
// each node a transport from the same FaultNet (Listen, or Wrap) and steer
// faults for the whole mesh from it. The zero value is not usable; use
// NewFaultNet. Safe for concurrent use.
type FaultNet struct {
	mu    sync.Mutex
	rng   *rand.Rand
	drop  float64
	delay time.Duration
	side  map[string]bool // Partition's set; nil when healed
	ts    []*FaultTransport
}

// NewFaultNet returns a network with no faults.
func NewFaultNet() *FaultNet { return &FaultNet{} }

// SetDrop makes every datagram sent from now on lost with probability p
// (0: none, 1: all), drawing from rng (nil: a fixed seed). TCP streams are
// not affected.
func (f *FaultNet) SetDrop(p float64, rng *rand.Rand) {
	if rng == nil {
		rng = rand.New(rand.NewPCG(1, 2))
	}
	f.mu.Lock()
	f.drop, f.rng = p, rng
	f.mu.Unlock()
}

// SetDelay delays every datagram sent from now on by d (0: none). TCP
// streams are not delayed.
func (f *FaultNet) SetDelay(d time.Duration) {
	f.mu.Lock()
	f.delay = d
	f.mu.Unlock()
}

// Partition cuts the transports advertising addrs ("host:port") off from
// all others, both ways: datagrams between the two sides are lost, TCP dials
// across fail and streams already open across fail their next read or write.
// Each side still talks within itself. It replaces any earlier partition.
func (f *FaultNet) Partition(addrs ...string) {
	side := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		side[a] = true
	}
	f.mu.Lock()
	f.side = side
	f.mu.Unlock()
}

// Heal ends the partition.
func (f *FaultNet) Heal() {
	f.mu.Lock()
	f.side = nil
	f.mu.Unlock()
}

// cut reports whether traffic between a and b crosses the partition.
func (f *FaultNet) cut(a, b string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.side != nil && f.side[a] != f.side[b]
}

// fate decides a datagram's loss and delay.
func (f *FaultNet) fate() (lost bool, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.drop > 0 && f.rng.Float64() < f.drop {
		return true, 0
	}
	return false, f.delay
}

// Stats returns the counters summed over the network's transports, MaxSize
// being the largest datagram any of them sent.
func (f *FaultNet) Stats() FaultStats {
	f.mu.Lock()
	ts := append([]*FaultTransport(nil), f.ts...)
	f.mu.Unlock()
	var s FaultStats
	for _, t := range ts {
		s = s.add(t.Stats())
	}
	return s
}

// Wrap returns a transport over inner that obeys f. The transport learns its
// own address when memberlist asks it (FinalAdvertiseAddr).
func (f *FaultNet) Wrap(inner memberlist.Transport) *FaultTransport {
	t := &FaultTransport{
		net:      f,
		inner:    inner,
		packets:  make(chan *memberlist.Packet),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	t.nat, _ = inner.(memberlist.NodeAwareTransport)
	f.mu.Lock()
	f.ts = append(f.ts, t)
	f.mu.Unlock()
	t.wg.Add(1)
	go t.receive()
	return t
}

// Listen returns a transport of f over a new memberlist NetTransport bound
// to a free port on 127.0.0.1 (UDP and TCP on the same port).
func (f *FaultNet) Listen() (*FaultTransport, error) {
	var err error
	for range 10 { // the UDP port may be taken between picking and binding
		var nt *memberlist.NetTransport
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{"127.0.0.1"},
			BindPort:  0,
			Logger:    log.New(io.Discard, "", 0),
		})
		if err == nil {
			t := f.Wrap(nt)
			t.self.Store(net.JoinHostPort("127.0.0.1", strconv.Itoa(nt.GetAutoBindPort())))
			return t, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, fmt.Errorf("gossiptest: fault transport on 127.0.0.1: %w", err)
}

// NewFaultTransport returns a transport over inner with a FaultNet of its
// own (reach it with Net); give several nodes transports of one FaultNet
// (FaultNet.Wrap) to steer them together.
func NewFaultTransport(inner memberlist.Transport) *FaultTransport {
	return NewFaultNet().Wrap(inner)
}

// FaultStats counts a transport's datagrams and streams.
type FaultStats struct {
	Datagrams  uint64 // datagrams memberlist asked to send (lost ones included)
	Bytes      uint64 // their bytes
	MaxSize    int    // the largest of them, in bytes
	Dropped    uint64 // lost to SetDrop
	Delayed    uint64 // delayed by SetDelay
	CutOut     uint64 // sent datagrams lost to a partition
	CutIn      uint64 // received datagrams lost to a partition
	Received   uint64 // datagrams handed to memberlist
	StreamsCut uint64 // dials refused and open streams broken by a partition
}

func (s FaultStats) add(o FaultStats) FaultStats {
	s.Datagrams += o.Datagrams
	s.Bytes += o.Bytes
	s.MaxSize = max(s.MaxSize, o.MaxSize)
	s.Dropped += o.Dropped
	s.Delayed += o.Delayed
	s.CutOut += o.CutOut
	s.CutIn += o.CutIn
	s.Received += o.Received
	s.StreamsCut += o.StreamsCut
	return s
}

// FaultTransport is a memberlist transport that injects its FaultNet's
// faults into an inner transport. Safe for concurrent use.
type FaultTransport struct {
	net   *FaultNet
	inner memberlist.Transport
	nat   memberlist.NodeAwareTransport // inner, when it is node-aware
	self  atomic.Value                  // string: the advertised "host:port"

	packets  chan *memberlist.Packet
	stopping chan struct{} // closed first by Shutdown: stop forwarding
	done     chan struct{} // closed once the inner transport is down
	once     sync.Once
	closed   atomic.Bool
	wg       sync.WaitGroup

	datagrams, bytes, dropped, delayed  atomic.Uint64
	cutOut, cutIn, received, streamsCut atomic.Uint64
	maxSize                             atomic.Int64
}

var _ memberlist.NodeAwareTransport = (*FaultTransport)(nil)

// Net returns the FaultNet whose policy t obeys.
func (t *FaultTransport) Net() *FaultNet { return t.net }

// Addr returns the transport's advertised "host:port", or "" before
// memberlist has asked for it (Listen's transports know it at once).
func (t *FaultTransport) Addr() string {
	s, _ := t.self.Load().(string)
	return s
}

// SetDrop is t.Net().SetDrop.
func (t *FaultTransport) SetDrop(p float64, rng *rand.Rand) { t.net.SetDrop(p, rng) }

// SetDelay is t.Net().SetDelay.
func (t *FaultTransport) SetDelay(d time.Duration) { t.net.SetDelay(d) }

// Partition is t.Net().Partition.
func (t *FaultTransport) Partition(addrs ...string) { t.net.Partition(addrs...) }

// Heal is t.Net().Heal.
func (t *FaultTransport) Heal() { t.net.Heal() }

// Stats returns t's counters.
func (t *FaultTransport) Stats() FaultStats {
	return FaultStats{
		Datagrams: t.datagrams.Load(), Bytes: t.bytes.Load(), MaxSize: int(t.maxSize.Load()),
		Dropped: t.dropped.Load(), Delayed: t.delayed.Load(),
		CutOut: t.cutOut.Load(), CutIn: t.cutIn.Load(), Received: t.received.Load(),
		StreamsCut: t.streamsCut.Load(),
	}
}

// FinalAdvertiseAddr asks the inner transport and remembers the answer as
// t's address.
func (t *FaultTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	a, p, err := t.inner.FinalAdvertiseAddr(ip, port)
	if err == nil {
		t.self.Store(net.JoinHostPort(a.String(), strconv.Itoa(p)))
	}
	return a, p, err
}

// WriteTo is WriteToAddress without a node name.
func (t *FaultTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress counts the datagram, then loses, delays or sends it. A lost
// datagram is not an error, as on a real network.
func (t *FaultTransport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	now := time.Now()
	t.datagrams.Add(1)
	t.bytes.Add(uint64(len(b)))
	for {
		m := t.maxSize.Load()
		if int64(len(b)) <= m || t.maxSize.CompareAndSwap(m, int64(len(b))) {
			break
		}
	}
	if t.net.cut(t.Addr(), addr.Addr) {
		t.cutOut.Add(1)
		return now, nil
	}
	lost, delay := t.net.fate()
	if lost {
		t.dropped.Add(1)
		return now, nil
	}
	if delay > 0 {
		t.delayed.Add(1)
		buf := append([]byte(nil), b...)
		time.AfterFunc(delay, func() {
			if !t.closed.Load() && !t.net.cut(t.Addr(), addr.Addr) {
				_, _ = t.write(buf, addr)
			}
		})
		return now, nil
	}
	return t.write(b, addr)
}

func (t *FaultTransport) write(b []byte, addr memberlist.Address) (time.Time, error) {
	if t.nat != nil {
		return t.nat.WriteToAddress(b, addr)
	}
	return t.inner.WriteTo(b, addr.Addr)
}

// PacketCh returns the received datagrams that crossed no partition.
func (t *FaultTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *FaultTransport) receive() {
	defer t.wg.Done()
	in := t.inner.PacketCh()
	for {
		select {
		case <-t.done:
			return
		case p := <-in:
			if p == nil || t.closed.Load() {
				continue // draining while the inner transport shuts down
			}
			if p.From != nil && t.net.cut(t.Addr(), p.From.String()) {
				t.cutIn.Add(1)
				continue
			}
			t.received.Add(1)
			select {
			case t.packets <- p:
			case <-t.stopping:
			}
		}
	}
}

// DialTimeout is DialAddressTimeout without a node name.
func (t *FaultTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// errPartitioned is what a dial or stream across a partition returns.
var errPartitioned = errors.New("gossiptest: partitioned")

// DialAddressTimeout dials through the inner transport unless addr is across
// a partition; the stream breaks if a partition later separates the ends.
func (t *FaultTransport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.net.cut(t.Addr(), addr.Addr) {
		t.streamsCut.Add(1)
		return nil, fmt.Errorf("dial %s: %w", addr.Addr, errPartitioned)
	}
	var c net.Conn
	var err error
	if t.nat != nil {
		c, err = t.nat.DialAddressTimeout(addr, timeout)
	} else {
		c, err = t.inner.DialTimeout(addr.Addr, timeout)
	}
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: c, t: t, peer: addr.Addr}, nil
}

// StreamCh returns the inner transport's incoming streams (the dialing side
// enforces partitions).
func (t *FaultTransport) StreamCh() <-chan net.Conn { return t.inner.StreamCh() }

// Shutdown stops t and the inner transport. Delayed datagrams not yet sent
// are discarded.
func (t *FaultTransport) Shutdown() error {
	var err error
	t.once.Do(func() {
		// Keep draining the inner transport's packets while it shuts
		// down: its listener may be blocked handing one over.
		t.closed.Store(true)
		close(t.stopping)
		err = t.inner.Shutdown()
		close(t.done)
		t.wg.Wait()
	})
	return err
}

// faultConn is a dialed stream that fails once a partition separates its
// ends.
type faultConn struct {
	net.Conn
	t    *FaultTransport
	peer string
}

func (c *faultConn) check() error {
	if c.t.net.cut(c.t.Addr(), c.peer) {
		c.t.streamsCut.Add(1)
		_ = c.Conn.Close()
		return fmt.Errorf("stream to %s: %w", c.peer, errPartitioned)
	}
	return nil
}

func (c *faultConn) Read(b []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *faultConn) Write(b []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
