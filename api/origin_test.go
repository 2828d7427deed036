package api

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// loopbackAgent serves a fresh server on a loopback port and a Unix socket
// until the test ends; it returns the server, the port's address and a
// client of the socket.
func loopbackAgent(t *testing.T) (*Server, string, *http.Client) {
	t.Helper()
	s := New(testEngine(t), Options{Now: func() time.Time { return t0 }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), NodeName: "node-a"})
	sock := filepath.Join(t.TempDir(), "obol.sock")
	ls, err := Listen(ListenConfig{Socket: sock, HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ls) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	socket := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	t.Cleanup(socket.CloseIdleConnections)
	return s, ls.HTTPAddr(), socket
}

// send sends method path with body and headers ("Name: value"; "Host: h"
// sets the Host) with client c to base, and returns the status and the
// error code of the reply ("" when it is not an error).
func send(t *testing.T, c *http.Client, base, method, path, body string, headers ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, hv := range headers {
		k, v, _ := strings.Cut(hv, ":")
		if strings.EqualFold(k, "Host") {
			req.Host = strings.TrimSpace(v)
			continue
		}
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	code := ""
	if resp.StatusCode >= 400 {
		code, _ = errorReply(t, b)
	}
	return resp.StatusCode, code
}

// TestBrowserCrossSiteRequestsRefused sends, through the loopback port,
// what a browser sends on behalf of a page of another site (a text/plain
// form, a no-cors fetch, a request after DNS rebinding) and what the
// dashboard and ordinary clients send, and checks that the first are
// refused before they spend anything: the domain's count is unchanged.
func TestBrowserCrossSiteRequestsRefused(t *testing.T) {
	s, addr, socket := loopbackAgent(t)
	base := "http://" + addr
	port := addr[strings.LastIndexByte(addr, ':'):]
	spend := `{"resource":"t/gcra","domain":"victim"}`
	tcp := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(tcp.CloseIdleConnections)

	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		headers      []string
		status       int
		code         string
		spends       bool
	}{
		// Refused.
		{"text/plain form", "POST", "/v1/request", spend, []string{"Content-Type: text/plain", "Origin: http://evil.example", "Sec-Fetch-Site: cross-site"}, 403, "forbidden", false},
		{"text/plain body, no Origin", "POST", "/v1/request", spend, []string{"Content-Type: text/plain;charset=UTF-8"}, 415, "unsupported_media_type", false},
		{"urlencoded form", "POST", "/v1/request", spend, []string{"Content-Type: application/x-www-form-urlencoded"}, 415, "unsupported_media_type", false},
		{"multipart form", "POST", "/v1/request", spend, []string{"Content-Type: multipart/form-data; boundary=x"}, 415, "unsupported_media_type", false},
		{"a body without a Content-Type", "POST", "/v1/request", spend, nil, 415, "unsupported_media_type", false},
		{"no-cors fetch from another port", "POST", "/v1/request", spend, []string{"Content-Type: application/json", "Origin: http://127.0.0.1:8000", "Sec-Fetch-Site: same-site"}, 403, "forbidden", false},
		{"Origin null", "POST", "/v1/request", spend, []string{"Content-Type: application/json", "Origin: null"}, 403, "forbidden", false},
		{"no-cors reload", "POST", "/v1/config/reload", "", []string{"Origin: http://evil.example", "Sec-Fetch-Site: cross-site"}, 403, "forbidden", false},
		{"img tag GET /v1/check", "GET", "/v1/check?resource=t/gcra&domain=victim", "", []string{"Sec-Fetch-Site: cross-site"}, 403, "forbidden", false},
		{"rebinding: Host evil.example", "GET", "/v1/config", "", []string{"Host: evil.example" + port}, 403, "forbidden", false},
		{"rebinding: Host evil.example, same origin", "POST", "/v1/request", spend, []string{"Host: evil.example" + port, "Content-Type: application/json", "Origin: http://evil.example" + port, "Sec-Fetch-Site: same-origin"}, 403, "forbidden", false},
		{"rebinding: Host of a public address", "GET", "/v1/top?resource=t/gcra", "", []string{"Host: 10.0.0.1" + port}, 403, "forbidden", false},
		{"Host localhost.evil.example", "GET", "/v1/config", "", []string{"Host: localhost.evil.example"}, 403, "forbidden", false},
		// Served.
		{"a client: JSON, no Origin", "POST", "/v1/request", spend, []string{"Content-Type: application/json"}, 200, "", true},
		{"JSON with a charset", "POST", "/v1/request", spend, []string{"Content-Type: Application/JSON; charset=utf-8"}, 200, "", true},
		{"the dashboard's own POST", "POST", "/v1/request", spend, []string{"Content-Type: application/json", "Origin: " + base, "Sec-Fetch-Site: same-origin"}, 200, "", true},
		{"the dashboard's own GET", "GET", "/v1/config", "", []string{"Sec-Fetch-Site: same-origin"}, 200, "", false},
		{"Host localhost", "GET", "/v1/config", "", []string{"Host: localhost" + port}, 200, "", false},
		{"Host a.localhost", "GET", "/v1/config", "", []string{"Host: dash.localhost"}, 200, "", false},
		{"Host [::1]", "GET", "/v1/config", "", []string{"Host: [::1]" + port}, 200, "", false},
		{"Host 127.1.2.3", "GET", "/v1/config", "", []string{"Host: 127.1.2.3"}, 200, "", false},
		{"a typed address", "GET", "/", "", []string{"Sec-Fetch-Site: none"}, 200, "", false},
		{"a link from another site to the dashboard", "GET", "/", "", []string{"Sec-Fetch-Site: cross-site"}, 200, "", false},
		{"a POST without a body", "POST", "/v1/sessions", "", nil, 200, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tat(t, s)
			status, code := send(t, tcp, base, tc.method, tc.path, tc.body, tc.headers...)
			if status != tc.status || code != tc.code {
				t.Fatalf("%d %q, want %d %q", status, code, tc.status, tc.code)
			}
			after := tat(t, s)
			if spent := !after.Equal(before); spent != tc.spends {
				t.Errorf("the victim's bucket (TAT %v → %v): spent %v, want %v", before, after, spent, tc.spends)
			}
		})
	}

	// The socket: no browser reaches it, so Host and Origin are not
	// checked (a proxy may pass on its client's), but the body type is.
	if status, _ := send(t, socket, "http://obol", "GET", "/v1/config", "", "Origin: http://evil.example"); status != 200 {
		t.Errorf("socket, Host obol with an Origin: %d, want 200", status)
	}
	if status, code := send(t, socket, "http://obol", "POST", "/v1/request", spend, "Content-Type: text/plain"); status != 415 || code != "unsupported_media_type" {
		t.Errorf("socket, text/plain: %d %q, want 415 unsupported_media_type", status, code)
	}
}

