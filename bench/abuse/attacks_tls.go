package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/internal/tlsfiles/tlstest"
)

// attacks_tls.go replays the TLS review's handshake flood: clients that
// open TLS connections to the public HTTP listener in a loop, each a full
// handshake, then close. Before each listener had a handshake budget, 16
// of them at once moved decisions' p99 7× with a P-256 key and 100× with
// RSA-4096 (the agent spent 1.1 processors on handshakes).

func init() {
	attacks = append(attacks,
		attack{name: "tlshandshakes", what: "16 clients open TLS connections to the public HTTP listener (an ECDSA P-256 certificate) in a loop, a full handshake each",
			run: attackTLSHandshakes, latency: true, agentArgs: tlsAgentArgs})
}

// tlsConns is how many connections the flood keeps handshaking at once.
const tlsConns = 16

// tlsAgentArgs serves the HTTP API off loopback's rules (--http-public)
// over TLS, with a self-signed P-256 certificate and a token written in
// dir.
func tlsAgentArgs(dir string) ([]string, error) {
	now := time.Now()
	c, err := tlstest.New("obol abuse bench", now.Add(-time.Hour), now.Add(24*time.Hour), nil, false, 1)
	if err != nil {
		return nil, err
	}
	cert, key, token := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "tls-token")
	for path, data := range map[string][]byte{
		cert:  c.CertPEM,
		key:   c.KeyPEM,
		token: []byte("0123456789abcdef0123456789abcdef\n"),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return []string{"--http", "127.0.0.1:0", "--http-public", "--auth-token-file", token, "--tls-cert", cert, "--tls-key", key}, nil
}

func attackTLSHandshakes(ctx context.Context, a *agentProc) (string, error) {
	addr := startedField(a, "http")
	if addr == "" || addr == "off" {
		return "", errors.New("setup: the agent's HTTP address is not in its start line")
	}
	cfg := &tls.Config{InsecureSkipVerify: true} // the bench's own certificate; the handshake's cost is what counts
	var ok, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range tlsConns {
		wg.Go(func() {
			d := tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 5 * time.Second}}
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					failed.Add(1)
					continue
				}
				ok.Add(1)
				c.Close()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	m := metrics(a, "obol_tls_handshakes_refused_total")
	fig := fmt.Sprintf("%d handshakes in %v (%.0f/s), %d failed; %0.f refused by the listener's budget",
		ok.Load(), took.Round(time.Millisecond), float64(ok.Load())/took.Seconds(), failed.Load(), m["obol_tls_handshakes_refused_total"])
	if !alive(a) {
		return fig, errors.New("the agent died")
	}
	return fig, nil
}
