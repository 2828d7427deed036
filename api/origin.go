package api

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire"
)

// origin.go keeps browsers on the same host out of the API. A page from any
// site, open in a browser on the agent's host, can make the browser send
// requests to 127.0.0.1:7070: a form or a no-cors fetch with a text/plain
// body needs no permission (no CORS preflight), and after DNS rebinding
// (evil.example resolving to 127.0.0.1) the page can even read the replies,
// its own origin being evil.example. Three checks, made before any handler
// runs, refuse what a browser sends on a foreign page's behalf:
//
//   - Host (TCP listeners): the request must name the listener: a loopback
//     name (localhost, *.localhost) or address (127.0.0.0/8, ::1), or the
//     address the connection reached (a public listener's own IP). Any port
//     is accepted (a port forward changes it). On a public listener a
//     request that carries the bearer token may name the agent by any name
//     (a Service's DNS name): the token, which no foreign page has, already
//     proves the caller. A request with no Host is accepted (HTTP/1.0
//     clients; a browser always sends one). Else 403 forbidden.
//   - Origin and Sec-Fetch-Site (TCP listeners): a browser sends Origin on
//     every cross-origin request but a GET, and Sec-Fetch-Site on every
//     request; a request may carry neither (any client that is not a
//     browser), an Origin that is the agent's own page (http:// or https://
//     and the request's Host), and Sec-Fetch-Site same-origin or none (the
//     user typed the address). Else 403 forbidden. The dashboard's own
//     files (GET / and /ui/...) are exempt from this one: they are static,
//     and a link from another site to the dashboard must open it.
//   - Content-Type (every listener): a request with a body must say
//     application/json or application/msgpack (or application/x-msgpack),
//     parameters allowed; anything else, none included, is 415
//     unsupported_media_type. The types a page may send without a preflight
//     (text/plain, forms, none with a binary body) are thus never read.
//
// The Unix socket and in-memory listeners are not checked for Host and
// Origin: no browser reaches them, and the proxies that ask GET /v1/check
// through the socket may pass on their client's Origin.
//
// None of it allocates: the decisions keep 0 allocations.

// Error codes of this file (docs/api.md).
const (
	codeForbidden            = "forbidden"
	codeUnsupportedMediaType = "unsupported_media_type"
)

// allowedCaller reports whether ctx's request may be served as far as
// Host, Origin and Sec-Fetch-Site go (see above); when not, it writes the
// 403 forbidden reply. authed says the request carried the bearer token.
func allowedCaller(ctx *fasthttp.RequestCtx, authed bool) bool {
	local, ok := ctx.LocalAddr().(*net.TCPAddr)
	if !ok {
		return true // the socket, or an in-memory listener
	}
	host := ctx.Request.Header.Host()
	if len(host) > 0 && !ownHost(host, local, authed && !local.IP.IsLoopback()) {
		writeError(ctx, fasthttp.StatusForbidden, codeForbidden,
			fmt.Sprintf("Host %q does not name this listener: use a loopback name or address (localhost, 127.0.0.1) or the address the agent listens on", wire.Snippet(host)))
		return false
	}
	if dashboardPath(ctx.Path()) && ctx.IsGet() {
		return true
	}
	if o := ctx.Request.Header.PeekCanonical(hdrOrigin); len(o) > 0 && !sameOrigin(o, host) {
		writeError(ctx, fasthttp.StatusForbidden, codeForbidden,
			fmt.Sprintf("Origin %q is not this agent's page: a page of another site may not call the API", wire.Snippet(o)))
		return false
	}
	if sf := ctx.Request.Header.PeekCanonical(hdrSecFetchSite); len(sf) > 0 && string(sf) != "same-origin" && string(sf) != "none" {
		writeError(ctx, fasthttp.StatusForbidden, codeForbidden,
			fmt.Sprintf("Sec-Fetch-Site %q: a page of another site may not call the API", wire.Snippet(sf)))
		return false
	}
	return true
}

// The header names as fasthttp stores them, so that looking them up costs
// no normalization.
var (
	hdrOrigin       = []byte("Origin")
	hdrSecFetchSite = []byte("Sec-Fetch-Site")
)

// ownHost reports whether host, a Host header (name or address, with or
// without a port), names a listener whose local address is local: a
// loopback name or address, or local's IP; with anyName, any host.
func ownHost(host []byte, local *net.TCPAddr, anyName bool) bool {
	name := hostName(host)
	if name == nil {
		return false
	}
	if loopbackName(name) {
		return true
	}
	if ip, ok := parseIP(name); ok {
		return ip.IsLoopback() || ip == addrOf(local.IP)
	}
	return anyName && validName(name)
}

