package reconcile

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/local"
)

// reset.go is the reset of a key across the mesh (local.Engine.Reset).
//
// A reset travels as a tier entry of local.SlotReset at the reset's
// instant T, the origin's own, shipped at once and then with the key's
// every shipment, in snapshots and in held states like any entry, for as
// long as a count made before T could still matter (the longest span of
// the resource's slots, resetLife). Every node keeps, per key, the latest
// reset it knows (resetBook) and from then on applies no count of a
// bucket that starts before T and no tier entry made before T: counts made
// before a reset never come back, whatever order packets arrive in, and
// those made from T on are kept, since the engine forgets only what it
// holds from before T. A gcra engine cannot tell its spends apart by time
// (a TAT), so for a resource that says so (local.ClusterSpec.Replays) the
// node applies again, after the reset, every peer's count of a bucket that
// starts at T or later.

// MaxResets is how many keys' resets a node keeps at once. A reset asked
// of this node past it is refused (Res.Reset reports false, and the
// engine's Reset is local.ErrTooMany), and a peer's is applied but not
// kept; a reset is kept for the longest span of its resource's slots.
const MaxResets = 100_000

// resetBook is the latest reset each key had, as this node knows it.
// Safe for concurrent use: the engine's reset records into it (under the
// key's lock, through Res.Reset) and the merge reads it (under c.mu);
// its lock is taken last, with no other lock taken under it.
type resetBook struct {
	n  atomic.Int64 // len(at), read without mu: most nodes keep no reset
	mu sync.Mutex
	at map[uint64]resetAt
}

type resetAt struct {
	at       int64  // the reset's instant, Unix ms
	resource string // "" until the key's name is known
	// applied: the engine has forgotten the key from before at (the
	// reset was made here, or the key's name was known when it came).
	applied bool
}

// note records a reset of key h (of resource, "" when its name is not
// known) at at, applied to the engine or not, and reports whether it is
// news: later than the one known. A new key past MaxResets is news but
// is not recorded (Res.Reset asks full first).
func (b *resetBook) note(h uint64, resource string, at int64, applied bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.noteLocked(h, resource, at, applied)
}

// noteLocked is note with b.mu held.
func (b *resetBook) noteLocked(h uint64, resource string, at int64, applied bool) bool {
	if b.at == nil {
		b.at = make(map[uint64]resetAt)
	}
	r, ok := b.at[h]
	if ok && at <= r.at {
		if r.resource == "" && resource != "" {
			r.resource = resource
			b.at[h] = r
		}
		return false
	}
	if !ok && len(b.at) >= MaxResets {
		return true // applied, not kept (MaxResets)
	}
	if resource == "" {
		resource = r.resource
	}
	b.at[h] = resetAt{at, resource, applied}
	b.n.Store(int64(len(b.at)))
	return true
}

