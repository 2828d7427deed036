package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/obol-dev/obol/internal/tlsfiles/tlstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// The TLS settings: each mistake is refused before anything is bound,
// naming the flag or variable and what to write instead; a token off
// loopback needs TLS or --insecure-token.
func TestTLSSettings(t *testing.T) {
	dir := tempDir(t)
	files := tlstest.WriteFiles(t, dir)
	sock := filepath.Join(dir, "never.sock")
	good := filepath.Join(dir, "good.yaml")
	tlstest.Write(t, good, []byte("agent: {socket: "+sock+"}\n"))
	token := filepath.Join(dir, "token")
	tlstest.Write(t, token, []byte("0123456789abcdef0123456789abcdef\n"))
	now := time.Now()
	old := tlstest.Issue(t, "old", now.Add(-48*time.Hour), now.Add(-time.Hour), files.CA, false, 9)
	oldCert, oldKey := filepath.Join(dir, "old.crt"), filepath.Join(dir, "old.key")
	tlstest.Write(t, oldCert, old.CertPEM)
	tlstest.Write(t, oldKey, old.KeyPEM)
	rlsDir := filepath.Join(dir, "rls")
	os.Mkdir(rlsDir, 0o700)
	writeRLS(t, rlsDir, "10")
	public := []string{"--check-config", good, "--http", "0.0.0.0:1", "--http-public", "--auth-token-file", token}
	with := func(a []string, more ...string) []string { return append(append([]string(nil), a...), more...) }
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stdout string
		stderr string
	}{
		{"public HTTP in the clear", public, nil, 2, "", "--http-public without --tls-cert: the bearer token would cross the network in the clear"},
		{"public HTTP in the clear, accepted", with(public, "--insecure-token"), nil, 0, "http 0.0.0.0:1", ""},
		{"public HTTP in the clear, accepted by env", public, map[string]string{"OBOL_INSECURE_TOKEN": "true"}, 0, "http 0.0.0.0:1", ""},
		{"bad OBOL_INSECURE_TOKEN", public, map[string]string{"OBOL_INSECURE_TOKEN": "sure"}, 2, "", `OBOL_INSECURE_TOKEN "sure": want true or false`},
		{"public HTTP over TLS", with(public, "--tls-cert", files.Cert, "--tls-key", files.Key), nil, 0, "; TLS on http (CN=obol test server, until ", ""},
		{"TLS from env, mutual", public, map[string]string{"OBOL_TLS_CERT": files.Cert, "OBOL_TLS_KEY": files.Key, "OBOL_TLS_CLIENT_CA": files.CAPath}, 0, "client certificates required", ""},
		{"TLS on the rate limit service", []string{"--check-config", good, "--rls-config", rlsDir, "--rls-grpc", "0.0.0.0:8081", "--rls-public", "--tls-cert", files.Cert, "--tls-key", files.Key}, nil, 0, "; TLS on rls (", ""},
		{"a certificate without its key", with(public, "--tls-cert", files.Cert), nil, 2, "", `--tls-cert "` + files.Cert + `": a certificate needs its key`},
		{"a key without its certificate", with(public, "--tls-key", files.Key), nil, 2, "", `--tls-key "` + files.Key + `": a key needs its certificate`},
		{"a client CA alone", with(public, "--tls-client-ca", files.CAPath, "--insecure-token"), nil, 2, "", `--tls-client-ca "` + files.CAPath + `": a client CA needs the server's own pair`},
		{"TLS with no listener off loopback", []string{"--check-config", good, "--tls-cert", files.Cert, "--tls-key", files.Key}, nil, 2, "", "TLS serves the listeners off loopback"},
		{"an expired certificate", with(public, "--tls-cert", oldCert, "--tls-key", oldKey), nil, 2, "", "--tls-cert " + oldCert + ": the certificate (CN=old) expired at"},
		{"a key of another certificate", with(public, "--tls-cert", files.Cert, "--tls-key", oldKey), nil, 2, "", "--tls-cert " + files.Cert + " and --tls-key " + oldKey + ": tls: private key does not match public key"},
		{"a missing file", with(public, "--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", files.Key), nil, 2, "", "--tls-cert " + filepath.Join(dir, "none.crt") + ":"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, envOf(tc.env), &stdout, &stderr)
			if code := exitCode(err); code != tc.code {
				t.Fatalf("exit %d (%v), want %d; stderr:\n%s", code, err, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout does not say %q:\n%s", tc.stdout, stdout.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr does not say %q:\n%s", tc.stderr, stderr.String())
			}
		})
	}
}