// tat returns the theoretical arrival time of t/gcra's bucket for the
// domain victim: it moves on with every copy spent (the clock stands still).
func tat(t *testing.T, s *Server) time.Time {
	t.Helper()
	st, err := s.Engine().State(t0, "t/gcra", "victim")
	if err != nil {
		t.Fatal(err)
	}
	return st.TAT
}

// TestOwnHost checks the Host rule on a loopback and a public listener.
func TestOwnHost(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}
	public := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 7070}
	for _, tc := range []struct {
		host   string
		local  *net.TCPAddr
		authed bool
		want   bool
	}{
		{"127.0.0.1:7070", loop, false, true},
		{"127.0.0.1", loop, false, true},
		{"LOCALHOST:7070", loop, false, true},
		{"localhost.", loop, false, true},
		{"[::1]:7070", loop, false, true},
		{"[::ffff:127.0.0.1]", loop, false, true},
		{"evil.example:7070", loop, false, false},
		{"evillocalhost", loop, false, false},
		{"10.1.2.3:7070", loop, false, false},
		{"[::1", loop, false, false},
		{"[::1]x", loop, false, false},
		{":7070", loop, false, false},
		{"127.0.0.1:70700000", loop, false, false},
		{"10.1.2.3:7070", public, false, true},
		{"10.1.2.4:7070", public, false, false},
		{"obol.ns.svc.cluster.local:7070", public, false, false},
		{"obol.ns.svc.cluster.local:7070", public, true, true}, // the token proves the caller
		{"bad name!", public, true, false},
	} {
		if got := ownHost([]byte(tc.host), tc.local, tc.authed && !tc.local.IP.IsLoopback()); got != tc.want {
			t.Errorf("Host %q on %v (token %v): %v, want %v", tc.host, tc.local, tc.authed, got, tc.want)
		}
	}
}

// TestCheckedRequestAllocations checks that the Host, Origin and body
// type checks allocate nothing on a request that passes them.
func TestCheckedRequestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}
	n := testing.AllocsPerRun(100, func() {
		if !ownHost([]byte("127.0.0.1:7070"), local, false) || !ownHost([]byte("localhost:7070"), local, false) ||
			!sameOrigin([]byte("http://127.0.0.1:7070"), []byte("127.0.0.1:7070")) || !isJSONType([]byte("application/json; charset=utf-8")) {
			t.Fatal("refused")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per check, want 0", n)
	}
}

func TestParseIPv4(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"127.0.0.1", true}, {"255.255.255.255", true}, {"0.0.0.0", true},
		{"256.0.0.1", false}, {"127.0.0", false}, {"127.0.0.1.", false}, {"127.0.0.01", false},
		{"1234.0.0.1", false}, {"a.b.c.d", false}, {"", false}, {"127..0.1", false},
	} {
		ip, ok := parseIP([]byte(tc.in))
		if ok != tc.ok || ok && ip.String() != tc.in {
			t.Errorf("%q: %v %v, want ok %v", tc.in, ip, ok, tc.ok)
		}
	}
}
