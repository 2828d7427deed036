package api

import (
	"context"
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

	"github.com/obol-dev/obol/internal/await"
)

// TestStatusListener: the status listener serves /healthz, /readyz and
// /metrics without the token the API asks for off loopback, refuses every
// other route, follows readiness and stops with the API.
func TestStatusListener(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "obol.sock")
	ls, err := Listen(ListenConfig{Socket: sock, Status: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	status := ls.StatusAddr()
	if !strings.HasPrefix(status, "127.0.0.1:") || strings.HasSuffix(status, ":0") || ls.HTTPAddr() != "" {
		t.Fatalf("StatusAddr %q, HTTPAddr %q", status, ls.HTTPAddr())
	}
	// AuthEverywhere: the API asks for the token on every listener; the
	// status routes never do.
	srv := New(testEngine(t), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		AuthToken: []byte("0123456789abcdef0123"), AuthEverywhere: true})
	ready := waitReady(srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ls) }()
	ready(t)
	if code, _ := statusGet(t, status, "/readyz"); code != 200 {
		t.Fatalf("/readyz on the status listener: %d once Serve marked the server ready, want 200", code)
	}
	if code, body := statusGet(t, status, "/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := statusGet(t, status, "/metrics"); code != 200 || !strings.Contains(body, "obol_decisions_total") {
		t.Errorf("/metrics: %d %.200s", code, body)
	}
	for _, p := range []string{"/v1/config", "/v1/peers", "/v1/state", "/v1/check?resource=demo/api&domain=x"} {
		if code, body := statusGet(t, status, p); code != 404 || !strings.Contains(body, "not_found") {
			t.Errorf("%s on the status listener: %d %s, want 404 not_found", p, code, body)
		}
	}
	resp, err := http.Post("http://"+status+"/v1/config/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("POST /v1/config/reload on the status listener: %d, want 404", resp.StatusCode)
	}
	resp, err = http.Post("http://"+status+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}
	// The socket still asks for the token (AuthEverywhere).
	if code, _ := get(t, unixClient(sock), "http://obol/metrics"); code != 401 {
		t.Errorf("/metrics on the socket without the token: %d, want 401", code)
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
	if _, err := net.DialTimeout("tcp", status, time.Second); err == nil {
		t.Errorf("the status listener still accepts after Serve returned")
	}
}

// TestListenStatusInUse: a status address in use fails Listen, naming it,
// and leaves nothing bound.
func TestListenStatusInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	sock := filepath.Join(shortTempDir(t), "obol.sock")
	_, err = Listen(ListenConfig{Socket: sock, HTTP: "127.0.0.1:0", Status: busy.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "status address") {
		t.Fatalf("Listen: %v, want an error naming the status address", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket was left behind: %v", err)
	}
	if _, err := Listen(ListenConfig{Status: "127.0.0.1:0"}); err == nil {
		t.Errorf("Listen with only a status listener: no error, want one (it serves no API)")
	}
}

// waitReady returns a function that waits (5 s at most) until srv is
// marked ready, as Serve does once its listeners serve. Call it before
// Serve.
func waitReady(srv *Server) func(t *testing.T) {
	var changed await.Signal
	srv.onReady = func(bool) { changed.Notify() }
	return func(t *testing.T) {
		t.Helper()
		await.Until(t, 5*time.Second, "the server to be ready", &changed, srv.Ready)
	}
}

func statusGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	return get(t, &http.Client{Timeout: 5 * time.Second}, "http://"+addr+path)
}
