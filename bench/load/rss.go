package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// rss.go measures the agent's resident memory after it has tracked many gcra
// keys: it drives that many distinct domains through /v1/batch (one token
// each, on a resource that refills so slowly that no key is dropped), then
// reads VmRSS from /proc/PID/status.

// rssBatch is how many keys one /v1/batch request creates (its body stays
// well under the agent's 64 KiB limit).
const rssBatch = 500

// rssTimeLimit bounds the RSS phase.
const rssTimeLimit = 60 * time.Second

// rssResult is the RSS measurement.
type rssResult struct {
	keys          int    // keys asked for
	driven        int64  // keys whose request was answered
	via           string // how they were driven
	before, after benchkit.Status
	statusErr     error
	errors        int64
	firstErr      string
	elapsed       time.Duration
	unavailable   string
}

// driveKeys creates keys distinct domains of resource in the agent, over
// conns connections: through /v1/batch JSON when batch is true, else one
// /v1/request JSON per key. It stops after rssTimeLimit.
func driveKeys(ctx context.Context, srv *server, tcp bool, conns, keys int, resource string, batch bool) rssResult {
	res := rssResult{keys: keys, via: "/v1/batch json"}
	per := rssBatch
	sc := scenario{enc: encJSON, batch: rssBatch}
	if !batch {
		per, sc, res.via = 1, scenario{enc: encJSON}, "/v1/request json (no /v1/batch)"
	}
	var err error
	if res.before, err = benchkit.ReadStatus(srv.pid); err != nil {
		res.statusErr = err
	}
	ctx, cancel := context.WithTimeout(ctx, rssTimeLimit)
	defer cancel()
	start := time.Now()
	var next, driven, errs atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	fail := func(msg string) {
		errs.Add(1)
		mu.Lock()
		if res.firstErr == "" {
			res.firstErr = msg
		}
		mu.Unlock()
	}
	for range conns {
		hc, err := srv.client(tcp)
		if err != nil {
			res.unavailable = err.Error()
			return res
		}
		wg.Go(func() {
			defer hc.CloseIdleConnections()
			req := newRequest(sc)
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for ctx.Err() == nil {
				from := int(next.Add(int64(per))) - per
				if from >= keys {
					return
				}
				n := min(per, keys-from)
				var body []byte
				var err error
				item := sc
				if batch {
					item.batch = n
					body, err = keysBody(encJSON, resource, from, n)
				} else {
					body, err = keysBody(encJSON, resource, from, 0)
				}
				if err != nil {
					fail(err.Error())
					return
				}
				req.SetBodyRaw(body)
				if err := hc.DoTimeout(req, resp, clientTimeout); err != nil {
					fail("transport: " + err.Error())
					continue
				}
				if resp.StatusCode() != fasthttp.StatusOK {
					fail(describeStatus(resp.StatusCode(), resp.Header.ContentType(), resp.Body()))
					continue
				}
				if _, _, err := checkReply(item, resp.Body()); err != nil {
					fail(err.Error())
					continue
				}
				driven.Add(int64(n))
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.driven, res.errors = driven.Load(), errs.Load()
	if res.after, err = benchkit.ReadStatus(srv.pid); err != nil && res.statusErr == nil {
		res.statusErr = err
	}
	return res
}

// write prints the RSS measurement.
func (r *rssResult) write(w io.Writer) {
	if r.unavailable != "" {
		fmt.Fprintf(w, "RSS: not measured: %s\n", r.unavailable)
		return
	}
	if r.statusErr != nil {
		fmt.Fprintf(w, "RSS: cannot read the agent's /proc status: %v\n", r.statusErr)
		return
	}
	perKey := "-"
	if r.driven > 0 {
		perKey = fmt.Sprintf("%.0f B/key", float64(r.after.RSSKiB-r.before.RSSKiB)*1024/float64(r.driven))
	}
	fmt.Fprintf(w, "RSS: agent %s after tracking %d gcra keys (was %s before them: +%s, %s; %d threads; keys driven via %s in %.1fs, %d errors)\n",
		mib(r.after.RSSKiB), r.driven, mib(r.before.RSSKiB), mib(r.after.RSSKiB-r.before.RSSKiB), perKey,
		r.after.Threads, r.via, r.elapsed.Seconds(), r.errors)
	if int(r.driven) < r.keys {
		fmt.Fprintf(w, "! RSS: only %d of %d keys were driven (time limit %s or errors)\n", r.driven, r.keys, rssTimeLimit)
	}
	if r.errors > 0 {
		fmt.Fprintf(w, "! RSS: %d errors, the first: %s\n", r.errors, r.firstErr)
	}
}
