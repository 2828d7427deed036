package tlsfiles

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/internal/safefile"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// MaxFileSize bounds each file read: a certificate chain, a key or a CA
// bundle of more is refused (a CA bundle of every public root is about
// 220 KiB).
const MaxFileSize = 1 << 20

// Files names the files a Holder serves: a PEM certificate chain and its
// PEM private key, and optionally a PEM bundle of the CAs that client
// certificates must chain to (mutual TLS: a client without a valid
// certificate is refused in the handshake).
type Files struct {
	Cert, Key, ClientCA string
	// Flags name the files in errors, as the user gave them (e.g.
	// "--tls-cert"); empty: "certificate", "key", "client CA".
	CertFlag, KeyFlag, ClientCAFlag string
}

// Digest is the SHA-256 of the files' contents together.
type Digest [sha256.Size]byte

// pair is one load: the certificate and CA pool in force.
type pair struct {
	cert     tls.Certificate
	weight   int // a handshake's cost in the budget (keyWeight)
	leaf     *x509.Certificate
	clientCA *x509.CertPool
	sum      Digest
}

// Holder holds the pair in force. Its methods are safe for concurrent use.
type Holder struct {
	files Files
	now   func() time.Time

	cur     atomic.Pointer[pair]
	mu      sync.Mutex // serializes reloads
	last    Digest     // the last content a reload read, good or bad
	ok, bad atomic.Uint64
	busy    atomic.Uint64 // handshakes refused over the budget (HandshakeBudget)
	// sleep waits d; a variable for tests.
	sleep func(d time.Duration)
}

// Load reads and checks files at now and returns a Holder serving them.
func Load(files Files, now func() time.Time) (*Holder, error) {
	if now == nil {
		now = time.Now
	}
	h := &Holder{files: files, now: now, sleep: time.Sleep}
	p, err := h.read()
	if err != nil {
		return nil, err
	}
	h.cur.Store(p)
	h.last = p.sum
	return h, nil
}

// Reload reads the files again. A good pair that differs from the one in
// force replaces it (changed); a bad one is refused with the reason, and
// the pair in force stays.
func (h *Holder) Reload() (changed bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, err := h.read()
	if err != nil {
		h.bad.Add(1)
		if sum, rerr := h.Observe(); rerr == nil {
			h.last = sum
		}
		return false, err
	}
	h.last = p.sum
	if p.sum == h.cur.Load().sum {
		return false, nil
	}
	h.cur.Store(p)
	h.ok.Add(1)
	return true, nil
}

// Known reports whether sum is the content in force or the last one a
// reload read (a refused one): reloading it would change nothing.
func (h *Holder) Known(sum Digest) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sum == h.cur.Load().sum || sum == h.last
}

// Observe reads the files and returns the digest of their contents,
// without checking them.
func (h *Holder) Observe() (Digest, error) {
	d := sha256.New()
	for _, f := range []struct{ path, flag string }{{h.files.Cert, h.files.certFlag()}, {h.files.Key, h.files.keyFlag()}, {h.files.ClientCA, h.files.caFlag()}} {
		if f.path == "" {
			d.Write([]byte{0})
			continue
		}
		data, err := safefile.Read(f.path, MaxFileSize)
		if err != nil {
			return Digest{}, fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
		s := sha256.Sum256(data)
		d.Write([]byte{1})
		d.Write(s[:])
	}
	var sum Digest
	d.Sum(sum[:0])
	return sum, nil
}

// Reloads returns the reloads that put a new pair in force and those
// refused.
func (h *Holder) Reloads() (ok, refused uint64) { return h.ok.Load(), h.bad.Load() }

// NotAfter returns when the certificate in force expires.
func (h *Holder) NotAfter() time.Time { return h.cur.Load().leaf.NotAfter }

// Subject returns the certificate in force's subject, for logs.
func (h *Holder) Subject() string { return h.cur.Load().leaf.Subject.String() }

// MutualTLS reports whether clients must present a certificate.
func (h *Holder) MutualTLS() bool { return h.files.ClientCA != "" }

// ServerConfig returns a server config that hands each handshake the pair
// in force, offering protos by ALPN (h2 for gRPC, http/1.1 for HTTP/1.1):
// TLS 1.2 or later, and with a client CA, a verified client certificate.
// Each config (each listener) spends its own handshake budget
// (HandshakeBudget).
func (h *Holder) ServerConfig(protos ...string) *tls.Config {
	lim := rate.NewLimiter(HandshakeBudget, HandshakeBurst)
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: protos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			p := h.cur.Load()
			// The server's work of the handshake (its signature, the key
			// exchange) comes after this: it waits its share of the
			// budget, or is refused when that would take over
			// MaxHandshakeWait.
			now := h.now()
			r := lim.ReserveN(now, p.weight)
			if d := r.DelayFrom(now); d > MaxHandshakeWait || !r.OK() {
				r.CancelAt(now)
				h.busy.Add(1)
				return nil, errHandshakesBusy
			} else if d > 0 {
				h.sleep(d)
			}
			c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: protos, Certificates: []tls.Certificate{p.cert}, Time: h.now}
			if p.clientCA != nil {
				// The chain is verified here, not by crypto/tls, which
				// checks every certificate a client sends (up to 100
				// signature checks) before its proof of the key: a chain of
				// 110 same-named intermediates cost 189-348 ms of processor
				// per handshake. A chain past MaxClientChain is refused
				// before any signature is checked.
				c.ClientCAs, c.ClientAuth = p.clientCA, tls.RequireAnyClientCert
				pool := p.clientCA
				c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
					return verifyClient(raw, pool, h.now())
				}
			}
			return c, nil
		},
	}
}

