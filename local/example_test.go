package local_test

import (
	"fmt"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// A tiers resource: 5 hits a second, then a burst tier of 10 more over
// five seconds, active five seconds, after which it cools down for ten.
// Every decision takes its instant: here, virtual time.
func ExampleEngine_Request() {
	cfg, err := config.Parse([]byte(`
resources:
  api/search:
    kind: tiers
    tiers: "5,1,1,0,10,5,5,10"
`))
	if err != nil {
		panic(err)
	}
	e := local.New(cfg)
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		at     time.Duration
		copies int
	}{{0, 4}, {100 * time.Millisecond, 4}, {200 * time.Millisecond, 10}, {time.Second, 1}} {
		d, err := e.Request(t0.Add(step.at), "api/search", "tenant-42", step.copies, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("+%v ask %d: granted %d, tier %d, burst %v, remaining %d, retry after %v\n",
			step.at, step.copies, d.Granted, d.Tier, d.Burst, d.Remaining, d.RetryAfter)
	}
	// Output:
	// +0s ask 4: granted 4, tier 1, burst true, remaining 11, retry after 0s
	// +100ms ask 4: granted 4, tier 2, burst true, remaining 7, retry after 0s
	// +200ms ask 10: granted 7, tier 2, burst false, remaining 0, retry after 4.9s
	// +1s ask 1: granted 0, tier 2, burst false, remaining 0, retry after 4.1s
}

// A gcra bucket of 2, refilled one token a second: a refund gives a token
// back.
func ExampleEngine_Refund() {
	cfg, err := config.Parse([]byte(`
resources:
  api/export:
    kind: gcra
    burst: 2
    count: 1
    period: 1s
`))
	if err != nil {
		panic(err)
	}
	e := local.New(cfg)
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	d, _ := e.Request(t0, "api/export", "10.0.0.2", 2, 2)
	fmt.Println("granted", d.Granted, "remaining", d.Remaining)
	left, _ := e.Refund(t0, "api/export", "10.0.0.2", 1)
	fmt.Println("after a refund of 1, remaining", left)
	d, _ = e.Request(t0.Add(500*time.Millisecond), "api/export", "10.0.0.2", 2, 1)
	fmt.Println("granted", d.Granted, "retry after", d.RetryAfter)
	// Output:
	// granted 2 remaining 0
	// after a refund of 1, remaining 1
	// granted 1 retry after 500ms
}
