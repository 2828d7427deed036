package freeport

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

const (
	// lowest is the lowest port Loopback picks: above the well-known and
	// most registered services' ports.
	lowest = 20000
	// defaultEphemeral is the first port of Linux's default ephemeral range,
	// assumed when the range cannot be read.
	defaultEphemeral = 32768
	// tries is how many random ports Loopback tries before it falls back to
	// a port the kernel picks.
	tries = 64
)

// Loopback returns a port on 127.0.0.1 that was free for TCP and UDP a
// moment ago, chosen at random below the kernel's ephemeral range; when
// none of tries random ports is free, a port the kernel picks.
func Loopback() (int, error) {
	top := ephemeralStart()
	for range tries {
		if top <= lowest {
			break
		}
		p := lowest + rand.IntN(top-lowest)
		if free(p) {
			return p, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("freeport: no free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// free reports whether port can be bound on 127.0.0.1 for TCP and UDP.
func free(port int) bool {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// ephemeralStart is the first port of the kernel's ephemeral range, or
// defaultEphemeral when it cannot be read.
func ephemeralStart() int {
	f, err := os.Open("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeral
	}
	defer f.Close()
	var lo, hi int
	if _, err := fmt.Fscan(bufio.NewReader(f), &lo, &hi); err != nil || lo <= 0 || lo > 65535 {
		return defaultEphemeral
	}
	return lo
}
