package rls

import (
	"sync"
	"time"
	"unsafe"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// ext.go runs the obol extension: descriptors whose rate_limit carries an
// obol resource (kind gcra or tiers) are decided by obol's own engine, one
// resource per such limit, named "rls:x:" and the limit's config path
// (with '/' escaped), each cache key a domain of it. The engine is
// attached to the store's cluster, with which it registers its resources
// as any engine does (local.Engine.Attach), so its counts gossip with its
// kind's own rules and its peers' counts are applied to it; a reload
// carries its state over (local.Engine.Reload), and registers the reloaded
// resources in turn.

// extEngines builds and reloads the extension engine. Its methods are
// called under the service's config lock.
type extEngines struct {
	mu  sync.Mutex
	cur *local.Engine
}

// setConfig puts in force the extension resources of cfg in store s.
func (x *extEngines) setConfig(cfg *Config, s *Store) {
	x.mu.Lock()
	defer x.mu.Unlock()
	cc := &config.Config{Resources: map[string]*config.Resource{}}
	for _, l := range cfg.limits {
		if l.Ext != nil {
			cc.Resources[l.extName] = l.Ext
		}
	}
	if x.cur == nil && len(cc.Resources) == 0 {
		return
	}
	var e *local.Engine
	if x.cur == nil {
		e = local.New(cc)
		if clu := s.cluster(); clu != nil {
			e.Attach(clu)
		}
	} else {
		e, _ = x.cur.Reload(cc) // registered with the same cluster
	}
	s.ext.Store(e)
	x.cur = e
}

// decideExt decides hits of key under extension limit l at now: all of
// them or none (hits 0 reads), returning the verdict and the seconds to
// report as duration_until_reset (the wait until a request of one hit
// would pass when over, the wait until the key is fully reset otherwise).
func (s *Store) decideExt(l *Limit, key []byte, hits uint64, now time.Time) (verdict, int64) {
	e := s.ext.Load()
	if e == nil {
		return verdict{}, 0
	}
	n := int(min(hits, local.MaxCopies))
	var d local.Decision
	// The engine copies the domain when it keeps it.
	if err := e.Decide(&d, now, l.extName, unsafe.String(unsafe.SliceData(key), len(key)), n, n); err != nil {
		return verdict{}, 0
	}
	rem := uint32(min(max(d.Remaining, 0), 1<<32-1))
	if d.Granted < n || (n == 0 && d.Remaining == 0 && d.RetryAfter != 0) {
		wait := d.RetryAfter
		if wait == local.Never || wait <= 0 {
			wait = d.ResetAfter
		}
		return verdict{over: true}, ceilSeconds(wait)
	}
	return verdict{remaining: rem}, ceilSeconds(d.ResetAfter)
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
