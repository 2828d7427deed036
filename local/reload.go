package local

import (
	"reflect"
	"sort"

	"github.com/obol-dev/obol/config"
)

// Changes says what a reload changed, resource by resource.
type Changes struct {
	Added       []string // resources new in the config
	Removed     []string // resources gone from it (their counts and holds dropped)
	Changed     []string // same kind, other limits: counts and holds kept
	KindChanged []string // the kind (or the namespace's ignore_configured) changed: fresh state
	Unchanged   int
	// Released is how many copies were released because their resource was
	// removed or changed kind.
	Released int
}

// Reload returns an engine for cfg (validated and normalized) that carries
// this engine's state over: a resource whose kind is unchanged keeps its keys,
// its last second of hits and its holds (under the new limits), a removed
// resource's holds are released, and sessions live on. The new engine shares
// the state objects with this one instead of copying them, so a decision
// still in flight on this engine lands in the state the new one reads.
// Toggling a namespace's ignore_configured starts its rate resources afresh
// (an ignored resource keeps no per-limit state). Safe for concurrent use
// with decisions on this engine; do not reload one engine twice.
func (e *Engine) Reload(cfg *config.Config) (*Engine, Changes) {
	n := build(cfg, e.book, e.stats)
	n.att = e.att // before lookup hands anything to n: a definition it makes registers
	// dynMu before the book's lock, as Step takes them (a copies resource's
	// load takes the book's): held to the end, it keeps lookups from making
	// anything here while dyn is copied; they wait, then hand it to n.
	e.dynMu.RLock()
	defer e.dynMu.RUnlock()
	e.next.Store(n)
	var ch Changes
	e.book.mu.Lock()
	defer e.book.mu.Unlock()
	for name, nr := range n.res {
		old, ok := e.res[name]
		switch {
		case !ok:
			ch.Added = append(ch.Added, name)
		case old.kind != nr.kind || old.unlimited != nr.unlimited:
			ch.KindChanged = append(ch.KindChanged, name)
			ch.Released += int(old.k.release())
		default:
			if reflect.DeepEqual(e.cfg.Resources[name], cfg.Resources[name]) {
				ch.Unchanged++
			} else {
				ch.Changed = append(ch.Changed, name)
			}
			nr.k = nr.k.adopt(old.k, cfg.Resources[name])
		}
	}
	for name, old := range e.res {
		if _, ok := n.res[name]; !ok {
			ch.Removed = append(ch.Removed, name)
			ch.Released += int(old.k.release())
		}
	}
	// Unconfigured resources live on while their namespace still allows them
	// and they have not become configured.
	// So do limits set by requests while their namespace allows them, has
	// room for them under its cap and a long enough max_request_window;
	// their keys count against the namespace's cap of keys as it now is.
	names := make([]string, 0, len(e.dyn))
	for name := range e.dyn {
		names = append(names, name)
	}
	sort.Strings(names) // the same definitions kept past a lowered cap on every node
	for _, name := range names {
		r := e.dyn[name]
		nsName := namespaceOf(name)
		ns := cfg.Namespaces[nsName]
		_, configured := n.res[name]
		switch {
		case r.defined && ns != nil && ns.RequestLimits && n.defined[nsName] < ns.MaxRequestLimits && r.life <= ns.MaxRequestWindow:
			e.book.pools.of(nsName, ns.MaxRequestKeys)
			n.dyn[name] = r
			n.defined[nsName]++
			continue
		case r.defined:
			e.drop(r)
		case !configured && ns != nil && (ns.AllowUnconfigured || ns.IgnoreConfigured):
			n.dyn[name] = r
			continue
		}
		ch.Released += int(r.k.release())
	}
	if e.att != nil {
		n.register(e.att)
		e.att.cur.Store(n)
	}
	for _, l := range [][]string{ch.Added, ch.Removed, ch.Changed, ch.KindChanged} {
		sort.Strings(l)
	}
	return n, ch
}
