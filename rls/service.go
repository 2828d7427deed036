package rls

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/internal/sat"
	"github.com/obol-dev/obol/local"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
)

// service.go is one decision: a RateLimitRequest in, its RateLimitResponse
// written into a pooled reply, at the instant it is given. Its steps are
// envoyproxy/ratelimit's: each descriptor's limit (the request's own, or
// the config's), the replaced and unlimited ones set aside, every counter
// grown by its hits (or, with StopIncrementOverLimit, only those that go
// over when any does), each status from its count, the overall code, the
// headers, the global shadow mode.

// Options are the service's settings; the zero value is
// envoyproxy/ratelimit's defaults.
type Options struct {
	// ShadowMode is the global shadow mode (their SHADOW_MODE): an over
	// limit overall code becomes OK; the statuses still tell.
	ShadowMode bool
	// StopIncrementOverLimit is their STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT:
	// when one of a request's descriptors would go over its limit, only
	// the counters that go over grow.
	StopIncrementOverLimit bool
	// NearLimitRatio is the share of a limit past which hits count as
	// near_limit; 0 = DefaultNearLimitRatio. It feeds the near_limit
	// metrics only, never a decision.
	NearLimitRatio float32
	// Headers selects the response_headers_to_add (HeadersOff: none).
	Headers HeaderMode
	// MaxKeys bounds the counters kept (0 = DefaultMaxCounters); past it a
	// new key takes an idle key's place or is counted in the overflow
	// table (store.go): limiting never switches off.
	MaxKeys int
	// MaxDescriptors bounds the descriptors of one request (0 =
	// DefaultMaxDescriptors); a request with more is refused
	// (ErrInvalidArgument).
	MaxDescriptors int
	// MaxEntries bounds the entries of one descriptor (0 =
	// DefaultMaxEntries); more is refused (ErrInvalidArgument).
	MaxEntries int
	// MaxEntryBytes bounds each entry's key and each entry's value, in
	// bytes (0 = DefaultMaxEntryBytes); a longer one is refused
	// (ErrInvalidArgument).
	MaxEntryBytes int
}

// DefaultNearLimitRatio is Options.NearLimitRatio's default, the default
// of envoyproxy/ratelimit's NEAR_LIMIT_RATIO.
const DefaultNearLimitRatio = 0.8

// The defaults of the request bounds (Options). Envoy sends a few
// descriptors of a few short entries, their values taken from headers or
// addresses: the bounds are far above that and far below what fills
// memory (a request's keys are at most 256 × 16 × 2 × 4 KiB, and the
// HTTP/JSON body is bounded at 1 MiB in any case).
const (
	DefaultMaxDescriptors = 256
	DefaultMaxEntries     = 16
	DefaultMaxEntryBytes  = 4096
	// MaxHitsAddend is the largest hits_addend (a descriptor's, or the
	// request's) accepted: requests_per_unit is at most 2^32−1, so no
	// more hits can ever be within a limit; a larger one is refused
	// (ErrInvalidArgument). Counters saturate at 2^64−1 in any case.
	MaxHitsAddend = math.MaxUint32
)

// Errors of requests that cannot be decided (the gRPC status is Unknown,
// as envoyproxy/ratelimit's).
var (
	ErrNoDomain      = errors.New("rate limit domain must not be empty")
	ErrNoDescriptors = errors.New("rate limit descriptor list must not be empty")
	ErrBadUnit       = errors.New("rate limit override: unit must be second, minute, hour, day, week, month or year")
	ErrNoConfig      = errors.New("no rate limit configuration loaded")
	// ErrInvalidArgument is wrapped by the error of a request over one of
	// the bounds (Options.MaxDescriptors, MaxEntries, MaxEntryBytes,
	// MaxHitsAddend); the message names the bound. Its gRPC code is
	// InvalidArgument (Code).
	ErrInvalidArgument = errors.New("invalid rate limit request")
)

// Service decides RateLimitRequests. Safe for concurrent use.
type Service struct {
	opt   Options
	cfg   atomic.Pointer[Config]
	store *Store
	ext   extEngines
	stats *Stats
}

