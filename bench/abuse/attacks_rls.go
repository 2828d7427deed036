package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/obol-dev/obol/bench/internal/benchkit"
	"github.com/obol-dev/obol/internal/freeport"
	"github.com/obol-dev/obol/rls"
)

// attacks_rls.go replays what a client of Envoy's rate limit service could
// make its counters do (issue 26, items 2, 3, 5 and 6). Each attack starts
// an agent of its own with the service on (gRPC and HTTP/JSON on loopback)
// and probes that agent's socket, idle and during the attack: the probe
// the runner prints watches the runner's agent, which is not attacked.

func init() {
	attacks = append(attacks,
		attack{name: "rlskeys", what: "1.1M distinct descriptor values (calls of 256) fill the RLS store past its cap of 1,048,576; then a key limited to 10 a minute", run: attackRLSKeys},
		attack{name: "wrap", what: "hits_addend 2^64−11 through /json on an over-limit key, then 2^32−1 ten times through gRPC", run: attackWrap},
		attack{name: "replaces", what: "one call of 50,000 descriptors hitting a replaced limit, then three clients sending calls of 256 in a loop", run: attackReplaces},
		attack{name: "sizes", what: "100 calls with 4 MB descriptor values and 20 calls of 1 MB detailed_metric values, over gRPC", run: attackSizes},
	)
}

const rlsAbuseConfig = `domain: abuse
descriptors:
  - key: ip
    rate_limit: {unit: year, requests_per_unit: 1000}
  - key: victim
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: yearly
    rate_limit: {unit: year, requests_per_unit: 10}
  - key: named
    rate_limit: {unit: minute, requests_per_unit: 1000000, name: named}
  - key: replacer
    rate_limit: {unit: minute, requests_per_unit: 1000000, replaces: [{name: named}]}
  - key: det
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
`

// rlsAgent is an agent with the rate limit service on.
type rlsAgent struct {
	*agentProc
	http, status string // host:port of /json and of /metrics
	conn         *grpc.ClientConn
	client       rlpb.RateLimitServiceClient
}

func startRLSAgent(a *agentProc) (*rlsAgent, error) {
	dir := filepath.Join(a.dir, fmt.Sprintf("rls-%d", time.Now().UnixNano()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "abuse.yaml"), []byte(rlsAbuseConfig), 0o600); err != nil {
		return nil, err
	}
	pg, _ := freeport.Loopback()
	ph, _ := freeport.Loopback()
	ps, _ := freeport.Loopback()
	r := &rlsAgent{http: fmt.Sprintf("127.0.0.1:%d", ph), status: fmt.Sprintf("127.0.0.1:%d", ps)}
	p, err := startAgent(a.bin, a.dir, "--http", r.status, "--rls-config", dir,
		"--rls-grpc", fmt.Sprintf("127.0.0.1:%d", pg), "--rls-http", r.http)
	if err != nil {
		return nil, err
	}
	r.agentProc = p
	if benchkit.Poll(context.Background(), 5*time.Second, 50*time.Millisecond, func() error {
		resp, err := http.Get("http://" + r.http + "/healthcheck")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("healthcheck: status %d", resp.StatusCode)
		}
		return nil
	}) != nil {
		p.stop()
		return nil, fmt.Errorf("the rate limit service did not answer in 5 s: %s", p.stderr.String())
	}
	r.conn, err = grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", pg), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		p.stop()
		return nil, err
	}
	r.client = rlpb.NewRateLimitServiceClient(r.conn)
	return r, nil
}

func (r *rlsAgent) close() {
	_ = r.conn.Close()
	r.stop()
}

func rlsDesc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (r *rlsAgent) call(ds ...*rlv3.RateLimitDescriptor) (*rlpb.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.client.ShouldRateLimit(ctx, &rlpb.RateLimitRequest{Domain: "abuse", Descriptors: ds})
}

