package freeport

import (
	"fmt"
	"net"
	"testing"
)

// The port is free, below the ephemeral range, and can then be bound.
func TestLoopback(t *testing.T) {
	top := ephemeralStart()
	seen := map[int]bool{}
	for range 20 {
		p, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		if top > lowest && (p < lowest || p >= top) {
			t.Errorf("port %d: want one in [%d, %d), below the ephemeral range", p, lowest, top)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d cannot be bound: %v", p, err)
		}
		l.Close()
		seen[p] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 picks gave %d distinct ports: want them spread at random", len(seen))
	}
}

// A port in use is never returned.
func TestFreeRefusesABoundPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if p := l.Addr().(*net.TCPAddr).Port; free(p) {
		t.Errorf("port %d is bound, free says it is free", p)
	}
}
