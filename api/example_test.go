package api_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/obol-dev/obol/api"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// Serve the API on a loopback port picked by the system and ask for one
// rate decision.
func Example() {
	cfg, err := config.Parse([]byte(`resources: {api/export: {kind: gcra, burst: 20, count: 20, period: 1s}}`))
	if err != nil {
		log.Fatal(err)
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := api.New(local.New(cfg), api.Options{Now: func() time.Time { return at }})
	ls, err := api.Listen(api.ListenConfig{HTTP: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Serve(ctx, ls) }()

	resp, err := http.Post("http://"+ls.HTTPAddr()+"/v1/request", "application/json",
		strings.NewReader(`{"resource": "api/export", "domain": "10.0.0.2"}`))
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// 200 {"granted":1,"remaining":19,"retry_after_ms":0,"reset_after_ms":50,"shadow":false}
}