// hostName returns the name or address of host without its port (and, for
// an IPv6 address, without its brackets); nil when host is malformed.
func hostName(host []byte) []byte {
	if host[0] == '[' {
		end := bytes.IndexByte(host, ']')
		if end < 0 || (end+1 < len(host) && (host[end+1] != ':' || !digits(host[end+2:]))) {
			return nil
		}
		return host[1:end]
	}
	if i := bytes.LastIndexByte(host, ':'); i >= 0 {
		if !digits(host[i+1:]) {
			return nil
		}
		host = host[:i]
	}
	if len(host) == 0 {
		return nil
	}
	return host
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) <= 5
}

// loopbackName reports whether name is localhost or a name under it
// (RFC 6761: they resolve to loopback, and browsers resolve them so
// themselves, never through DNS), in any case, with or without a final dot.
func loopbackName(name []byte) bool {
	name = bytes.TrimSuffix(name, []byte("."))
	const lh = "localhost"
	if len(name) < len(lh) || !equalFoldASCII(name[len(name)-len(lh):], lh) {
		return false
	}
	return len(name) == len(lh) || name[len(name)-len(lh)-1] == '.'
}

// validName reports whether name is made of the characters of a DNS name.
func validName(name []byte) bool {
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// parseIP parses an IPv4 or IPv6 address (no zone); an IPv4 address (the
// common Host) without allocating.
func parseIP(b []byte) (netip.Addr, bool) {
	if bytes.IndexByte(b, ':') < 0 {
		return parseIPv4(b)
	}
	ip, err := netip.ParseAddr(string(b))
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// parseIPv4 parses a dotted-quad IPv4 address, four decimal numbers up to
// 255 without leading zeros.
func parseIPv4(b []byte) (netip.Addr, bool) {
	var a [4]byte
	for i := range a {
		if i > 0 {
			if len(b) == 0 || b[0] != '.' {
				return netip.Addr{}, false
			}
			b = b[1:]
		}
		n, j := 0, 0
		for ; j < len(b) && j < 4 && '0' <= b[j] && b[j] <= '9'; j++ {
			n = n*10 + int(b[j]-'0')
		}
		if j == 0 || j > 3 || n > 255 || (j > 1 && b[0] == '0') {
			return netip.Addr{}, false
		}
		a[i], b = byte(n), b[j:]
	}
	return netip.AddrFrom4(a), len(b) == 0
}

// addrOf returns ip as a netip.Addr (an IPv4-mapped address unmapped).
func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// sameOrigin reports whether origin, an Origin header, is the agent's own
// page as reached through host: http://HOST or https://HOST (a proxy
// terminating TLS in front), the same host and port, in any case.
func sameOrigin(origin, host []byte) bool {
	if len(host) == 0 {
		return false
	}
	var rest []byte
	switch {
	case len(origin) > len("http://") && equalFoldASCII(origin[:len("http://")], "http://"):
		rest = origin[len("http://"):]
	case len(origin) > len("https://") && equalFoldASCII(origin[:len("https://")], "https://"):
		rest = origin[len("https://"):]
	default:
		return false // "null" (a sandboxed or file page), another scheme
	}
	return bytes.EqualFold(rest, host)
}

// bodyTypeAllowed reports whether ctx's request may be decoded as far as
// its Content-Type goes: it has no body, or its body is JSON or MessagePack
// by its Content-Type; when not, it writes the 415 unsupported_media_type
// reply.
func bodyTypeAllowed(ctx *fasthttp.RequestCtx) bool {
	if len(ctx.Request.Body()) == 0 {
		return true
	}
	ct := ctx.Request.Header.ContentType()
	if isJSONType(ct) || isMsgpackType(ct) {
		return true
	}
	msg := "a request body needs Content-Type: application/json or application/msgpack; it has none"
	if len(ct) > 0 {
		msg = fmt.Sprintf("Content-Type %q: a request body must be application/json or application/msgpack", wire.Snippet(ct))
	}
	writeError(ctx, fasthttp.StatusUnsupportedMediaType, codeUnsupportedMediaType, msg)
	return false
}

// isJSONType reports whether the media type mt (parameters allowed) is
// application/json, in any case.
func isJSONType(mt []byte) bool {
	if i := bytes.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	return equalFoldASCII(bytes.TrimSpace(mt), contentTypeJSON)
}