// unapplied returns the instant of key h's latest reset when the engine
// has not applied it yet (its name was not known), and marks it applied,
// resource the key's.
func (b *resetBook) unapplied(h uint64, resource string) (int64, bool) {
	if b.n.Load() == 0 {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.at[h]
	if !ok || r.applied {
		return 0, false
	}
	r.applied, r.resource = true, resource
	b.at[h] = r
	return r.at, true
}

// noteOwn records this node's reset of key h of resource at at, applied,
// and reports false, recording nothing, when the book is full (MaxResets)
// and has no reset of h.
func (b *resetBook) noteOwn(h uint64, resource string, at int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.at[h]; !ok && len(b.at) >= MaxResets {
		return false
	}
	b.noteLocked(h, resource, at, true)
	return true
}

// since returns the instant of key h's latest reset, or 0.
func (b *resetBook) since(h uint64) int64 {
	if b.n.Load() == 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at[h].at
}

// sweep forgets, at now, the resets whose resource's counts from before
// them can no longer matter (life reports how long: the resource's
// longest span, and false for one no longer registered) or whose key's
// name never came within unresolvedTTL.
func (b *resetBook) sweep(now, grace int64, life func(resource string) (int64, bool)) {
	if b.n.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for h, r := range b.at {
		l, ok := int64(unresolvedTTL), true
		if r.resource != "" {
			l, ok = life(r.resource)
		}
		if !ok || r.at+l+grace <= now {
			delete(b.at, h)
		}
	}
	b.n.Store(int64(len(b.at)))
}

// len returns the number of resets kept.
func (b *resetBook) len() int { return int(b.n.Load()) }

// Reset records that the engine forgets domain's counts, tier entries and
// gcra state from before at (Unix ms) (local.Recorder): the reset ships to
// every peer at once, and this node applies no count made before it from
// now on. It reports false, recording nothing, when the node keeps
// MaxResets resets already. The engine calls it with the key's lock held.
func (r *Res) Reset(domain string, at int64) bool {
	at = min(at, r.c.clock.Now().UnixMilli()) // never ahead of the cluster's clock (resetNews)
	h := KeyHash(r.name, domain)
	if !r.c.resets.noteOwn(h, r.name, at) {
		return false
	}
	sh := r.shard(domain)
	sh.mu.Lock()
	k := r.key(sh, domain)
	k.mark(local.SlotReset, at, r.c.tick.Load()+1)
	r.c.stats.resets.Add(1)
	r.touch(sh, k, 0, 0, 1<<62)
	sh.mu.Unlock()
	return true
}

// resetLife is how long a reset of a key of resource p matters: the
// longest span of its slots' hits and tier entries (0 for none).
func (p *params) resetLife() int64 {
	var l int64
	for _, v := range p.life {
		l = max(l, v)
	}
	for _, v := range p.mark {
		l = max(l, v)
	}
	return l
}

// markLife reports how long p's entries of slot matter: its tier's active
// and cooldown, or resetLife for a reset; false for a slot p has no entries
// of.
func (p *params) markLife(slot uint32) (int64, bool) {
	if slot == local.SlotReset {
		return p.resetLife(), true
	}
	if int(slot) < len(p.mark) {
		return p.mark[slot], true
	}
	return 0, false
}

// resetNews handles a reset of key h at at that an origin told: when it is
// later than the one known and the key's name is known (resolved), the
// engine forgets the key from before at (resetOps); an unnamed key's
// reset waits for its name (learn). It appends those ops to out.
//
// A reset dated after now (a peer whose clock runs ahead, or a forged one)
// is taken as made now: this node holds nothing made after its own now,
// and a reset in the future would drop every peer's count until then. One
// dated so long ago that its resource's longest span has passed since
// (expired: no mark of it is shipped any more) is ignored: nothing counted
// now was made before it, and a gcra bucket, which cannot tell, must not
// be emptied.
func (t *table) resetNews(out []op, h uint64, at, now int64, resolved bool) []op {
	at = min(at, now)
	name := t.names[h]
	if resolved && t.resetExpired(name.resource, at, now) {
		return out
	}
	if !t.resets.note(h, name.resource, at, resolved) || !resolved {
		return out
	}
	return t.resetOps(out, h, at)
}

// resetExpired reports whether a reset of a key of resource made at at has
// outlived, at now, the longest span of the resource's slots.
func (t *table) resetExpired(resource string, at, now int64) bool {
	if t.resetLife == nil {
		return false
	}
	l, ok := t.resetLife(resource)
	return ok && at+l <= now
}

// resetOps appends the ops of key h's (named) reset at at: the reset, and,
// when its resource replays, every count of the key this node holds of a
// bucket from at on, again, in order of bucket (so that a run on a
// virtual clock does not depend on map order).
func (t *table) resetOps(out []op, h uint64, at int64) []op {
	name := t.names[h]
	out = append(out, op{kind: opEntry, resource: name.resource, domain: name.domain, slot: local.SlotReset, at: at})
	if t.replays == nil || !t.replays(name.resource) {
		return out
	}
	var again []remoteCount
	if sk := t.sums[h]; sk != nil {
		for i := range sk.rows {
			if r := &sk.rows[i]; r.bucket >= at && r.applied > 0 {
				again = append(again, remoteCount{r.slot, r.bucket, r.applied})
			}
		}
	} else {
		add := func(o *origin) {
			if k, ok := o.keys[h]; ok && k.resolved {
				for _, c := range k.counts {
					if c.bucket >= at && c.value > 0 {
						again = append(again, c)
					}
				}
			}
		}
		for _, o := range t.origins {
			add(o)
		}
		for _, o := range t.retired {
			add(o)
		}
	}
	slices.SortStableFunc(again, func(a, b remoteCount) int {
		return cmp.Or(cmp.Compare(a.bucket, b.bucket), cmp.Compare(a.slot, b.slot), cmp.Compare(a.value, b.value))
	})
	for _, c := range again {
		out = t.emit(out, opCount, h, int(c.slot), c.bucket, int64(c.value))
	}
	return out
}

// beforeReset reports whether an op of key h placed at at is from before
// the key's latest reset, and so must not be applied.
func (t *table) beforeReset(h uint64, at int64) bool {
	return at < t.resets.since(h)
}

// isReset reports whether m is a reset rather than a tier entry.
func isReset(m packet.Mark) bool { return m.Slot == local.SlotReset }
