package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/obol-dev/obol/client"
)

// An http.Client whose requests to a rate-limited API are paced by the
// agent's pacer resource api/upstream (kind pacer, quota 4500 an hour):
// each request waits as the agent says, and its reply is reported back.
func ExampleClient_PacedTransport() {
	c, err := client.New(client.Config{Socket: sock})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The paced API; here a stand-in whose quota is spent.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit", `"hour";r=0;t=3600`)
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer upstream.Close()

	hc := &http.Client{Transport: c.PacedTransport("api/upstream", nil)}
	resp, err := hc.Get(upstream.URL) // the first request goes at once
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("status:", resp.StatusCode)

	// The 429 told the agent the quota is empty: the next request waits
	// (the agent's clock stands still in this example).
	wait, err := c.Pace(context.Background(), "api/upstream")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next wait:", wait)
	// Output:
	// status: 429
	// next wait: 2.465s
}