// hitsToOver sends hits of key victim value v until the n-th and reports
// the codes seen.
func (r *rlsAgent) hits(key, v string, n int) ([]rlpb.RateLimitResponse_Code, error) {
	var out []rlpb.RateLimitResponse_Code
	for range n {
		resp, err := r.call(rlsDesc(key, v))
		if err != nil {
			return out, err
		}
		out = append(out, resp.GetOverallCode())
	}
	return out, nil
}

// limitedTo10 checks that key/v gets 10 OKs then OVER_LIMIT.
func (r *rlsAgent) limitedTo10(key, v string) error {
	codes, err := r.hits(key, v, 11)
	if err != nil {
		return err
	}
	for i, c := range codes {
		want := rlpb.RateLimitResponse_OK
		if i == 10 {
			want = rlpb.RateLimitResponse_OVER_LIMIT
		}
		if c != want {
			return fmt.Errorf("hit %d of %s=%s (10 a minute): %v, want %v", i+1, key, v, c, want)
		}
	}
	return nil
}

// metric returns the value of an unlabelled metric of the agent's /metrics
// and the size of the page.
func (r *rlsAgent) metric(name string) (string, int) {
	resp, err := http.Get("http://" + r.status + "/metrics")
	if err != nil {
		return "?", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v, len(b)
		}
	}
	return "absent", len(b)
}

// cpuOf returns a process's user + system CPU time (0 if unknown).
func cpuOf(pid int) time.Duration {
	d, _ := benchkit.CPUTime(pid)
	return d
}

// probeDuring probes r's socket for d, idle first, then while attack runs;
// it returns the attack's error and the probe's figures.
func probeDuring(ctx context.Context, r *rlsAgent, attack func() error) (string, error) {
	d := time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = max(time.Until(dl)/2, 500*time.Millisecond)
	}
	idle := probeProcess(context.Background(), r.agentProc, d)
	done := make(chan error, 1)
	var during latency
	pctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); during = probeProcess(pctx, r.agentProc, d) }()
	go func() { done <- attack() }()
	err := <-done
	cancel()
	wg.Wait()
	ratio := float64(during.p99) / float64(max(idle.p99, time.Microsecond))
	return fmt.Sprintf("its own agent's probe: idle p99 %v, during p99 %v (×%.2f, %d probes)", idle.p99, during.p99, ratio, during.n), err
}

// attackRLSKeys: 1.05M distinct values filled the store's fixed cap, after
// which every new key was decided as if empty: a key limited to 10 a
// minute got OK 15 times in 15. Here 1.1M values (a year's limit: none
// idle) are sent in calls of 256; the victim, a new key, must be refused
// on its 11th hit, and the metrics must show the cap and the overflow.
func attackRLSKeys(ctx context.Context, a *agentProc) (string, error) {
	r, err := startRLSAgent(a)
	if err != nil {
		return "", err
	}
	defer r.close()
	const total, per, workers = 1_100_000, 256, 4
	var next atomic.Int64
	var sent atomic.Int64
	start := time.Now()
	fig, err := probeDuring(ctx, r, func() error {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first error
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ds := make([]*rlv3.RateLimitDescriptor, per)
				for {
					from := next.Add(per) - per
					if from >= total {
						return
					}
					for i := range ds {
						ds[i] = rlsDesc("ip", "10."+strconv.FormatInt(from+int64(i), 10))
					}
					if _, err := r.call(ds...); err != nil {
						mu.Lock()
						first = cmp(first, err)
						mu.Unlock()
						return
					}
					sent.Add(per)
				}
			}()
		}
		wg.Wait()
		return first
	})
	fill := time.Since(start)
	if err != nil {
		return fig, err
	}
	keys, _ := r.metric("obol_rls_keys")
	capv, _ := r.metric("obol_rls_keys_max")
	over, _ := r.metric("obol_rls_overflow_total")
	err = r.limitedTo10("victim", "after-the-fill")
	fig = fmt.Sprintf("%d values sent in %v; obol_rls_keys %s of obol_rls_keys_max %s, obol_rls_overflow_total %s; the victim: %v; %s",
		sent.Load(), fill.Round(time.Millisecond), keys, capv, over, errOr(err, "10 OK, 11th OVER_LIMIT"), fig)
	if err == nil && (capv != "1.048576e+06" || over == "0" || over == "absent") {
		err = errors.New("the metrics do not show the cap and the overflow")
	}
	return fig, err
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

