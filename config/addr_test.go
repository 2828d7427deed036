package config

import (
	"net"
	"testing"
)

// FuzzSplitPortMatchesNet: splitPort accepts what net.SplitHostPort
// accepts, with the same port.
func FuzzSplitPortMatchesNet(f *testing.F) {
	for _, s := range []string{"127.0.0.1:7070", ":7946", "localhost:80", "[::1]:7070", "[::1]", "::1:80",
		"host", "[a]b:1", "a]:1", "[a:1", "a[b]:1", "[a]:1:2", "[a]]:1", "", ":", "[]:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, wantPort, err := net.SplitHostPort(s)
		port, ok := splitPort(s)
		if ok != (err == nil) || port != wantPort {
			t.Fatalf("splitPort(%q) = %q, %v; net.SplitHostPort: port %q, err %v", s, port, ok, wantPort, err)
		}
	})
}
