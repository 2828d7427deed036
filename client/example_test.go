package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/obol-dev/obol/api"
	"github.com/obol-dev/obol/client"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// sock is the socket of the agent the examples talk to: in production the
// agent's, e.g. /run/obol/obol.sock. TestMain serves one in-process, on a
// clock that stands still, so that the examples' output is fixed.
var sock string

const exampleConfig = `
resources:
  api/search: {kind: tiers, tiers: "5,1,1,0,50,5,5,15"}
  api/export: {kind: gcra, burst: 20, count: 20, period: 1s}
  api/login: {kind: gcra, burst: 2, count: 1, period: 1s}
  api/upstream: {kind: pacer, quota: 4500, period: 1h, jitter: 0}
  jobs/sandbox:
    kind: copies
    domain_limit: 5
    global_limit: 100
    groups: [{name: enterprise, limit: 40, domains: [acme, globex]}]
`

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "obolx")
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := config.Parse([]byte(exampleConfig))
	if err != nil {
		log.Fatal(err)
	}
	// The built-in config's demo/ resources too, for the README's snippet
	// (Example_readme).
	def := config.Default()
	for name, r := range def.Resources {
		cfg.Resources[name] = r
	}
	for name, ns := range def.Namespaces {
		cfg.Namespaces[name] = ns
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := api.New(local.New(cfg), api.Options{Now: func() time.Time { return at }, Logger: slog.New(slog.DiscardHandler)})
	sock = filepath.Join(dir, "obol.sock")
	ls, err := api.Listen(api.ListenConfig{Socket: sock})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ls) }()
	code := m.Run()
	stop()
	<-done
	os.RemoveAll(dir)
	os.Exit(code)
}

func ExampleNew() {
	c, err := client.New(client.Config{Socket: sock}) // or URL: "http://127.0.0.1:7070"
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	d, err := c.Request(context.Background(), "api/export", "10.0.0.2")
	if err != nil {
		log.Fatal(err) // a client error: an unknown resource, a wrong kind, …
	}
	fmt.Println("granted:", d.Granted, "remaining:", d.Remaining)
	// Output: granted: 1 remaining: 19
}

func ExampleClient_Request() {
	c, _ := client.New(client.Config{Socket: sock})
	defer c.Close()
	ctx := context.Background()

	// 60 hits, of which at least 1: tier 1 grants 5, a burst into tier 2
	// grants 50 more.
	d, err := c.Request(ctx, "api/search", "user-42", client.Copies(60), client.MinCopies(1))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("granted:", d.Granted, "tier:", d.Reply.Tier, "burst:", d.Reply.Burst)

	// Now rejected; MaxWait would retry until a grant or the wait is spent.
	d, _ = c.Request(ctx, "api/search", "user-42", client.MaxWait(100*time.Millisecond))
	fmt.Println("granted:", d.Granted, "retry after:", d.RetryAfter, "degraded:", d.Degraded)
	// Output:
	// granted: 55 tier: 2 burst: true
	// granted: 0 retry after: 5s degraded: false
}

func ExampleClient_Reserve() {
	c, _ := client.New(client.Config{Socket: sock})
	defer c.Close() // ends the session: releases whatever is still held

	h, err := c.Reserve(context.Background(), "jobs/sandbox", "acme", client.Copies(2))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release() // releases what is left; idempotent
	if h.Granted == 0 {
		fmt.Println("no slot free")
		return
	}
	fmt.Println("holding", h.Held(), "of", h.Resource, "in groups", h.Groups, "domain holds", h.Reply.DomainHolds)
	// Output: holding 2 of jobs/sandbox in groups [enterprise] domain holds 2
}

func ExampleHold_Transfer() {
	ctx := context.Background()
	producer, _ := client.New(client.Config{Socket: sock})
	defer producer.Close()
	worker, _ := client.New(client.Config{Socket: sock}) // another process
	defer worker.Close()

	h, _ := producer.Reserve(ctx, "jobs/sandbox", "globex", client.Copies(3))
	defer h.Release()
	// Hand one copy over with the job; unseized, it is released after 30 s.
	id, err := h.Transfer(ctx, 1, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	h2, err := worker.Seize(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	defer h2.Release()
	fmt.Println("producer holds", h.Held(), "worker holds", h2.Held(), "of", h2.Resource, "for", h2.Domain)
	// Output: producer holds 2 worker holds 1 of jobs/sandbox for globex
}

func ExampleClient_Multi() {
	c, _ := client.New(client.Config{Socket: sock})
	defer c.Close()

	// A job slot and an export, or neither.
	res, err := c.Multi(context.Background(), client.MultiRequest{
		Reserve: []client.Need{{Resource: "jobs/sandbox", Domain: "initech"}},
		Request: &client.Need{Resource: "api/export", Domain: "initech", Copies: 5},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer res.Release()
	fmt.Println("granted:", res.Granted, "holds:", len(res.Holds), "export remaining:", res.Decision.Remaining)

	// Too much: the slot taken first is given back.
	res2, _ := c.Multi(context.Background(), client.MultiRequest{
		Reserve: []client.Need{{Resource: "jobs/sandbox", Domain: "initech"}},
		Request: &client.Need{Resource: "api/export", Domain: "initech", Copies: 20},
	})
	fmt.Println("granted:", res2.Granted, "rejected by:", res2.RejectedBy)
	// Output:
	// granted: true holds: 1 export remaining: 15
	// granted: false rejected by: api/export
}

func ExampleMiddleware() {
	c, _ := client.New(client.Config{Socket: sock})
	defer c.Close()

	byUser := func(r *http.Request) (resource, domain string, ok bool) {
		user := r.Header.Get("X-User")
		return "api/login", user, user != ""
	}
	h := client.Middleware(c, byUser)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "welcome")
	}))

	for range 3 {
		req := httptest.NewRequest("POST", "/login", nil)
		req.Header.Set("X-User", "mallory")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("RateLimit"))
	}
	// Output:
	// 200  "gcra";r=1;t=1
	// 200  "gcra";r=0;t=1
	// 429 1 "gcra";r=0;t=1
}

func ExampleClient_Batch() {
	c, _ := client.New(client.Config{Socket: sock})
	defer c.Close()

	rs, err := c.Batch(context.Background(), []client.Need{
		{Resource: "api/export", Domain: "batch-a", Copies: 20},
		{Resource: "api/export", Domain: "batch-a"},
		{Resource: "api/unknown", Domain: "batch-a"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range rs {
		if r.Err != nil {
			fmt.Println(i, "error:", errors.Is(r.Err, client.ErrUnknownResource))
			continue
		}
		fmt.Println(i, "granted:", r.Granted)
	}
	// Output:
	// 0 granted: 20
	// 1 granted: 0
	// 2 error: true
}
