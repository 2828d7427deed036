package netguard

import (
	"net"
	"net/netip"
)

// source.go: one client's share of a listener's cap.

// PerSourceOf is the share of a listener's cap of limit connections that one
// client may hold: a quarter, at least 1. A client is a remote address off
// loopback (an IPv6 address's /64, which one host commonly holds whole);
// clients on loopback (every process of the host, or of the pod, shares
// 127.0.0.1) are not told apart and share the whole cap.
func PerSourceOf(limit int) int { return max(1, limit/4) }

// PerSource sets the share of the cap one client off loopback may hold
// (0: none), and returns l. Set by Guard for TCP listeners (PerSourceOf).
func (l *Listener) PerSource(n int) *Listener {
	l.perSource = n
	return l
}

// takeSource counts c against its client's share and reports whether the
// share had room; src is invalid when c counts against none (loopback, a
// Unix socket, or no share).
func (l *Listener) takeSource(c net.Conn) (src netip.Addr, ok bool) {
	if l.perSource <= 0 {
		return netip.Addr{}, true
	}
	ta, isTCP := c.RemoteAddr().(*net.TCPAddr)
	if !isTCP {
		return netip.Addr{}, true
	}
	src = ta.AddrPort().Addr().Unmap()
	if src.IsLoopback() {
		return netip.Addr{}, true
	}
	if src.Is6() {
		src = netip.PrefixFrom(src, 64).Masked().Addr()
	}
	l.srcMu.Lock()
	defer l.srcMu.Unlock()
	if l.bySource[src] >= l.perSource {
		return netip.Addr{}, false
	}
	if l.bySource == nil {
		l.bySource = map[netip.Addr]int{}
	}
	l.bySource[src]++
	return src, true
}

// dropSource gives back a connection's place in src's share.
func (l *Listener) dropSource(src netip.Addr) {
	if !src.IsValid() {
		return
	}
	l.srcMu.Lock()
	defer l.srcMu.Unlock()
	if l.bySource[src] <= 1 {
		delete(l.bySource, src)
	} else {
		l.bySource[src]--
	}
}