// New returns a service deciding under cfg (nil: none yet; every request
// fails until SetConfig).
func New(cfg *Config, opt Options) *Service {
	if opt.NearLimitRatio == 0 {
		opt.NearLimitRatio = DefaultNearLimitRatio
	}
	if opt.MaxDescriptors <= 0 {
		opt.MaxDescriptors = DefaultMaxDescriptors
	}
	if opt.MaxEntries <= 0 {
		opt.MaxEntries = DefaultMaxEntries
	}
	if opt.MaxEntryBytes <= 0 {
		opt.MaxEntryBytes = DefaultMaxEntryBytes
	}
	s := &Service{opt: opt, store: NewStore(opt.MaxKeys), stats: newStats()}
	s.stats.store = s.store
	if cfg != nil {
		s.SetConfig(cfg)
	}
	return s
}

// SetConfig puts cfg in force for the next decisions.
func (s *Service) SetConfig(cfg *Config) {
	s.stats.setConfig(cfg)
	s.store.Register(cfg)
	s.ext.setConfig(cfg, s.store)
	s.cfg.Store(cfg)
}

// Config returns the config in force (nil when none).
func (s *Service) Config() *Config { return s.cfg.Load() }

// Store returns the service's counters (the local.Applier of its limit
// values in the cluster: Store.Attach).
func (s *Service) Store() *Store { return s.store }

// Stats returns the service's metrics.
func (s *Service) Stats() *Stats { return s.stats }

// Options returns the service's options.
func (s *Service) Options() Options { return s.opt }

// maxStack is how many descriptors a request decides without a slice on
// the heap.
const maxStack = 8

// item is one descriptor of a request during its decision.
type item struct {
	limit     *Limit
	override  bool
	unlimited bool
	hits      uint64
	kfrom     int // the cache key: keys[kfrom:kto] of the decision
	kto       int
	start     int64
	before    uint64
	after     uint64
	grow      bool
	// extension limits: their verdict, taken when the counters grow
	v     verdict
	reset int64
}

