package reconcile

import (
	"cmp"
	"slices"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/sat"
)

// sum.go is the table's side of owner mode, pure like merge.go: this
// node's own record of the keys it owns (selfKey), the sums an owner sent
// it, merged per bucket as the greater of sums and direct counts
// (mergeSum, count, settle), and their sweep (sweepOwner).

// selfKey returns this node's own record of key h (owner mode).
func (t *table) selfKey(h uint64) *remoteKey {
	k := t.own[h]
	if k == nil {
		k = &remoteKey{resolved: true}
		t.own[h] = k
	}
	return k
}

// value returns k's count in (slot, bucket), 0 for a nil k.
func (k *remoteKey) value(slot uint32, bucket int64) uint64 {
	if k == nil {
		return 0
	}
	for i := len(k.counts) - 1; i >= 0; i-- {
		if c := &k.counts[i]; c.slot == slot && c.bucket == bucket {
			return c.value
		}
	}
	return 0
}

// sumRow is one bucket of a key as this node counts it: the greatest sum
// an owner told (agg), what origins told directly and was applied (direct),
// and what the engine got (applied: the greater of the two once the name
// is known).
type sumRow struct {
	slot                 uint32
	bucket               int64
	agg, direct, applied uint64
}

// sumKey is a key some owner sent sums of.
type sumKey struct {
	rows []sumRow
	seen int64  // ms: the last sum of it
	from string // the owner that last sent one, and its incarnation: asked for the name
	inc  uint64
}

func (sk *sumKey) row(slot uint32, bucket int64) *sumRow {
	for i := range sk.rows {
		if r := &sk.rows[i]; r.slot == slot && r.bucket == bucket {
			return r
		}
	}
	sk.rows = append(sk.rows, sumRow{slot: slot, bucket: bucket})
	return &sk.rows[len(sk.rows)-1]
}

// count appends to out the growth d of an origin's count of key h in
// (slot, bucket), its name known: as is, or, when an owner sent sums of
// h, what it adds to the greater of the two.
func (t *table) count(out []op, h uint64, slot uint32, bucket int64, d uint64) []op {
	sk := t.sums[h]
	if sk == nil {
		return t.emit(out, opCount, h, int(slot), bucket, int64(d))
	}
	r := sk.row(slot, bucket)
	r.direct += d
	return t.settle(out, h, r)
}

// settle applies what row r of key h (named) gained: the greater of its
// sum and its direct count, over what was applied.
func (t *table) settle(out []op, h uint64, r *sumRow) []op {
	if v := max(r.agg, r.direct); v > r.applied {
		out = t.emit(out, opCount, h, int(r.slot), r.bucket, int64(v-r.applied))
		r.applied = v
	}
	return out
}

// mergeSum folds a sum message p from a key owner into the table at now
// (ms) and appends to out what the engine must change.
func (t *table) mergeSum(p *packet.Packet, now int64, out []op) []op {
	out = t.learn(p.Names, now, out)
	for _, c := range p.Counts {
		sk := t.sums[c.Hash]
		if sk == nil {
			sk = t.newSum(c.Hash)
		}
		sk.seen, sk.from, sk.inc = now, p.From, p.Incarnation
		if rk := t.relays[c.Hash]; rk != nil {
			rk.pending, rk.owed, rk.owedAt = 0, 0, 0 // the owner speaks (ownerSilent)
		}
		r := sk.row(c.Slot, c.Bucket)
		if c.Value <= r.agg {
			continue
		}
		r.agg = c.Value
		if _, named := t.names[c.Hash]; named {
			out = t.settle(out, c.Hash, r)
		} else if _, asked := t.asked[c.Hash]; !asked {
			t.askOf(p.From, p.Incarnation, c.Hash, now)
		}
	}
	return out
}

// newSum starts the sums of key h: what origins told directly and was
// applied counts as applied, gone origins' and earlier incarnations'
// included (held.go).
func (t *table) newSum(h uint64) *sumKey {
	sk := &sumKey{}
	seen := map[*origin]bool{}
	add := func(o *origin) {
		k := o.keys[h]
		if k == nil || !k.resolved || seen[o] {
			return
		}
		seen[o] = true
		for _, c := range k.counts {
			r := sk.row(c.slot, c.bucket)
			r.direct += c.value
			r.applied = r.direct
		}
	}
	if t.holders != nil {
		for _, o := range t.holders[h] {
			add(o)
		}
	} else { // not in owner mode (a sum from a node that is): no index
		for _, o := range t.origins {
			add(o)
		}
		for _, o := range t.retired {
			add(o)
		}
	}
	t.sums[h] = sk
	return sk
}

