package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/config"
)

// attacks_limits.go replays a hostile client of limits set by the request
// (issue 29, item 1): four clients send, in a loop, a
// request whose limit is new every time (a new definition, and a limit
// the agent has never parsed), in a namespace that allows them, with caps
// lowered so that the run reaches them. The defence holds when the caps
// hold (too_many once max_request_limits definitions are kept, naming
// the cap), the agent's memory grows by less than 50 MB (the 2,000
// definitions take about 16 MB), and the probe's p99 stays within 2× of
// idle.

func init() {
	attacks = append(attacks,
		attack{name: "limits", what: "four clients send a request with a new limit set by the request every time (a new definition, never parsed before), past the namespace's caps", run: attackLimits, latency: true, agentArgs: limitsAgentArgs},
	)
}

// limitsAgentArgs runs the agent on the built-in config with a namespace
// that allows limits set by requests, capped at 2,000 definitions and
// 20,000 keys.
func limitsAgentArgs(dir string) ([]string, error) {
	yaml := string(config.DefaultYAML())
	const ns = "\nnamespaces:\n"
	if !strings.Contains(yaml, ns) {
		return nil, fmt.Errorf("the built-in config has no namespaces section to add to")
	}
	yaml = strings.Replace(yaml, ns, ns+"  rq: {request_limits: true, max_request_limits: 2000, max_request_keys: 20000}\n", 1)
	path := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	return []string{"--config", path}, nil
}

func attackLimits(ctx context.Context, a *agentProc) (string, error) {
	bg := context.Background()
	rss0 := rssOf(a.cmd.Process.Pid)
	var sent, granted, tooMany, other atomic.Int64
	var lastOther atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				n := strconv.Itoa(w*10_000_000 + i)
				body := `{"resource":"rq/x` + n + `","domain":"d` + n + `","limit":{"kind":"gcra","burst":` + strconv.Itoa(1+i%1000) + `,"count":1,"period":"1s"}}`
				code, b, err := a.post(bg, "/v1/request", body)
				if err != nil {
					continue
				}
				sent.Add(1)
				switch {
				case code == 200:
					granted.Add(1)
				case code == 429 && strings.Contains(string(b), "max_request_limits"):
					tooMany.Add(1)
				default:
					other.Add(1)
					lastOther.Store(fmt.Sprintf("%d %s", code, b))
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	rss1 := rssOf(a.cmd.Process.Pid)
	fig := fmt.Sprintf("%d requests (%.0f/s), %d granted, %d too_many naming max_request_limits, %d other; RSS %d → %d MB",
		sent.Load(), float64(sent.Load())/took.Seconds(), granted.Load(), tooMany.Load(), other.Load(), rss0>>20, rss1>>20)
	switch {
	case other.Load() > 0:
		return fig, fmt.Errorf("an answer that is neither a grant nor the cap: %v", lastOther.Load())
	case granted.Load() > 2000:
		return fig, fmt.Errorf("%d definitions granted, over the cap of 2000", granted.Load())
	case tooMany.Load() == 0:
		return fig, fmt.Errorf("the cap of definitions was never reached in %v", took.Round(time.Millisecond))
	case rss1-rss0 > 50<<20:
		return fig, fmt.Errorf("RSS grew by %d MB", (rss1-rss0)>>20)
	}
	return fig, nil
}