// Decide decides req at now into r (overwriting it whole).
func (s *Service) Decide(now time.Time, req *rlpb.RateLimitRequest, r *Reply) error {
	if req.GetDomain() == "" {
		return ErrNoDomain
	}
	ds := req.GetDescriptors()
	if len(ds) == 0 {
		return ErrNoDescriptors
	}
	cfg := s.cfg.Load()
	if cfg == nil {
		return ErrNoConfig
	}
	if err := s.check(req); err != nil {
		return err
	}
	var stack [maxStack]item
	var keyStack [maxStack * 64]byte
	items := stack[:0]
	if len(ds) > maxStack {
		items = make([]item, 0, len(ds))
	}
	keys := keyStack[:0]
	nowSec := now.Unix()
	domain := req.GetDomain()
	r.reset(len(ds))

	// The limits: the request's override, else the config's.
	for _, d := range ds {
		it := item{hits: hitsOf(req, d)}
		at := len(keys)
		keys = append(keys, '0') // the unit's digit, set once the limit is known
		if o := d.GetLimit(); o != nil {
			if cfg.HasDomain(domain) {
				secs := unitSeconds(Unit(o.GetUnit()))
				if secs == 0 {
					return ErrBadUnit
				}
				it.override = true
				it.limit = r.overrideLimit(len(items), o, secs)
				keys = overrideKey(domain, d, keys)
			}
		} else {
			it.limit, keys = cfg.match(domain, d, keys)
		}
		if it.limit != nil {
			keys[at] = '0' + byte(it.limit.Unit)
		}
		it.kfrom, it.kto = at, len(keys)
		if it.limit != nil && it.limit.Unlimited {
			it.unlimited = true
		}
		items = append(items, it)
	}
	// replaces: a named limit that another matched limit replaces is
	// dropped (unlimited ones replace too, and every matched limit
	// replaces, dropped or not). A dropped unlimited limit still answers
	// as unlimited, as envoyproxy/ratelimit's does.
	dropReplaced(items, cfg)
	// Grow the counters.
	s.count(items, keys, now)

	// The statuses, the overall code, the headers.
	code := rlpb.RateLimitResponse_OK
	minIdx, minRemaining := -1, uint32(math.MaxUint32)
	for i := range items {
		it := &items[i]
		st := r.status(i)
		l := it.limit
		if l == nil || it.unlimited {
			if it.unlimited {
				st.LimitRemaining = math.MaxUint32
			}
			st.Code = rlpb.RateLimitResponse_OK
			continue
		}
		v, reset := judge(it.after, l.Requests), untilReset(nowSec, l.Seconds)
		if l.Ext != nil {
			v, reset = it.v, it.reset
		}
		st.CurrentLimit = l.PB
		st.LimitRemaining = v.remaining
		st.Code = rlpb.RateLimitResponse_OK
		if v.over {
			st.Code = rlpb.RateLimitResponse_OVER_LIMIT
		}
		st.DurationUntilReset = r.duration(i, reset)
		switch {
		case l.Ext != nil:
			s.stats.observeExt(l, keys[it.kfrom:it.kto], it.hits, v.over)
		case !it.override:
			s.stats.observe(l, keys[it.kfrom:it.kto], it.before, it.after, it.hits, s.opt.NearLimitRatio)
		}
		if v.remaining < minRemaining {
			minIdx, minRemaining = i, v.remaining
		}
		if v.over && l.Shadow {
			st.Code = rlpb.RateLimitResponse_OK
		}
		if st.Code == rlpb.RateLimitResponse_OVER_LIMIT {
			if l.Quota {
				st.DurationUntilReset = nil
				st.Code = rlpb.RateLimitResponse_OK
				continue
			}
			code = rlpb.RateLimitResponse_OVER_LIMIT
			minIdx, minRemaining = i, 0
		}
	}
	if s.opt.Headers != HeadersOff && minIdx >= 0 {
		st := r.resp.Statuses[minIdx]
		it := &items[minIdx]
		r.headers(s.opt.Headers, it.limit, st.LimitRemaining, untilReset(nowSec, it.limit.Seconds), nowSec)
	}
	if code == rlpb.RateLimitResponse_OVER_LIMIT && s.opt.ShadowMode {
		code = rlpb.RateLimitResponse_OK
		s.stats.globalShadow.Add(1)
	}
	r.resp.OverallCode = code
	return nil
}

// dropReplaced sets aside (limit nil) every item whose named limit a
// matched limit of items replaces. A request of up to maxStack descriptors
// compares each named limit with every matched one (no allocation); a
// larger one first gathers the replaced names in a set, each config limit's
// once, so that the cost is linear in the descriptors (plus the config's
// replaces lists).
func dropReplaced(items []item, cfg *Config) {
	if len(items) <= maxStack {
		var drop [maxStack]bool
		dropPairwise(items, drop[:len(items)])
		return
	}
	var replaced map[string]struct{}
	seen := make([]bool, len(cfg.limits))
	for i := range items {
		l := items[i].limit
		if l == nil || len(l.Replaces) == 0 {
			continue
		}
		if l.id >= 0 && l.id < len(seen) {
			if seen[l.id] {
				continue
			}
			seen[l.id] = true
		}
		if replaced == nil {
			replaced = make(map[string]struct{})
		}
		for _, n := range l.Replaces {
			replaced[n] = struct{}{}
		}
	}
	if replaced == nil {
		return
	}
	for i := range items {
		if l := items[i].limit; l != nil && l.Name != "" {
			if _, ok := replaced[l.Name]; ok {
				items[i].limit = nil
			}
		}
	}
}

// dropPairwise is dropReplaced comparing each named limit with every
// matched one, marking in drop (len(items), all false) which to set aside.
func dropPairwise(items []item, drop []bool) {
	for i := range items {
		l := items[i].limit
		if l == nil || l.Name == "" {
			continue
		}
		for j := range items {
			if lj := items[j].limit; lj != nil && replaces(lj, l.Name) {
				drop[i] = true
				break
			}
		}
	}
	for i := range items {
		if drop[i] {
			items[i].limit = nil
		}
	}
}

