// Package tlstest issues certificates for tests and benches: a CA, and
// server and client certificates it signs, as PEM, valid for localhost and
// 127.0.0.1.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is an issued certificate: its PEM certificate and key, the parsed
// certificate and its private key.
type Cert struct {
	CertPEM, KeyPEM []byte
	X509            *x509.Certificate
	Key             *ecdsa.PrivateKey
}

// Issue makes a certificate for cn valid [from, to), signed by ca (nil:
// self-signed), a CA when isCA, with the serial given; an error fails t.
func Issue(t testing.TB, cn string, from, to time.Time, ca *Cert, isCA bool, serial int64) *Cert {
	t.Helper()
	c, err := New(cn, from, to, ca, isCA, serial)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// New is Issue for a program (a bench): it returns the error.
func New(cn string, from, to time.Time, ca *Cert, isCA bool, serial int64) (*Cert, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: from, NotAfter: to, DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: isCA,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	parent, signer := tmpl, priv
	if ca != nil {
		parent, signer = ca.X509, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &priv.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Cert{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), X509: c, Key: priv}, nil
}

// Pair returns c as a tls.Certificate.
func (c *Cert) Pair(t testing.TB) tls.Certificate {
	t.Helper()
	p, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Pool returns a pool of the CAs given.
func Pool(cas ...*Cert) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range cas {
		p.AddCert(c.X509)
	}
	return p
}

// Write writes data to path, or fails the test.
func Write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Files is a CA and a server certificate it signed, valid from an hour
// before now for a day, written in dir as ca.crt, tls.crt and tls.key.
type Files struct {
	CA, Server        *Cert
	CAPath, Cert, Key string
}

// WriteFiles issues and writes Files in dir.
func WriteFiles(t testing.TB, dir string) Files {
	t.Helper()
	now := time.Now()
	ca := Issue(t, "obol test CA", now.Add(-time.Hour), now.Add(24*time.Hour), nil, true, 1)
	srv := Issue(t, "obol test server", now.Add(-time.Hour), now.Add(24*time.Hour), ca, false, 2)
	f := Files{CA: ca, Server: srv, CAPath: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	Write(t, f.CAPath, ca.CertPEM)
	Write(t, f.Cert, srv.CertPEM)
	Write(t, f.Key, srv.KeyPEM)
	return f
}