// The handshake budget of one listener, in units of an ECDSA P-256
// handshake (the cheapest here: about 0.4 ms of the server's processor);
// a key's weight is its handshake's cost in those units (keyWeight). A
// client that opened TLS connections in a loop made the agent do 2,834
// P-256 handshakes a second (115% of a processor) and moved decisions'
// p99 7×; RSA-4096, 170 a second at the same cost, 100×. At 600 units a
// second (a quarter of a processor) the decisions sharing that processor
// still saw their p99 move 2 to 6.4× in the hostile-client bench, so the
// budget bounds handshakes to about a twelfth of one processor: 200 P-256
// handshakes a second after a burst of 100 (Envoy's workers reconnecting
// at once), 12 with RSA-4096; a sidecar's clients keep their connections. A handshake over the budget waits its turn,
// up to MaxHandshakeWait, and past that is refused (the client sees the
// connection end; a retry later succeeds).
const (
	HandshakeBudget  = 200
	HandshakeBurst   = 100
	MaxHandshakeWait = time.Second
)

var errHandshakesBusy = errors.New("tls: the listener's handshake budget is spent; retry later")

// keyWeight is a handshake's cost with key in units of a P-256 one:
// measured for P-256 (1), RSA-2048 (4) and RSA-4096 (16); the rest by the
// cost of their signatures.
func keyWeight(key crypto.PrivateKey) int {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve.Params().BitSize {
		case 256:
			return 1
		case 384:
			return 3
		default:
			return 8
		}
	case ed25519.PrivateKey:
		return 1
	case *rsa.PrivateKey:
		switch bits := k.N.BitLen(); {
		case bits <= 2048:
			return 4
		case bits <= 3072:
			return 9
		default:
			return 16 * max(1, bits/4096) * max(1, bits/4096) * max(1, bits/4096)
		}
	}
	return 4
}

// BusyHandshakes returns the handshakes refused over the budget.
func (h *Holder) BusyHandshakes() uint64 { return h.busy.Load() }