// stateSums appends to pkt, a snapshot with this node's own counts in
// pkt.Counts, every bucket still inside its window at now (life reports a
// slot's) of the keys this node knows by owners' sums, as its engine
// counts it: the greater of the sum and what origins told directly, plus
// this node's own count (an owner's sum to a node leaves out that node's
// own). Each part counts origins the others do not, and each is a lower
// bound of their counts, so the total is a lower bound of the key's. The
// keys' names go to pkt.Names; the buckets in order of key, slot and
// bucket.
func (t *table) stateSums(pkt *packet.Packet, now int64, life func(resource string, slot uint32, mark bool) (int64, bool)) {
	if len(t.sums) == 0 {
		return
	}
	type at struct {
		h      uint64
		slot   uint32
		bucket int64
	}
	own := make(map[at]uint64, len(pkt.Counts))
	for _, c := range pkt.Counts {
		own[at{c.Hash, c.Slot, c.Bucket}] = c.Value
	}
	named := make(map[uint64]bool, len(pkt.Names))
	for _, n := range pkt.Names {
		named[n.Hash] = true
	}
	first := len(pkt.Sums)
	for h, sk := range t.sums {
		name, ok := t.names[h]
		if !ok {
			continue
		}
		n := len(pkt.Sums)
		for _, r := range sk.rows {
			l, ok := life(name.resource, r.slot, false)
			if !ok || r.bucket+l <= now {
				continue
			}
			v := max(r.agg, r.direct)
			v = sat.Add(v, own[at{h, r.slot, r.bucket}])
			if v > 0 {
				pkt.Sums = append(pkt.Sums, packet.Count{Hash: h, Slot: r.slot, Bucket: r.bucket, Value: v})
			}
		}
		if len(pkt.Sums) > n && !named[h] {
			named[h] = true
			pkt.Names = append(pkt.Names, packet.Name{Hash: h, Resource: name.resource, Domain: name.domain})
		}
	}
	slices.SortFunc(pkt.Sums[first:], func(a, b packet.Count) int {
		return cmp.Or(cmp.Compare(a.Hash, b.Hash), cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.Bucket, b.Bucket))
	})
}

// mergeStateSums folds the sums of a state from (incarnation inc) into
// the table at now, each as an owner's sum of its key, and appends to out
// what the engine must change. The caller left out the buckets this node
// counted itself (Cluster.uncounted): a sum of such a bucket may hold this
// node's own count, which its engine counts already. Keys whose names the
// state did not give are skipped.
func (t *table) mergeStateSums(sums []packet.Count, from string, inc uint64, now int64, out []op) []op {
	for _, c := range sums {
		if _, named := t.names[c.Hash]; !named {
			continue
		}
		sk := t.sums[c.Hash]
		if sk == nil {
			sk = t.newSum(c.Hash)
			sk.seen, sk.from, sk.inc = now, from, inc
		}
		r := sk.row(c.Slot, c.Bucket)
		if c.Value <= r.agg {
			continue
		}
		r.agg = c.Value
		out = t.settle(out, c.Hash, r)
	}
	return out
}

// askOf records an ask of origin (incarnation inc) for the name of h.
func (t *table) askOf(origin string, inc uint64, h uint64, now int64) {
	t.asked[h] = now
	if n := len(t.asks); n > 0 && t.asks[n-1].origin == origin && t.asks[n-1].inc == inc {
		t.asks[n-1].hashes = append(t.asks[n-1].hashes, h)
		return
	}
	t.asks = append(t.asks, nameAsk{origin: origin, inc: inc, hashes: []uint64{h}})
}

// sweepOwner forgets, at now, the sums and relayed buckets past their
// slot's lifetime plus grace (life reports it), sums of a key whose name
// never came after unresolvedTTL, relayed keys left empty, and this
// node's own record of buckets aged out. It marks the names sums use.
func (t *table) sweepOwner(now, grace int64, life func(resource string, slot uint32, mark bool) (int64, bool), used map[uint64]bool) {
	alive := func(h uint64, slot uint32, bucket int64, seen int64) bool {
		name, ok := t.names[h]
		if !ok {
			name, ok = t.selfNames[h]
		}
		if !ok {
			return now-seen <= unresolvedTTL
		}
		l, ok := life(name.resource, slot, false)
		return ok && bucket+l+grace > now
	}
	for h, sk := range t.sums {
		sk.rows = slices.DeleteFunc(sk.rows, func(r sumRow) bool { return !alive(h, r.slot, r.bucket, sk.seen) })
		if len(sk.rows) == 0 {
			delete(t.sums, h)
			continue
		}
		used[h] = true
	}
	for h, k := range t.own {
		k.counts = slices.DeleteFunc(k.counts, func(c remoteCount) bool { return !alive(h, c.slot, c.bucket, now) })
		if len(k.counts) == 0 {
			delete(t.own, h)
			delete(t.selfNames, h)
		}
	}
	for h, rk := range t.relays {
		rk.rows = slices.DeleteFunc(rk.rows, func(r relayRow) bool { return !alive(h, r.slot, r.bucket, now) })
		rk.from = slices.DeleteFunc(rk.from, func(o *origin) bool { return o.gone || t.origins[o.name] != o || o.keys[h] == nil })
		if len(rk.rows) == 0 && len(rk.from) == 0 && !rk.urgent {
			delete(t.relays, h)
		}
	}
}
