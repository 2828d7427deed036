package rls

import (
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// stats.go counts decisions under envoyproxy/ratelimit's metric names,
// ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,
// within_limit,shadow_mode}{domain,key}, where key is the descriptor's
// place in the config ("domain.key_value.key"): one series per configured
// limit, so cardinality is the config's size. A limit with detailed_metric
// gets one series per counter (key = "domain_key_value_key_value", the
// request's values), up to maxDetailed per limit; past it, its counters
// share the limit's series. Descriptors carrying their own limit are not
// counted: their keys are the request's, unbounded. Counters are atomics read at scrape
// time: a decision takes no lock.

// maxDetailed is the most series a detailed_metric limit gets, and
// maxDetailedTotal the most all of them get together: past either, a
// counter's decisions count in its limit's own series (the overflow
// series: "domain.key_value.key", as without detailed_metric).
const (
	maxDetailed      = 1000
	maxDetailedTotal = 10_000
)

// maxLabel is the longest key label of a detailed series, in bytes: a
// longer one keeps its first maxLabel−17 bytes, then '#' and 16 hex digits
// of a 64-bit FNV-1a hash of the whole, so that distinct long keys keep
// distinct series. /metrics then stays under about maxDetailedTotal × 5
// series × (maxLabel + 100) bytes (15 MB) whatever the values.
const maxLabel = 256

type counters struct {
	domain, key                       string
	total, over, near, within, shadow atomic.Uint64
}

func (c *counters) add(t tally) {
	c.total.Add(t.total)
	if t.over > 0 {
		c.over.Add(t.over)
	}
	if t.near > 0 {
		c.near.Add(t.near)
	}
	if t.within > 0 {
		c.within.Add(t.within)
	}
	if t.shadow > 0 {
		c.shadow.Add(t.shadow)
	}
}

// Stats holds the service's metrics. Safe for concurrent use.
type Stats struct {
	mu     sync.RWMutex
	byPath map[string]*counters // kept across reloads: counters never go back
	perID  atomic.Pointer[[]*counters]

	detMu    sync.RWMutex
	detailed map[string]*counters
	detCount map[string]int // series per limit path

	// store is the service's counters, whose size and cap are exported.
	store *Store

	globalShadow atomic.Uint64
}

func newStats() *Stats {
	s := &Stats{byPath: map[string]*counters{}, detailed: map[string]*counters{}, detCount: map[string]int{}}
	empty := []*counters{}
	s.perID.Store(&empty)
	return s
}

func (s *Stats) setConfig(cfg *Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]*counters, len(cfg.limits))
	for i, l := range cfg.limits {
		c := s.byPath[l.Path]
		if c == nil {
			dom := l.Path
			for j := 0; j < len(dom); j++ {
				if dom[j] == '.' {
					dom = dom[:j]
					break
				}
			}
			c = &counters{domain: dom, key: l.Path}
			s.byPath[l.Path] = c
		}
		ids[i] = c
	}
	s.perID.Store(&ids)
}

// observe counts one decision of limit l whose counter went from before to
// after with hits hits; key is its counter's key (the unit's digit, then
// "domain_key_value_").
func (s *Stats) observe(l *Limit, key []byte, before, after, hits uint64, ratio float32) {
	ids := *s.perID.Load()
	if l.id < 0 || l.id >= len(ids) {
		return
	}
	c := ids[l.id]
	if l.Detailed && len(key) > 1 {
		c = s.detailedOf(c, l, key)
	}
	c.add(count(before, after, hits, l.Requests, nearThreshold(l.Requests, ratio), l.Shadow))
}

// observeExt counts one decision of extension limit l: its hits are over
// or within (an obol kind has no near-limit ratio).
func (s *Stats) observeExt(l *Limit, key []byte, hits uint64, over bool) {
	ids := *s.perID.Load()
	if l.id < 0 || l.id >= len(ids) {
		return
	}
	c := ids[l.id]
	if l.Detailed && len(key) > 1 {
		c = s.detailedOf(c, l, key)
	}
	t := tally{total: hits, within: hits}
	if over {
		t.over, t.within = hits, 0
		if l.Shadow {
			t.shadow = hits
		}
	}
	c.add(t)
}