func replaces(l *Limit, name string) bool {
	for _, n := range l.Replaces {
		if n == name {
			return true
		}
	}
	return false
}

// Code returns the gRPC status code of an error of Decide: InvalidArgument
// for a request over a bound (ErrInvalidArgument), Unknown for the others,
// as envoyproxy/ratelimit's.
func Code(err error) codes.Code {
	if errors.Is(err, ErrInvalidArgument) {
		return codes.InvalidArgument
	}
	return codes.Unknown
}

// check refuses a request over one of the service's bounds, naming it.
func (s *Service) check(req *rlpb.RateLimitRequest) error {
	ds := req.GetDescriptors()
	if len(ds) > s.opt.MaxDescriptors {
		return fmt.Errorf("%w: %d descriptors, at most %d per request (max descriptors)", ErrInvalidArgument, len(ds), s.opt.MaxDescriptors)
	}
	for i, d := range ds {
		es := d.GetEntries()
		if len(es) > s.opt.MaxEntries {
			return fmt.Errorf("%w: descriptor %d has %d entries, at most %d (max entries)", ErrInvalidArgument, i, len(es), s.opt.MaxEntries)
		}
		for j, e := range es {
			if n := len(e.GetKey()); n > s.opt.MaxEntryBytes {
				return fmt.Errorf("%w: descriptor %d entry %d: key is %d bytes, at most %d (max entry bytes)", ErrInvalidArgument, i, j, n, s.opt.MaxEntryBytes)
			}
			if n := len(e.GetValue()); n > s.opt.MaxEntryBytes {
				return fmt.Errorf("%w: descriptor %d entry %d: value is %d bytes, at most %d (max entry bytes)", ErrInvalidArgument, i, j, n, s.opt.MaxEntryBytes)
			}
		}
		if h := d.GetHitsAddend(); h != nil && h.GetValue() > MaxHitsAddend {
			return fmt.Errorf("%w: descriptor %d: hits_addend %d, at most %d", ErrInvalidArgument, i, h.GetValue(), uint64(MaxHitsAddend))
		}
	}
	return nil
}

// hitsOf is a descriptor's hits: its own hits_addend when set (0 reads
// without counting), else the request's, at least 1.
func hitsOf(req *rlpb.RateLimitRequest, d *rlv3.RateLimitDescriptor) uint64 {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	return uint64(max(1, req.GetHitsAddend()))
}

// count grows the counters of items' fixed windows at now: every one by
// its hits or, with StopIncrementOverLimit and when any would go over its
// limit, only those that would.
func (s *Service) count(items []item, keys []byte, now time.Time) {
	nowSec, nowMs := now.Unix(), now.UnixMilli()
	stop := false
	for i := range items {
		it := &items[i]
		if it.limit == nil || it.unlimited {
			continue
		}
		if it.limit.Ext != nil {
			it.v, it.reset = s.store.decideExt(it.limit, keys[it.kfrom:it.kto], it.hits, now)
			continue
		}
		it.start = windowStart(nowSec, it.limit.Seconds)
		if s.opt.StopIncrementOverLimit {
			if sat.Add(s.store.add(keys[it.kfrom:it.kto], it.start, 0, nil, nowMs), it.hits) > uint64(it.limit.Requests) {
				it.grow, stop = true, true
			}
		}
	}
	for i := range items {
		it := &items[i]
		if it.limit == nil || it.unlimited {
			continue
		}
		if it.limit.Ext != nil {
			continue
		}
		n := it.hits
		if stop && !it.grow {
			n = 0
		}
		var rec local.Recorder
		if n > 0 {
			rec = s.store.recorder(it.limit.Requests, it.limit.Seconds)
		}
		it.after = s.store.add(keys[it.kfrom:it.kto], it.start, n, rec, nowMs)
		it.before = it.after - min(it.after, it.hits)
	}
}