// attackWrap: a hits_addend of 2^64−11 through /json turned an over-limit
// key back to OK. Here the victim is put over its limit, then the same
// body is posted: it must be refused (400 naming hits_addend) and the key
// must stay over; then ten calls of the largest accepted hits_addend
// (2^32−1) over gRPC must leave it over (the count saturates).
func attackWrap(ctx context.Context, a *agentProc) (string, error) {
	r, err := startRLSAgent(a)
	if err != nil {
		return "", err
	}
	defer r.close()
	var status int
	var body string
	var after rlpb.RateLimitResponse_Code
	fig, err := probeDuring(ctx, r, func() error {
		if _, err := r.hits("yearly", "w", 11); err != nil {
			return err
		}
		wrap := `{"domain":"abuse","descriptors":[{"entries":[{"key":"yearly","value":"w"}],"hits_addend":"` + strconv.FormatUint(math.MaxUint64-10, 10) + `"}]}`
		resp, err := http.Post("http://"+r.http+"/json", "application/json", strings.NewReader(wrap))
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status, body = resp.StatusCode, strings.TrimSpace(string(b))
		d := rlsDesc("yearly", "w")
		d.HitsAddend = wrapperspb.UInt64(rls.MaxHitsAddend)
		for range 10 {
			if _, err := r.call(d); err != nil {
				return err
			}
		}
		resp2, err := r.call(rlsDesc("yearly", "w"))
		if err != nil {
			return err
		}
		after = resp2.GetOverallCode()
		return nil
	})
	fig = fmt.Sprintf("/json with hits_addend 2^64−11: %d %q; after 10 × 2^32−1 more: %v; %s", status, body, after, fig)
	switch {
	case err != nil:
		return fig, err
	case status != 400 || !strings.Contains(body, "hits_addend"):
		return fig, errors.New("the wrapping hits_addend was not refused")
	case after != rlpb.RateLimitResponse_OVER_LIMIT:
		return fig, errors.New("the key came back under its limit")
	}
	return fig, nil
}

// attackReplaces: 50,000 descriptors hitting a named limit took 10.3 s of
// CPU in one call (each checked against every other). Here that call must
// be refused at once (more descriptors than allowed) and three clients
// sending the largest allowed calls, each with a replacer, must cost
// little CPU per descriptor.
func attackReplaces(ctx context.Context, a *agentProc) (string, error) {
	r, err := startRLSAgent(a)
	if err != nil {
		return "", err
	}
	defer r.close()
	big := make([]*rlv3.RateLimitDescriptor, 50_000)
	for i := range big {
		big[i] = rlsDesc("named", strconv.Itoa(i))
	}
	big[len(big)-1] = rlsDesc("replacer", "x")
	t := time.Now()
	_, bigErr := r.call(big...)
	bigTook := time.Since(t)
	var calls atomic.Int64
	cpu0 := cpuOf(r.cmd.Process.Pid)
	fig, err := probeDuring(ctx, r, func() error {
		var wg sync.WaitGroup
		stop := time.Now().Add(2 * time.Second)
		if dl, ok := ctx.Deadline(); ok {
			stop = dl.Add(-100 * time.Millisecond)
		}
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ds := make([]*rlv3.RateLimitDescriptor, rls.DefaultMaxDescriptors)
				for i := range ds {
					ds[i] = rlsDesc("named", strconv.Itoa(w*1000+i))
				}
				ds[len(ds)-1] = rlsDesc("replacer", "x")
				for time.Now().Before(stop) {
					if _, err := r.call(ds...); err != nil {
						return
					}
					calls.Add(1)
				}
			}()
		}
		wg.Wait()
		return nil
	})
	cpu := cpuOf(r.cmd.Process.Pid) - cpu0
	n := calls.Load() * rls.DefaultMaxDescriptors
	per := time.Duration(0)
	if n > 0 {
		per = cpu / time.Duration(n)
	}
	fig = fmt.Sprintf("the 50,000-descriptor call: %v in %v; then %d calls of 256: agent CPU %v, %v a descriptor; %s",
		errOr(bigErr, "accepted"), bigTook.Round(time.Millisecond), calls.Load(), cpu.Round(time.Millisecond), per, fig)
	switch {
	case bigErr == nil || !strings.Contains(bigErr.Error(), "at most 256"):
		return fig, errors.New("the 50,000-descriptor call was not refused naming the bound")
	case calls.Load() == 0:
		return fig, errors.New("no call of 256 descriptors was answered")
	case per > 50*time.Microsecond:
		return fig, fmt.Errorf("%v of CPU a descriptor", per)
	}
	return fig, err
}