func (s *Stats) detailedOf(c *counters, l *Limit, key []byte) *counters {
	s.detMu.RLock()
	d := s.detailed[string(key)]
	s.detMu.RUnlock()
	if d != nil {
		return d
	}
	s.detMu.Lock()
	defer s.detMu.Unlock()
	if d := s.detailed[string(key)]; d != nil {
		return d
	}
	if s.detCount[l.Path] >= maxDetailed || len(s.detailed) >= maxDetailedTotal {
		return c
	}
	s.detCount[l.Path]++
	d = &counters{domain: c.domain, key: detailedLabel(key)}
	s.detailed[string(key)] = d
	return d
}

// detailedLabel returns the key label of the detailed series of counter
// key (the unit's digit, then "domain_key_value_"): without the digit and
// the last '_', at most maxLabel bytes.
func detailedLabel(key []byte) string {
	label := key[1:]
	if n := len(label); n > 0 && label[n-1] == '_' {
		label = label[:n-1]
	}
	if len(label) <= maxLabel {
		return string(label)
	}
	h := fnv.New64a()
	_, _ = h.Write(label)
	b := append([]byte(nil), label[:maxLabel-17]...)
	b = append(b, '#')
	sum := h.Sum64()
	for i := len(strconv.FormatUint(sum, 16)); i < 16; i++ {
		b = append(b, '0')
	}
	return string(strconv.AppendUint(b, sum, 16))
}

var (
	descKeys     = prometheus.NewDesc("obol_rls_keys", "Counters the rate limit service's store keeps now.", nil, nil)
	descKeysMax  = prometheus.NewDesc("obol_rls_keys_max", "The most counters the store keeps (the cap).", nil, nil)
	descEvicted  = prometheus.NewDesc("obol_rls_keys_evicted_total", "Counters dropped, window ended, to make room for a new key at the cap.", nil, nil)
	descOverflow = prometheus.NewDesc("obol_rls_overflow_total", "Decisions and peers' counts of keys past the cap, counted in the overflow table (limited, may over-count).", nil, nil)
)

var (
	descTotal  = prometheus.NewDesc("ratelimit_service_rate_limit_total_hits", "Hits of each configured limit (envoyproxy/ratelimit's name).", []string{"domain", "key"}, nil)
	descOver   = prometheus.NewDesc("ratelimit_service_rate_limit_over_limit", "Hits over each limit.", []string{"domain", "key"}, nil)
	descNear   = prometheus.NewDesc("ratelimit_service_rate_limit_near_limit", "Hits past the near-limit ratio of each limit.", []string{"domain", "key"}, nil)
	descWithin = prometheus.NewDesc("ratelimit_service_rate_limit_within_limit", "Hits within each limit.", []string{"domain", "key"}, nil)
	descShadow = prometheus.NewDesc("ratelimit_service_rate_limit_shadow_mode", "Hits over a limit in shadow mode, let through.", []string{"domain", "key"}, nil)
	descGlobal = prometheus.NewDesc("ratelimit_service_global_shadow_mode", "Requests over a limit let through by the global shadow mode.", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *Stats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTotal, descOver, descNear, descWithin, descShadow, descGlobal, descKeys, descKeysMax, descEvicted, descOverflow} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *Stats) Collect(ch chan<- prometheus.Metric) {
	emit := func(c *counters) {
		for _, m := range []struct {
			d *prometheus.Desc
			v uint64
		}{{descTotal, c.total.Load()}, {descOver, c.over.Load()}, {descNear, c.near.Load()}, {descWithin, c.within.Load()}, {descShadow, c.shadow.Load()}} {
			ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v), c.domain, c.key)
		}
	}
	s.mu.RLock()
	for _, c := range s.byPath {
		emit(c)
	}
	s.mu.RUnlock()
	s.detMu.RLock()
	for _, c := range s.detailed {
		emit(c)
	}
	s.detMu.RUnlock()
	ch <- prometheus.MustNewConstMetric(descGlobal, prometheus.CounterValue, float64(s.globalShadow.Load()))
	if st := s.store; st != nil {
		ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(st.Keys()))
		ch <- prometheus.MustNewConstMetric(descKeysMax, prometheus.GaugeValue, float64(st.MaxKeys()))
		ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(st.Evicted.Load()))
		ch <- prometheus.MustNewConstMetric(descOverflow, prometheus.CounterValue, float64(st.Overflowed.Load()))
	}
}
