package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/obol-dev/obol/client"
)

// Example_readme is the README's Go snippet, as written there, against an
// agent on the built-in config (its demo/ resources).
func Example_readme() {
	ctx := context.Background()
	other, _ := client.New(client.Config{Socket: sock})
	defer other.Close()
	byUser := func(r *http.Request) (resource, domain string, ok bool) {
		return "demo/search", r.Header.Get("X-User"), r.Header.Get("X-User") != ""
	}
	search := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "results") })

	// From the README:
	c, err := client.New(client.Config{Socket: sock}) // or URL: "http://127.0.0.1:7070"
	defer c.Close()                                   // ends the session: every copy still held is released

	d, err := c.Request(ctx, "demo/search", "user-42", client.Copies(3), client.MinCopies(1), client.MaxWait(2*time.Second))
	// err is for client errors only: errors.Is(err, client.ErrUnknownResource), errors.As(err, &apiErr)
	// d.Granted, d.Remaining, d.RetryAfter, d.Degraded, d.Killed, d.Shadow, d.Reply (every reply field)
	fmt.Println("request:", d.Granted, d.Remaining, err)

	h, err := c.Reserve(ctx, "demo/jobs", "acme", client.Copies(2))
	defer h.Release() // releases what is left; idempotent, safe after Transfer
	id, err := h.Transfer(ctx, 1, 30*time.Second)
	h2, err := other.Seize(ctx, id) // in another process
	fmt.Println("reserve:", h.Held(), h2.Held(), err)

	res, err := c.Multi(ctx, client.MultiRequest{ // copies first, the rate-limited one last, or nothing
		Reserve: []client.Need{{Resource: "demo/jobs", Domain: "acme"}},
		Request: &client.Need{Resource: "demo/export", Domain: "acme"},
	})
	fmt.Println("multi:", res.Granted, err)
	res.Release()

	mux := http.NewServeMux()
	mux.Handle("/search", client.Middleware(c, byUser)(search)) // 429 + Retry-After + RateLimit fields
	req := httptest.NewRequest("GET", "/search", nil)
	req.Header.Set("X-User", "user-7")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	fmt.Println("middleware:", rec.Code)
	// Output:
	// request: 3 52 <nil>
	// reserve: 1 1 <nil>
	// multi: true <nil>
	// middleware: 200
}