// attackSizes: 100 calls of 4 MB values kept 690 MB for a year, and 20
// detailed_metric values of 1 MB made /metrics 100 MB. Here both must be
// refused naming the bound (the gRPC message cap of 1 MiB), 64 KB values
// too (the entry bound of 4,096 bytes), and the agent's memory and
// /metrics must not grow with them.
func attackSizes(ctx context.Context, a *agentProc) (string, error) {
	r, err := startRLSAgent(a)
	if err != nil {
		return "", err
	}
	defer r.close()
	_, page0 := r.metric("obol_rls_keys")
	rss0 := rssOf(r.cmd.Process.Pid)
	var refused, accepted int
	var msg, entryMsg string
	fig, err := probeDuring(ctx, r, func() error {
		four := strings.Repeat("v", 4_000_000)
		for i := range 100 {
			_, err := r.call(rlsDesc("victim", four[:len(four)-8]+fmt.Sprintf("%08d", i)))
			if err != nil {
				refused++
				msg = err.Error()
			} else {
				accepted++
			}
		}
		one := strings.Repeat("m", 1<<20)
		for i := range 20 {
			if _, err := r.call(rlsDesc("det", one+strconv.Itoa(i))); err != nil {
				refused++
			} else {
				accepted++
			}
		}
		// Values under the gRPC message cap (1 MiB), over an entry's
		// bound: refused by the entry bound itself.
		sixtyFour := strings.Repeat("e", 64<<10)
		for i := range 20 {
			if _, err := r.call(rlsDesc("victim", sixtyFour+strconv.Itoa(i))); err != nil {
				refused++
				entryMsg = err.Error()
			} else {
				accepted++
			}
		}
		return nil
	})
	rss1 := rssOf(r.cmd.Process.Pid)
	_, page1 := r.metric("obol_rls_keys")
	fig = fmt.Sprintf("%d refused, %d accepted (4 MB: %q; 64 KB: %q); RSS %d → %d MB; /metrics %d → %d bytes; %s",
		refused, accepted, msg, entryMsg, rss0>>20, rss1>>20, page0, page1, fig)
	switch {
	case err != nil:
		return fig, err
	case accepted != 0 || !strings.Contains(msg, "larger than max") || !strings.Contains(entryMsg, "at most 4096"):
		// A 4 MB call is refused by the gRPC message cap (1 MiB), a 64 KB
		// value by the entry bound (4,096 bytes): each names its bound.
		return fig, errors.New("an oversized descriptor was accepted, or its refusal names no bound")
	case page1 > page0+64<<10:
		return fig, errors.New("/metrics grew with the refused values")
	}
	return fig, nil
}
