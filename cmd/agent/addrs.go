package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/go-sockaddr"
)

// addrs.go: the checks of the values the settings name: the listen and
// gossip addresses (loopback or not, the status listener, a name that
// resolves) and a header's name.

// checkHTTP checks an HTTP listen address: host:port with a numeric port,
// and, unless public, a loopback host: an IP literal must be loopback and
// the host must not be empty (every interface). A name other than
// localhost is left to checkHTTPName, which resolves it.
func checkHTTP(addr string, public bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port such as 127.0.0.1:7070, or off")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want a number in 0–65535 (0 picks a free port)", port)
	}
	if public {
		return nil
	}
	if host == "" {
		return errors.New("an empty host is every interface, not a loopback address; give 127.0.0.1, or add --http-public (OBOL_HTTP_PUBLIC=true)")
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() {
		return errors.New("not a loopback address; serving on it needs --http-public (OBOL_HTTP_PUBLIC=true)")
	}
	return nil
}

// checkStatus checks the status listener's address: host:port with a
// numeric port; any host (empty: every interface), for it serves only
// the probes and the metrics.
func checkStatus(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port such as :7071 (every interface) or 10.0.0.5:7071, or off")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want a number in 0–65535 (0 picks a free port)", port)
	}
	return nil
}

// checkHTTPName resolves the host of s.http when it is a name other than
// localhost and the address must be loopback, and refuses one that
// resolves to another address or not at all.
func checkHTTPName(s settings, lookup func(host string) ([]net.IP, error)) error {
	if s.http == "" || s.httpPublic {
		return nil
	}
	host, _, err := net.SplitHostPort(s.http)
	if err != nil || host == "" || host == "localhost" || net.ParseIP(host) != nil {
		return nil // checked by checkHTTP
	}
	ips, err := lookup(host)
	if err != nil {
		return fmt.Errorf("%v: cannot resolve %s: %w", s.httpFrom, host, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("%v: %s resolves to %s, not a loopback address; serving on it needs --http-public (OBOL_HTTP_PUBLIC=true)", s.httpFrom, host, ip)
		}
	}
	return nil
}

// loopbackBind reports whether a gossip bind address is on loopback only.
func loopbackBind(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

// privateIP is this host's private address (RFC 1918, or IPv6 unique
// local), "" when it has none; a variable for tests.
var privateIP = func() string {
	ip, err := sockaddr.GetPrivateIP()
	if err != nil {
		return ""
	}
	return ip
}

// validHeaderName reports whether h is an HTTP header name we take: letters,
// digits and '-'.
func validHeaderName(h string) bool {
	for _, c := range h {
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return h != ""
}

// checkGossipBind checks a gossip bind address: ip:port, the host an IP
// literal (or empty: every interface), the port a number.
func checkGossipBind(addr string) error {
	const want = "want ip:port such as 0.0.0.0:7946 (an IP address, not a name; port 0 picks one)"
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New(want)
	}
	if host != "" && net.ParseIP(host) == nil {
		return fmt.Errorf("host %q is not an IP address; %s", host, want)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number in 0–65535; %s", port, want)
	}
	return nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
