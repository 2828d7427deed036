package api

import (
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// limits.go resolves the limit a request sets ("limit", in a namespace
// with request_limits) to the name the engine decides it under:
// local.LimitedName of the resource and the limit's canonical text. The
// limit is read by config.ParseLimit, as the config reads a resource, and
// its text is cached by the limit's JSON, so that callers who send the same
// limit with every request (gubernator's model) have it parsed once.

// requestedLabel is the resource label of the metrics of every limit set
// by a request: a client cannot grow the series by naming new ones.
const requestedLabel = "requested"

// maxLimitCache is the most limits' texts the cache keeps: more than the
// definitions 16 namespaces keep at their default cap. Past it, an eighth
// of the entries, picked at random, make room: a working set that fits
// stays cached while a caller sending ever new limits only churns the
// rest.
const maxLimitCache = 16384

// limitCache maps a limit's JSON to its canonical text, for the
// definitions the engine holds.
type limitCache struct {
	mu sync.RWMutex
	m  map[string]limitEntry
}

type limitEntry struct {
	key  string
	life time.Duration // config.Resource.StateLife
}

// maxCachedLimit is the longest JSON of a limit the cache keeps: so it
// holds at most about 10 MiB (16,384 × 512 bytes and their texts). A
// longer one (padded, or a long tier list) is parsed each time.
const maxCachedLimit = 512

// of returns the canonical text of the limit whose JSON is raw, and how
// long a key of it keeps state, or the bad_limit error that refuses it;
// cached reports that it came from the cache. It does not add to the
// cache: keep does, once the engine holds the definition.
func (lc *limitCache) of(raw []byte) (e limitEntry, cached bool, err error) {
	lc.mu.RLock()
	e, ok := lc.m[string(raw)]
	lc.mu.RUnlock()
	if ok {
		return e, true, nil
	}
	lim, err := config.ParseLimit(raw)
	if err != nil {
		return e, false, badLimit(err)
	}
	e.key, e.life = config.LimitKey(lim), lim.StateLife()
	return e, false, nil
}

// keep adds e, the entry of the limit whose JSON is raw, to the cache:
// only for a definition the engine holds, so that a caller sending ever
// new limits that are refused (a namespace at its cap, a bad limit) never
// pushes out the limits of callers who use theirs again.
func (lc *limitCache) keep(raw []byte, e limitEntry) {
	if len(raw) > maxCachedLimit {
		return
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.m == nil {
		lc.m = make(map[string]limitEntry)
	}
	if len(lc.m) >= maxLimitCache {
		n := maxLimitCache / 8
		for k := range lc.m { // a map's order is random: so is what goes
			delete(lc.m, k)
			if n--; n == 0 {
				break
			}
		}
	}
	lc.m[string(raw)] = e
}

// badLimit is the 400 bad_limit reply for a limit config.ParseLimit
// refuses: every problem, each named by its path ("limit.burst: ...").
func badLimit(err error) error {
	return &apiError{status: fasthttp.StatusBadRequest, code: codeBadLimit, msg: problemsMessage(err)}
}

// limited returns the name the engine decides resource under, given the
// limit (JSON) its request sets, and the series its decisions count in:
// as named does without a limit; with one, the resource's own name when
// the config defines it (the config wins: the limit is not even read),
// else local.LimitedName of it and the limit's canonical text, counted
// under requestedLabel. Where the namespace does not allow limits set by
// requests the limit is refused before it is read, so that a limit no one
// may use costs no parse.
func (s *Server) limited(g *generation, resource, limit []byte) (string, *resMetrics, error) {
	if limit == nil {
		name, rm := g.named(resource)
		return name, rm, nil
	}
	if n, ok := g.names[string(resource)]; ok {
		return n.name, n.rm, nil
	}
	if err := g.engine.AllowsLimits(string(resource)); err != nil {
		return "", nil, err
	}
	lim, cached, err := s.limits.of(limit)
	if err == nil {
		err = g.engine.CheckLimitLife(string(resource), lim.life)
	}
	if err != nil {
		return "", nil, err
	}
	name := local.LimitedName(string(resource), lim.key)
	if !cached && g.engine.Defines(name) {
		s.limits.keep(limit, lim)
	}
	return name, g.metrics[requestedLabel], nil
}

// shownName is a registry name as logs show it: a limit set by a request
// as its resource and, in braces, its limit's canonical text.
func shownName(name string) string {
	if r, key, ok := local.SplitLimitedName(name); ok {
		return r + " {" + key + "}"
	}
	return name
}
