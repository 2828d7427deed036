package tlsfiles

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/tlsfiles/tlstest"
	"github.com/prometheus/client_golang/prometheus"
)

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// handshake dials a TLS server of cfg on a pipe as a client of ccfg and
// returns the server's leaf serial, or the handshake's error.
func handshake(t *testing.T, cfg, ccfg *tls.Config) (int64, error) {
	t.Helper()
	// A loopback connection, not net.Pipe: its writes are buffered, so a
	// server's alert never waits for a client that is writing.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(10 * time.Second)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	srvErr := make(chan error, 1)
	go func() {
		s := tls.Server(a, cfg)
		err := s.Handshake()
		if err == nil {
			// Read the client's first byte so that a client refused
			// after the handshake (TLS 1.3) sees the alert.
			_, err = s.Read(make([]byte, 1))
		}
		srvErr <- err
		a.Close()
	}()
	c := tls.Client(b, ccfg)
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	if _, err := c.Write([]byte{1}); err != nil {
		return 0, err
	}
	if err := <-srvErr; err != nil {
		return 0, err
	}
	// A client refused after its handshake (TLS 1.3) reads the alert.
	if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

func TestLoadReloadAndRefuse(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.Issue(t, "ca", t0.Add(-time.Hour), t0.Add(24*time.Hour), nil, true, 1)
	one := tlstest.Issue(t, "one", t0.Add(-time.Hour), t0.Add(24*time.Hour), ca, false, 11)
	two := tlstest.Issue(t, "two", t0.Add(-time.Hour), t0.Add(48*time.Hour), ca, false, 12)
	certP, keyP := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.KeyPEM")
	tlstest.Write(t, certP, one.CertPEM)
	tlstest.Write(t, keyP, one.KeyPEM)
	files := Files{Cert: certP, Key: keyP, CertFlag: "--tls-cert", KeyFlag: "--tls-key"}
	h, err := Load(files, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	roots := tlstest.Pool(ca)
	// The client checks the chain at the test's instant, as the server does.
	client := &tls.Config{RootCAs: roots, ServerName: "localhost", Time: func() time.Time { return t0 }}
	cfg := h.ServerConfig("http/1.1")
	if s, err := handshake(t, cfg, client); err != nil || s != 11 {
		t.Fatalf("first pair: serial %d, %v; want 11", s, err)
	}
	// Same content: nothing changes.
	if changed, err := h.Reload(); changed || err != nil {
		t.Fatalf("reload of the same files: changed %v, %v", changed, err)
	}
	// A rotation: the next handshake gets the new pair.
	tlstest.Write(t, certP, two.CertPEM)
	tlstest.Write(t, keyP, two.KeyPEM)
	if changed, err := h.Reload(); !changed || err != nil {
		t.Fatalf("reload of a new pair: changed %v, %v", changed, err)
	}
	if s, err := handshake(t, cfg, client); err != nil || s != 12 {
		t.Fatalf("after the rotation: serial %d, %v; want 12", s, err)
	}
	if !h.NotAfter().Equal(two.X509.NotAfter) {
		t.Errorf("NotAfter %v, want %v", h.NotAfter(), two.X509.NotAfter)
	}
	expired := tlstest.Issue(t, "expired", t0.Add(-48*time.Hour), t0.Add(-time.Hour), ca, false, 13)
	early := tlstest.Issue(t, "early", t0.Add(time.Hour), t0.Add(48*time.Hour), ca, false, 14)
	bad := []struct {
		name      string
		cert, key []byte
		want      string
	}{
		{"key of another certificate", one.CertPEM, two.KeyPEM, "--tls-cert " + certP + " and --tls-key " + keyP + ": tls: private key does not match public key"},
		{"not PEM", []byte("hello"), two.KeyPEM, "--tls-cert " + certP + ": no PEM block of type CERTIFICATE in it"},
		{"a certificate for a key", one.CertPEM, one.CertPEM, "--tls-key " + keyP + ": no PEM block of type PRIVATE KEY in it"},
		{"expired", expired.CertPEM, expired.KeyPEM, "the certificate (CN=expired) expired at"},
		{"not yet valid", early.CertPEM, early.KeyPEM, "the certificate (CN=early) is valid only from"},
		{"half written", two.CertPEM[:len(two.CertPEM)/2], two.KeyPEM, "--tls-cert " + certP + ": no PEM block"},
	}
	for _, c := range bad {
		tlstest.Write(t, certP, c.cert)
		tlstest.Write(t, keyP, c.key)
		changed, err := h.Reload()
		if changed || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: changed %v, %v; want refused with %q", c.name, changed, err, c.want)
		}
		if s, err := handshake(t, cfg, client); err != nil || s != 12 {
			t.Errorf("%s: the pair in force changed: serial %d, %v; want 12", c.name, s, err)
		}
	}
	if ok, refused := h.Reloads(); ok != 1 || refused != uint64(len(bad)) {
		t.Errorf("reloads ok %d refused %d, want 1 and %d", ok, refused, len(bad))
	}
	os.Remove(keyP)
	if _, err := h.Reload(); err == nil || !strings.Contains(err.Error(), "--tls-key "+keyP) {
		t.Errorf("a missing key: %v", err)
	}
	// Known: the content in force and the last refused one.
	tlstest.Write(t, keyP, two.KeyPEM)
	tlstest.Write(t, certP, two.CertPEM)
	if sum, err := h.Observe(); err != nil || !h.Known(sum) {
		t.Errorf("the pair in force is not known: %v", err)
	}
	tlstest.Write(t, certP, expired.CertPEM)
	tlstest.Write(t, keyP, expired.KeyPEM)
	if sum, _ := h.Observe(); h.Known(sum) {
		t.Errorf("a content never read is known")
	}
	h.Reload()
	if sum, _ := h.Observe(); !h.Known(sum) {
		t.Errorf("the last refused content is not known")
	}
	// At start, a bad pair is an error and no Holder.
	if _, err := Load(files, func() time.Time { return t0 }); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("Load of an expired pair: %v", err)
	}
	if _, err := Load(Files{Cert: certP}, nil); err == nil || !strings.Contains(err.Error(), "both are needed") {
		t.Errorf("Load without a key: %v", err)
	}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.Issue(t, "ca", t0.Add(-time.Hour), t0.Add(24*time.Hour), nil, true, 1)
	other := tlstest.Issue(t, "other-ca", t0.Add(-time.Hour), t0.Add(24*time.Hour), nil, true, 2)
	srv := tlstest.Issue(t, "server", t0.Add(-time.Hour), t0.Add(24*time.Hour), ca, false, 11)
	good := tlstest.Issue(t, "client", t0.Add(-time.Hour), t0.Add(24*time.Hour), ca, false, 21)
	stranger := tlstest.Issue(t, "stranger", t0.Add(-time.Hour), t0.Add(24*time.Hour), other, false, 22)
	p := func(n string) string { return filepath.Join(dir, n) }
	tlstest.Write(t, p("tls.crt"), srv.CertPEM)
	tlstest.Write(t, p("tls.KeyPEM"), srv.KeyPEM)
	tlstest.Write(t, p("ca.crt"), ca.CertPEM)
	h, err := Load(Files{Cert: p("tls.crt"), Key: p("tls.KeyPEM"), ClientCA: p("ca.crt")}, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	if !h.MutualTLS() {
		t.Fatal("MutualTLS false with a client CA")
	}
	cfg := h.ServerConfig("h2")
	roots := tlstest.Pool(ca)
	withCert := func(c *tlstest.Cert) *tls.Config {
		cc := &tls.Config{RootCAs: roots, ServerName: "localhost", Time: func() time.Time { return t0 }}
		if c != nil {
			cc.Certificates = []tls.Certificate{c.Pair(t)}
		}
		return cc
	}
	if _, err := handshake(t, cfg, withCert(good)); err != nil {
		t.Errorf("a client of the CA: %v", err)
	}
	if _, err := handshake(t, cfg, withCert(nil)); err == nil {
		t.Errorf("a client without a certificate was let in")
	}
	if _, err := handshake(t, cfg, withCert(stranger)); err == nil {
		t.Errorf("a client of another CA was let in")
	}
	// The CA rotates to the other one: its clients are let in, the old
	// CA's are not.
	tlstest.Write(t, p("ca.crt"), other.CertPEM)
	if changed, err := h.Reload(); !changed || err != nil {
		t.Fatalf("CA rotation: changed %v, %v", changed, err)
	}
	if _, err := handshake(t, cfg, withCert(stranger)); err != nil {
		t.Errorf("after the CA rotation, a client of the new CA: %v", err)
	}
	// A CA file with no certificate is refused; the CA in force stays.
	tlstest.Write(t, p("ca.crt"), []byte("not a bundle\n"))
	if _, err := h.Reload(); err == nil || !strings.Contains(err.Error(), "client CA "+p("ca.crt")+": no PEM certificate") {
		t.Errorf("an empty CA bundle: %v", err)
	}
	if _, err := handshake(t, cfg, withCert(stranger)); err != nil {
		t.Errorf("after a refused CA, a client of the CA in force: %v", err)
	}
}

// The figures: the certificate's expiry and the reloads, ok and refused.
func TestMetrics(t *testing.T) {
	files := tlstest.WriteFiles(t, t.TempDir())
	h, err := Load(Files{Cert: files.Cert, Key: files.Key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tlstest.Write(t, files.Key, []byte("garbage"))
	h.Reload()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"obol_tls_certificate_expiry_timestamp_seconds": float64(files.Server.X509.NotAfter.Unix()),
		"obol_tls_reloads_total/ok":                     0,
		"obol_tls_reloads_total/refused":                1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// A client's chain is verified by the agent, bounded: an intermediate
// between the client and the CA is taken; a chain past MaxClientChain is
// refused before any signature of it is checked, in the handshake.
func TestClientChainBounded(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.Issue(t, "ca", t0.Add(-time.Hour), t0.Add(24*time.Hour), nil, true, 1)
	srv := tlstest.Issue(t, "server", t0.Add(-time.Hour), t0.Add(24*time.Hour), ca, false, 2)
	p := func(n string) string { return filepath.Join(dir, n) }
	tlstest.Write(t, p("tls.crt"), srv.CertPEM)
	tlstest.Write(t, p("tls.key"), srv.KeyPEM)
	tlstest.Write(t, p("ca.crt"), ca.CertPEM)
	h, err := Load(Files{Cert: p("tls.crt"), Key: p("tls.key"), ClientCA: p("ca.crt")}, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.ServerConfig("h2")
	// A chain: CA → i1 → … → in → leaf.
	chain := func(n int) tls.Certificate {
		parent := ca
		var inters []*tlstest.Cert
		for i := range n {
			parent = tlstest.Issue(t, fmt.Sprintf("inter-%d", i), t0.Add(-time.Hour), t0.Add(24*time.Hour), parent, true, int64(100+i))
			inters = append(inters, parent)
		}
		leaf := tlstest.Issue(t, "client", t0.Add(-time.Hour), t0.Add(24*time.Hour), parent, false, 99)
		pair := leaf.Pair(t)
		for i := len(inters) - 1; i >= 0; i-- {
			pair.Certificate = append(pair.Certificate, inters[i].X509.Raw)
		}
		return pair
	}
	client := func(c tls.Certificate) *tls.Config {
		return &tls.Config{RootCAs: tlstest.Pool(ca), ServerName: "localhost", Time: func() time.Time { return t0 }, Certificates: []tls.Certificate{c}}
	}
	if _, err := handshake(t, cfg, client(chain(1))); err != nil {
		t.Errorf("a client through one intermediate: %v", err)
	}
	if _, err := handshake(t, cfg, client(chain(MaxClientChain))); err == nil {
		t.Errorf("a chain of %d certificates was let in", MaxClientChain+1)
	}
	raw := chain(MaxClientChain).Certificate
	if err := verifyClient(raw, tlstest.Pool(ca), t0); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("chain of %d certificates", MaxClientChain+1)) {
		t.Errorf("verifyClient of a long chain: %v", err)
	}
	other := tlstest.Issue(t, "other", t0.Add(-time.Hour), t0.Add(24*time.Hour), nil, true, 5)
	stranger := tlstest.Issue(t, "stranger", t0.Add(-time.Hour), t0.Add(24*time.Hour), other, false, 6)
	if err := verifyClient([][]byte{stranger.X509.Raw}, tlstest.Pool(ca), t0); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("verifyClient of another CA's client: %v", err)
	}
}

// The handshake budget: a burst, then each handshake waits its share of
// the listener's budget, and past MaxHandshakeWait is refused and counted;
// each listener (each ServerConfig) has its own.
func TestHandshakeBudget(t *testing.T) {
	files := tlstest.WriteFiles(t, t.TempDir())
	now := time.Now()
	h, err := Load(Files{Cert: files.Cert, Key: files.Key}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	var slept time.Duration
	sleeps := 0
	h.sleep = func(d time.Duration) { slept = d; sleeps++ }
	cfg := h.ServerConfig("h2")
	refused := 0
	for i := 1; i <= HandshakeBurst+HandshakeBudget+50; i++ {
		_, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
		switch {
		case i <= HandshakeBurst && (err != nil || sleeps != 0):
			t.Fatalf("handshake %d of the burst: %v, %d waits", i, err, sleeps)
		case err != nil:
			refused++
		}
	}
	// P-256: weight 1. After the burst, HandshakeBudget handshakes wait up
	// to a second each; the 50 past that are refused.
	if refused != 50 || sleeps != HandshakeBudget || slept > MaxHandshakeWait || slept < MaxHandshakeWait-10*time.Millisecond {
		t.Errorf("refused %d (want 50), waited %d times (want %d), the last %v", refused, sleeps, HandshakeBudget, slept)
	}
	if h.BusyHandshakes() != 50 {
		t.Errorf("BusyHandshakes %d, want 50", h.BusyHandshakes())
	}
	if _, err := h.ServerConfig("http/1.1").GetConfigForClient(&tls.ClientHelloInfo{}); err != nil {
		t.Errorf("another listener's first handshake: %v", err)
	}
	now = now.Add(time.Minute) // the budget refills
	if _, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{}); err != nil {
		t.Errorf("a minute later: %v", err)
	}
}

func TestKeyWeight(t *testing.T) {
	ec := tlstest.Issue(t, "ec", t0, t0.Add(time.Hour), nil, false, 1)
	if w := keyWeight(ec.Key); w != 1 {
		t.Errorf("P-256 weight %d, want 1", w)
	}
	if w := keyWeight(nil); w != 4 {
		t.Errorf("unknown key weight %d, want 4", w)
	}
}
