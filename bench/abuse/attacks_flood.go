package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// attacks_flood.go is the yardstick of the others: four clients ask for
// the cheapest decision there is (a configured resource, a new domain
// each time) as fast as they are answered, with nothing hostile in the
// requests. What it does to the probe's p99 is what any permitted client's
// load does, with the agent and the probe sharing one processor: an
// attack that costs the agent no more per request than a decision cannot
// do better.

func init() {
	attacks = append(attacks,
		attack{name: "flood", what: "the yardstick: four clients ask for plain decisions (demo/search, a new domain each time) as fast as they are answered", run: attackFlood, latency: true},
	)
}

func attackFlood(ctx context.Context, a *agentProc) (string, error) {
	bg := context.Background()
	var sent, ok atomic.Int64
	var lastOther atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				body := `{"resource":"demo/search","domain":"f` + strconv.Itoa(w*10_000_000+i) + `"}`
				code, b, err := a.post(bg, "/v1/request", body)
				if err != nil {
					continue
				}
				sent.Add(1)
				if code == 200 {
					ok.Add(1)
				} else {
					lastOther.Store(fmt.Sprintf("%d %s", code, b))
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	fig := fmt.Sprintf("%d decisions (%.0f/s), %d answered 200", sent.Load(), float64(sent.Load())/took.Seconds(), ok.Load())
	if ok.Load() != sent.Load() {
		return fig, fmt.Errorf("a decision not answered 200: %v", lastOther.Load())
	}
	return fig, nil
}
