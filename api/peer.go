package api

import (
	"net"
	"strconv"
	"syscall"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/netguard"
)

// peer.go tells clients apart, for an adaptive resource's client_share: on
// the Unix socket a client is the process at the other end, as the kernel
// reports it (SO_PEERCRED: nothing a client sends can change it); on TCP it
// is the remote address (so on the loopback listener every local process is
// one client). "" when neither can be told.

// clientOf returns the identity of ctx's client.
func clientOf(ctx *fasthttp.RequestCtx) string {
	switch c := netguard.Unwrap(ctx.Conn()).(type) {
	case *net.UnixConn:
		return peerProcess(c)
	case nil:
		return ""
	}
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		return "ip:" + a.IP.String()
	}
	return ""
}

// peerProcess returns "pid:N" for the process at the other end of a Unix
// socket, "" when the kernel does not say.
func peerProcess(c *net.UnixConn) string {
	if cred := peerCred(c); cred != nil {
		return "pid:" + strconv.Itoa(int(cred.Pid))
	}
	return ""
}

// peerCred returns the credentials of the process at the other end of a
// Unix socket, as the kernel reports them, or nil.
func peerCred(c *net.UnixConn) *syscall.Ucred {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return nil
	}
	return cred
}