// The agent serves its public HTTP listener and its rate limit service
// over TLS (the service with client certificates), keeps the socket in the
// clear, takes a rotated pair on the next handshake, and refuses a bad one
// with the pair in force kept, logged and counted.
func TestRunTLS(t *testing.T) {
	dir := tempDir(t)
	files := tlstest.WriteFiles(t, dir)
	now := time.Now()
	client := tlstest.Issue(t, "envoy", now.Add(-time.Hour), now.Add(24*time.Hour), files.CA, false, 31)
	token := filepath.Join(dir, "token")
	tlstest.Write(t, token, []byte("0123456789abcdef0123456789abcdef\n"))
	rlsDir := filepath.Join(dir, "rls")
	os.Mkdir(rlsDir, 0o700)
	writeRLS(t, rlsDir, "100")
	sock := filepath.Join(dir, "obol.sock")
	httpAddr, grpcAddr := freePort(t), freePort(t)
	a := startAgent(t, []string{"--socket", sock, "--http", httpAddr, "--http-public", "--auth-token-file", token,
		"--rls-config", rlsDir, "--rls-grpc", grpcAddr, "--rls-public",
		"--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-client-ca", files.CAPath}, noEnv, sock)

	roots := tlstest.Pool(files.CA)
	serial := func() int64 {
		t.Helper()
		c, err := tls.Dial("tcp", httpAddr, &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{client.Pair(t)}})
		if err != nil {
			t.Fatalf("TLS to %s: %v", httpAddr, err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots,
		ServerName: "localhost", Certificates: []tls.Certificate{client.Pair(t)}}}}
	req, _ := http.NewRequest("GET", "https://"+httpAddr+"/v1/config", nil)
	req.Header.Set("Authorization", "Bearer 0123456789abcdef0123456789abcdef")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/config over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/config over TLS: %d", resp.StatusCode)
	}
	if resp, err := unixClient(sock).Get("http://obol/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the socket in the clear: %v", err)
	}

	// The rate limit service: a proxy with a certificate of the CA is
	// answered; one without is refused in the handshake.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rlReq := &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "client", Value: "c"}}}}}
	call := func(certs []tls.Certificate) error {
		cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: certs})))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		_, err = rlpb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, rlReq)
		return err
	}
	if err := call([]tls.Certificate{client.Pair(t)}); err != nil {
		t.Fatalf("the rate limit service over mutual TLS: %v", err)
	}
	if err := call(nil); err == nil {
		t.Fatalf("the rate limit service answered a proxy without a certificate")
	}

	// Rotation: a new pair of the same CA serves the next handshake.
	if s := serial(); s != files.Server.X509.SerialNumber.Int64() {
		t.Fatalf("serial %d before the rotation", s)
	}
	next := tlstest.Issue(t, "obol test server 2", now.Add(-time.Hour), now.Add(48*time.Hour), files.CA, false, 77)
	replace := func(cert, key []byte) {
		for path, data := range map[string][]byte{files.Cert: cert, files.Key: key} {
			tmp := path + ".tmp"
			tlstest.Write(t, tmp, data)
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	replace(next.CertPEM, next.KeyPEM)
	a.stderr.Wait(t, 15*time.Second, "TLS files reloaded")
	if s := serial(); s != 77 {
		t.Fatalf("serial %d after the rotation, want 77", s)
	}
	// A bad pair (a key of another certificate) is refused; 77 stays.
	replace(files.Server.CertPEM, next.KeyPEM)
	a.stderr.Wait(t, 15*time.Second, "TLS files refused; the pair in force stays")
	if s := serial(); s != 77 {
		t.Fatalf("serial %d after a refused pair, want 77", s)
	}
	m, err := unixClient(sock).Get("http://obol/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	for _, w := range []string{`obol_tls_reloads_total{result="ok"} 1`, `obol_tls_reloads_total{result="refused"} 1`, "obol_tls_certificate_expiry_timestamp_seconds "} {
		if !bytes.Contains(body, []byte(w)) {
			t.Errorf("/metrics lacks %q:\n%s", w, grepLines(string(body), "obol_tls"))
		}
	}
}
