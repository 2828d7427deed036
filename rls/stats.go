package rls

import (
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

// maxDetailed is the most series a detailed_metric limit gets.
const maxDetailed = 1000

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
	if s.detCount[l.Path] >= maxDetailed {
		return c
	}
	s.detCount[l.Path]++
	label := string(key[1:])
	if n := len(label); n > 0 && label[n-1] == '_' {
		label = label[:n-1]
	}
	d = &counters{domain: c.domain, key: label}
	s.detailed[string(key)] = d
	return d
}

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
	for _, d := range []*prometheus.Desc{descTotal, descOver, descNear, descWithin, descShadow, descGlobal} {
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
}
