package api

import (
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/await"
)

// TestConnectionErrorsAreCounted: the counter is on /metrics.
func TestConnectionErrorsAreCounted(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		c, err := h.dial()
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("GET /v1/state HTTP/1.1\r\nHost: x\r\nX-Half"))
		c.Close()
	}
	// Each of the first messages (the burst) is logged once counted.
	await.Until(t, 5*time.Second, "three connection errors counted", &h.logs.Signal, func() bool { return h.srv.connLog.Seen() >= 3 })
	r := h.do("GET", "/metrics", "")
	if !strings.Contains(string(r.body), "obol_http_connection_errors_total 3") {
		t.Errorf("metrics: %s", grepLine(string(r.body), "obol_http_connection_errors_total"))
	}
}

func grepLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return "(missing)"
}
