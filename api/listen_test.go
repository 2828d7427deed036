package api

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/tlsfiles/tlstest"
)

// shortTempDir returns a temp dir whose socket paths fit the 108-byte limit.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "obol")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func unixClient(path string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
		Timeout: 5 * time.Second,
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeOnSocketAndTCP(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "obol.sock")
	ls, err := Listen(ListenConfig{Socket: sock, HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want a socket with 0660", fi.Mode())
	}
	if !strings.HasPrefix(ls.HTTPAddr(), "127.0.0.1:") || strings.HasSuffix(ls.HTTPAddr(), ":0") {
		t.Errorf("HTTPAddr %q", ls.HTTPAddr())
	}

	srv := New(testEngine(t), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ready := waitReady(srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ls) }()

	uc := unixClient(sock)
	tc := &http.Client{Timeout: 5 * time.Second}
	ready(t)
	if status, _ := get(t, uc, "http://obol/readyz"); status != 200 {
		t.Fatalf("/readyz over the socket: %d once Serve marked the server ready, want 200", status)
	}
	if status, body := get(t, tc, "http://"+ls.HTTPAddr()+"/v1/peers"); status != 200 || !strings.Contains(body, `"address":"`+ls.HTTPAddr()+`"`) {
		t.Errorf("peers over TCP: %d %s", status, body)
	}
	if status, _ := get(t, uc, "http://obol/healthz"); status != 200 {
		t.Errorf("healthz over the socket: %d", status)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(DefaultDrainTimeout + 5*time.Second):
		t.Fatal("Serve did not stop")
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket file is still there: %v", err)
	}
	if srv.Ready() {
		t.Errorf("still ready after Serve returned")
	}
	if _, err := net.DialTimeout("tcp", ls.HTTPAddr(), time.Second); err == nil {
		t.Errorf("the TCP listener still accepts")
	}
}

func TestListenRemovesStaleSocket(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "obol.sock")
	// A dead process's socket: bound, then closed without unlinking.
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("the stale socket is not there: %v", err)
	}
	ls, err := Listen(ListenConfig{Socket: sock})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	if err := ls.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Close left the socket: %v", err)
	}
}

func TestListenRefusesLiveSocketAndOtherFiles(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "live.sock")
	live, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := Listen(ListenConfig{Socket: sock}); err == nil || !strings.Contains(err.Error(), sock) {
		t.Errorf("Listen on a live socket: %v, want an error naming %s", err, sock)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("the live socket was removed: %v", err)
	}

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(ListenConfig{Socket: file}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen on a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Errorf("the regular file changed")
	}
	// The TCP listener bound first is released when the socket fails.
	ls, err := Listen(ListenConfig{Socket: file, HTTP: "127.0.0.1:0"})
	if err == nil {
		ls.Close()
		t.Fatal("Listen succeeded")
	}
}

func TestListenLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0"} {
		_, err := Listen(ListenConfig{HTTP: addr})
		if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Listen(%q) = %v, want an error naming it", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ls, err := Listen(ListenConfig{HTTP: addr})
		if err != nil {
			t.Errorf("Listen(%q): %v", addr, err)
			continue
		}
		ls.Close()
	}
	ls, err := Listen(ListenConfig{HTTP: "0.0.0.0:0", AllowPublic: true})
	if err != nil {
		t.Fatalf("Listen with AllowPublic: %v", err)
	}
	ls.Close()
	if _, err := Listen(ListenConfig{}); err == nil {
		t.Errorf("Listen with nothing to listen on succeeded")
	}
	if _, err := Listen(ListenConfig{HTTP: "no-port"}); err == nil || !strings.Contains(err.Error(), "no-port") {
		t.Errorf("Listen(no-port) = %v", err)
	}
}

// With TLS the HTTP listener speaks only TLS (a plain request gets no
// answer but a closed connection), serves every endpoint over it, and the
// socket stays in the clear.
func TestServeTLS(t *testing.T) {
	files := tlstest.WriteFiles(t, t.TempDir())
	sock := filepath.Join(shortTempDir(t), "obol.sock")
	cfg := &tls.Config{Certificates: []tls.Certificate{files.Server.Pair(t)}, NextProtos: []string{"http/1.1"}}
	ls, err := Listen(ListenConfig{Socket: sock, HTTP: "127.0.0.1:0", TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	serving(t, ls)
	tc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tlstest.Pool(files.CA)}}}
	if status, body := get(t, tc, "https://"+ls.HTTPAddr()+"/v1/peers"); status != 200 || !strings.Contains(body, `"address":"`+ls.HTTPAddr()+`"`) {
		t.Errorf("peers over TLS: %d %s", status, body)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + ls.HTTPAddr() + "/v1/peers"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("a plain request over the TLS listener was answered 200")
		}
	}
	if status, _ := get(t, unixClient(sock), "http://obol/healthz"); status != 200 {
		t.Errorf("healthz over the socket: %d", status)
	}
}

// serving serves a test server on ls, once it is ready, until the test
// ends.
func serving(t *testing.T, ls *Listeners) {
	t.Helper()
	srv := New(testEngine(t), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ready := waitReady(srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ls) }()
	t.Cleanup(func() { cancel(); <-done })
	ready(t)
}
