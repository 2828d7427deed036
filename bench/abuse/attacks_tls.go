package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
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
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "obol abuse bench"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return nil, err
	}
	cert, key, token := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "tls-token")
	for path, data := range map[string][]byte{
		cert:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
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