func (f Files) certFlag() string { return or(f.CertFlag, "certificate") }
func (f Files) keyFlag() string  { return or(f.KeyFlag, "key") }
func (f Files) caFlag() string   { return or(f.ClientCAFlag, "client CA") }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// read reads and checks the files.
func (h *Holder) read() (*pair, error) {
	f := h.files
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("%s and %s: both are needed, got %q and %q", f.certFlag(), f.keyFlag(), f.Cert, f.Key)
	}
	sum, err := h.Observe()
	if err != nil {
		return nil, err
	}
	certPEM, err := safefile.Read(f.Cert, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", f.certFlag(), f.Cert, err)
	}
	keyPEM, err := safefile.Read(f.Key, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", f.keyFlag(), f.Key, err)
	}
	if err := hasBlock(certPEM, "CERTIFICATE"); err != nil {
		return nil, fmt.Errorf("%s %s: %w", f.certFlag(), f.Cert, err)
	}
	if err := hasBlock(keyPEM, "PRIVATE KEY"); err != nil {
		return nil, fmt.Errorf("%s %s: %w", f.keyFlag(), f.Key, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s %s and %s %s: %w", f.certFlag(), f.Cert, f.keyFlag(), f.Key, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s %s: %w", f.certFlag(), f.Cert, err)
		}
	}
	now := h.now()
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("%s %s: the certificate (%s) expired at %s; expected one valid now (%s)", f.certFlag(), f.Cert, leaf.Subject, leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("%s %s: the certificate (%s) is valid only from %s; expected one valid now (%s)", f.certFlag(), f.Cert, leaf.Subject, leaf.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	p := &pair{cert: cert, leaf: leaf, sum: sum, weight: min(keyWeight(cert.PrivateKey), HandshakeBurst)}
	if f.ClientCA != "" {
		caPEM, err := safefile.Read(f.ClientCA, MaxFileSize)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", f.caFlag(), f.ClientCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it; expected one or more CA certificates (-----BEGIN CERTIFICATE-----)", f.caFlag(), f.ClientCA)
		}
		p.clientCA = pool
	}
	return p, nil
}

// hasBlock reports a clear error when data holds no PEM block whose type
// ends with suffix.
func hasBlock(data []byte, suffix string) error {
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if len(b.Type) >= len(suffix) && b.Type[len(b.Type)-len(suffix):] == suffix {
			return nil
		}
	}
	return errors.New("no PEM block of type " + suffix + " in it; expected a PEM file (-----BEGIN " + suffix + "-----)")
}

var (
	descExpiry  = prometheus.NewDesc("obol_tls_certificate_expiry_timestamp_seconds", "When the TLS certificate in force expires (Unix seconds).", nil, nil)
	descBusy    = prometheus.NewDesc("obol_tls_handshakes_refused_total", "TLS handshakes refused because the listener's handshake budget was spent (a flood of new connections).", nil, nil)
	descReloads = prometheus.NewDesc("obol_tls_reloads_total", "Reloads of the TLS files: ok put a new pair in force, refused kept the one in force (the reason is logged).", []string{"result"}, nil)
)

// Describe and Collect make a Holder a prometheus.Collector of its
// figures: obol_tls_certificate_expiry_timestamp_seconds and
// obol_tls_reloads_total{result="ok"|"refused"}.
func (h *Holder) Describe(ch chan<- *prometheus.Desc) {
	ch <- descExpiry
	ch <- descReloads
	ch <- descBusy
}

func (h *Holder) Collect(ch chan<- prometheus.Metric) {
	ok, refused := h.Reloads()
	ch <- prometheus.MustNewConstMetric(descExpiry, prometheus.GaugeValue, float64(h.NotAfter().Unix()))
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(refused), "refused")
	ch <- prometheus.MustNewConstMetric(descBusy, prometheus.CounterValue, float64(h.BusyHandshakes()))
}

// CertPath returns the certificate's path, for logs.
func (h *Holder) CertPath() string { return h.files.Cert }

// MaxClientChain and MaxClientChainBytes bound the chain a client presents
// with mutual TLS: its certificate and the intermediates to the CA (a
// client's chain is usually one or two). A longer or larger chain is
// refused before any signature of it is checked.
const (
	MaxClientChain      = 4
	MaxClientChainBytes = 16 << 10
)

// verifyClient verifies a client's chain (raw: its certificate first, then
// intermediates) against the client CAs at now, for client authentication.
func verifyClient(raw [][]byte, roots *x509.CertPool, now time.Time) error {
	if len(raw) == 0 {
		return errors.New("tls: the client sent no certificate; one of the client CAs' is required")
	}
	size := 0
	for _, r := range raw {
		size += len(r)
	}
	if len(raw) > MaxClientChain || size > MaxClientChainBytes {
		return fmt.Errorf("tls: client certificate chain of %d certificates and %d bytes; at most %d and %d bytes are taken", len(raw), size, MaxClientChain, MaxClientChainBytes)
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return fmt.Errorf("tls: client certificate %d: %w", i, err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fmt.Errorf("tls: client certificate: %w", err)
	}
	return nil
}
