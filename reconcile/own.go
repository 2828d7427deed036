package reconcile

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/local"
)

// own.go records this node's own hits, per key, slot and bucket, and turns
// the ones not yet shipped into packet entries. The engine calls the
// recording methods while it holds the key's lock, so they only take a shard
// lock of their own, never block, and never call back.

// resends is how many shipments carry a key's name.
const resends = 3

// A changed bucket, entry or gauge is shipped on the tick after the change
// and again 1, 2, 4, 8 and 16 ticks later (while it is still live): a lost
// packet is repaired within a tick, and whatever changed during a network
// cut of up to 16 ticks (4 s at 250 ms) is shipped again after it heals. A
// longer cut is a silence, which makes gossip resync the peers with a
// push/pull (gossip.Config.ResyncAfter).
const lastResend = 16

// due reports whether an entry that changed before tick changed ships at
// tick s (changed > s: it changed since the last tick, and a flush ships it).
func due(s, changed uint32) bool {
	d := int32(s - changed)
	return d <= 2 || d == 4 || d == 8 || d == lastResend
}

// pending reports whether an entry that changed before tick changed still
// has shipments ahead after tick s.
func pending(s, changed uint32) bool { return int32(s-changed) < lastResend }

// ownShards is the number of locks a resource's own keys are spread over.
const ownShards = 32

// Res is one resource as the cluster sees it: the handle the engine records
// its hits through (local.Recorder). Safe for concurrent use.
type Res struct {
	c         *Cluster
	name      string
	p         atomic.Pointer[params]
	unshipped atomic.Int64 // hits of every key not yet shipped (global limit)
	// urgentFlag asks the flusher to look at this resource; globalUrgent to
	// ship all its changed keys (the global limit's threshold was reached).
	urgentFlag, globalUrgent atomic.Bool
	shards                   [ownShards]ownShard
}

type ownShard struct {
	mu     sync.Mutex
	keys   map[string]*ownKey
	dirty  []*ownKey
	urgent []*ownKey
}

type ownCount struct {
	bucket  int64 // ms
	value   uint64
	slot    uint32
	changed uint32 // the tick it changed before
	unsent  bool   // changed since it was last shipped
}

type ownMark struct {
	slot    uint32
	at      int64
	changed uint32
	unsent  bool // changed since it was last shipped
}

// ownKey is this node's record of one key.
type ownKey struct {
	domain    string
	hash      uint64
	counts    []ownCount
	marks     []ownMark
	unshipped int64
	names     int8 // how many more shipments carry the key's name
	dirty     bool
	urgent    bool
}

var _ local.Recorder = (*Res)(nil)

func (r *Res) shard(domain string) *ownShard {
	return &r.shards[fnv1a(domain)%ownShards]
}

// key returns domain's record in a locked shard, creating it.
func (r *Res) key(sh *ownShard, domain string) *ownKey {
	if k, ok := sh.keys[domain]; ok {
		return k
	}
	if sh.keys == nil {
		sh.keys = make(map[string]*ownKey)
	}
	d := strings.Clone(domain) // it may alias a request buffer
	k := &ownKey{domain: d, hash: KeyHash(r.name, d), names: resends}
	sh.keys[d] = k
	return k
}

// add counts n in slot's bucket holding at, changed before tick next.
func (k *ownKey) add(p *params, slot int, at, n int64, next uint32) {
	if slot >= len(p.bucket) || n <= 0 {
		return
	}
	b := at - mod(at, p.bucket[slot])
	for i := len(k.counts) - 1; i >= 0; i-- {
		c := &k.counts[i]
		if c.slot == uint32(slot) && c.bucket == b {
			c.value += uint64(n)
			c.changed, c.unsent = next, true
			return
		}
	}
	k.counts = append(k.counts, ownCount{slot: uint32(slot), bucket: b, value: uint64(n), changed: next, unsent: true})
}

// mark records that tier slot was entered at at, before tick next.
func (k *ownKey) mark(slot int, at int64, next uint32) {
	for i := range k.marks {
		if m := &k.marks[i]; m.slot == uint32(slot) {
			m.at, m.changed, m.unsent = at, next, true
			return
		}
	}
	k.marks = append(k.marks, ownMark{slot: uint32(slot), at: at, changed: next, unsent: true})
}

// touch marks k changed and ships it at once when its unshipped hits reach
// thr or the resource's reach gthr.
func (r *Res) touch(sh *ownShard, k *ownKey, n, thr, gthr int64) {
	if !k.dirty {
		k.dirty = true
		sh.dirty = append(sh.dirty, k)
	}
	k.unshipped += n
	g := r.unshipped.Add(n)
	if r.c.tickOnly {
		return
	}
	if k.unshipped >= thr && !k.urgent {
		k.urgent = true
		sh.urgent = append(sh.urgent, k)
		r.c.wake(r, false)
	}
	if g >= gthr {
		r.c.wake(r, true)
	}
}

// TierHits records that the engine granted total hits of domain at at (Unix
// ms), taken[i] of them in tier i+1, and entered tier i+1 at at for every bit
// i set in entered. Tiers past the 64th are not shared. It must be called
// with the engine's lock of the key held, so that a key's records keep the
// engine's order.
func (r *Res) TierHits(domain string, at, total int64, taken []int64, entered uint64) {
	p := r.p.Load()
	sh := r.shard(domain)
	sh.mu.Lock()
	k := r.key(sh, domain)
	next := r.c.tick.Load() + 1
	k.add(p, local.SlotTotal, at, total, next)
	thr := int64(1 << 62)
	n := r.c.thrN()
	if p.hard > 0 {
		thr = threshold(p.drift, p.hard, n)
	}
	for i, v := range taken {
		if entered&(1<<uint(i)) != 0 && i < 64 {
			k.mark(i+1, at, next)
		}
		if v > 0 {
			k.add(p, i+1, at, v, next)
			if i+1 < len(p.limit) {
				thr = min(thr, threshold(p.drift, p.limit[i+1], n))
			}
		}
	}
	r.touch(sh, k, total, thr, threshold(p.drift, p.global, n))
	sh.mu.Unlock()
}

// TierRefund records that a settle gave back total of domain's hits made at
// at (Unix ms), taken[i] of them in tier i+1: in the refund slots
// (local.SlotTierRefund), which ship as counts do, with no hurry (a peer
// that learns late over-counts meanwhile, never under-counts).
func (r *Res) TierRefund(domain string, at, total int64, taken []int64) {
	p := r.p.Load()
	sh := r.shard(domain)
	sh.mu.Lock()
	k := r.key(sh, domain)
	next := r.c.tick.Load() + 1
	k.add(p, local.SlotTierRefund, at, total, next)
	for i, v := range taken {
		k.add(p, local.SlotTierRefund+i+1, at, v, next)
	}
	r.touch(sh, k, 0, 1<<62, 1<<62)
	sh.mu.Unlock()
}

// Spend records that a gcra bucket spent n tokens at at (Unix ms).
func (r *Res) Spend(domain string, at, n int64) { r.gcra(domain, local.SlotSpend, at, n) }

// Refund records that n tokens were refunded to a gcra bucket at at.
func (r *Res) Refund(domain string, at, n int64) { r.gcra(domain, local.SlotRefund, at, n) }

func (r *Res) gcra(domain string, slot int, at, n int64) {
	p := r.p.Load()
	sh := r.shard(domain)
	sh.mu.Lock()
	k := r.key(sh, domain)
	k.add(p, slot, at, n, r.c.tick.Load()+1)
	r.touch(sh, k, n, threshold(p.drift, p.limit[slot], r.c.thrN()), 1<<62)
	sh.mu.Unlock()
}

// shipMode is what collect ships of a key.
type shipMode uint8

const (
	// shipTick ships the buckets due at the tick: changed since the last
	// tick, and the resends of earlier changes (due).
	shipTick shipMode = iota
	// shipFlush ships only the buckets changed since they were last
	// shipped: a drift flush between ticks, which the next tick's shipment
	// and its resends follow as for any change, so a flush repeats nothing.
	shipFlush
	// shipAll ships every live bucket and leaves the schedule as it was (a
	// snapshot for one peer, or a sweep that only drops).
	shipAll
	// shipOnce ships what changed since it was last shipped, once: the
	// buckets and tier entries, and the key's name on its first shipment.
	// Used, on the tick and for drift flushes alike, when every peer
	// repairs a lost message by asking for it (Repairer): nothing is
	// resent and no key stays on the dirty list.
	shipOnce
)

// collect appends k's entries to pkt at tick s as mode says: the buckets
// to ship (see shipMode) and, with them, the key's live tier entries and
// its name while it still travels (and on late resends, which may be the
// first to arrive after a cut). It drops buckets and entries that no longer
// matter at now and reports whether k has shipments ahead.
//
// A gcra bucket that aged out before it was ever shipped (a sync interval
// longer than the bucket's life, or a long stall) is shipped once on its way
// out: a spend keeps pushing the TAT of a busy bucket long after its own
// burst offset, so peers must see it. A tiers bucket that aged out counts
// in no window any more and goes unshipped.
//
// Counts (and the name with them) go to cp, tier entries (and the name
// with them) to pkt: the same packet but in owner mode, where counts go to
// the key's owner and the rest to every peer.
func (r *Res) collect(p *params, k *ownKey, s uint32, now int64, pkt, cp *packet.Packet, mode shipMode) bool {
	all, once := mode == shipAll, mode == shipOnce
	keep := k.counts[:0]
	shipped, late, ahead, marked := false, false, false, false
	for _, c := range k.counts {
		if int(c.slot) < len(p.life) && c.bucket+p.life[c.slot] <= now {
			if c.unsent && !all && p.shipLate {
				cp.Counts = append(cp.Counts, packet.Count{Hash: k.hash, Slot: c.slot, Bucket: c.bucket, Value: c.value})
				shipped = true
			}
			continue // out of every window: forget it
		}
		if all || ((mode == shipFlush || once) && c.unsent) || (mode == shipTick && due(s, c.changed)) {
			cp.Counts = append(cp.Counts, packet.Count{Hash: k.hash, Slot: c.slot, Bucket: c.bucket, Value: c.value})
			shipped = true
			late = late || int32(s-c.changed) > 2
			if !all {
				c.unsent = false
			}
		}
		ahead = ahead || (!once && pending(s, c.changed))
		keep = append(keep, c)
	}
	k.counts = keep
	mk := k.marks[:0]
	for _, m := range k.marks {
		if l, ok := p.markLife(m.slot); ok && m.at+l <= now {
			continue
		}
		if all || (once && m.unsent) || (!once && (shipped || due(s, m.changed))) {
			pkt.Marks = append(pkt.Marks, packet.Mark{Hash: k.hash, Slot: m.slot, At: m.at})
			marked = true
			if !all {
				m.unsent = false
			}
		}
		ahead = ahead || (!once && pending(s, m.changed))
		mk = append(mk, m)
	}
	k.marks = mk
	if shipped || marked {
		// The memory of names shipped decides when changes ship once
		// (peers keep names NameTTL and ask for the ones they lack);
		// otherwise the key's first shipments and late resends carry it.
		named := !all && r.c.named.ship(k.hash, r.name, k.domain, now, once) // a snapshot is for one peer
		if all || (once && named) || (!once && (k.names > 0 || late)) {
			nm := packet.Name{Hash: k.hash, Resource: r.name, Domain: k.domain}
			if shipped {
				cp.Names = append(cp.Names, nm)
			}
			if marked && (cp != pkt || !shipped) {
				pkt.Names = append(pkt.Names, nm)
			}
			if k.names > 0 && !all && !once {
				k.names--
			}
		}
	}
	if all {
		return ahead
	}
	k.unshipped = 0
	k.urgent = false
	return ahead
}

// flush collects what the shard's urgent keys (every dirty key when all
// is set: the resource's global threshold was reached) have not shipped yet
// into pkt, as mode says (shipFlush, or shipOnce). The dirty list stays for
// the next tick.
func (r *Res) flush(sh *ownShard, p *params, s uint32, now int64, pkt, cp *packet.Packet, all bool, mode shipMode) {
	if all {
		for _, k := range sh.dirty {
			r.collect(p, k, s, now, pkt, cp, mode)
		}
	} else {
		for _, k := range sh.urgent {
			if k.urgent {
				r.collect(p, k, s, now, pkt, cp, mode)
			}
		}
	}
	sh.urgent = sh.urgent[:0]
}

// ship collects the shard's dirty keys into pkt at tick s, as mode says
// (shipTick, or shipOnce), and keeps on the dirty list those with
// shipments ahead.
func (r *Res) ship(sh *ownShard, p *params, s uint32, now int64, pkt, cp *packet.Packet, mode shipMode) {
	keep := sh.dirty[:0]
	for _, k := range sh.dirty {
		if r.collect(p, k, s, now, pkt, cp, mode) {
			keep = append(keep, k)
		} else {
			k.dirty = false
		}
	}
	clear(sh.dirty[len(keep):])
	sh.dirty = keep
	sh.urgent = sh.urgent[:0]
}

// sweep forgets keys with nothing live left at now (tick s).
func (r *Res) sweep(p *params, s uint32, now int64) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for d, k := range sh.keys {
			if k.dirty {
				continue
			}
			var drop packet.Packet
			r.collect(p, k, s-lastResend-1, now, &drop, &drop, shipAll) // drops what aged out, ships nothing
			if len(k.counts) == 0 && len(k.marks) == 0 {
				delete(sh.keys, d)
			}
		}
		sh.mu.Unlock()
	}
}

// snapshot appends every live entry of every key to pkt.
func (r *Res) snapshot(p *params, s uint32, now int64, pkt *packet.Packet) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, k := range sh.keys {
			r.collect(p, k, s, now, pkt, pkt, shipAll) // a snapshot is not a shipment to everyone: the schedule stays
		}
		sh.mu.Unlock()
	}
}

// counted reports whether this node counted a hit of domain in (slot,
// bucket).
func (r *Res) counted(domain string, slot uint32, bucket int64) bool {
	sh := r.shard(domain)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if k, ok := sh.keys[domain]; ok {
		for _, c := range k.counts {
			if c.slot == slot && c.bucket == bucket && c.value > 0 {
				return true
			}
		}
	}
	return false
}

// own returns this node's counts of domain within each slot's window at now,
// and its tier entries.
func (r *Res) own(domain string, now int64) (slots []int64, marks map[int]int64) {
	p := r.p.Load()
	sh := r.shard(domain)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k, ok := sh.keys[domain]
	if !ok {
		return nil, nil
	}
	slots = make([]int64, len(p.life))
	for _, c := range k.counts {
		if int(c.slot) < len(p.life) && c.bucket+p.life[c.slot] > now {
			slots[c.slot] += int64(c.value)
		}
	}
	for _, m := range k.marks {
		if m.slot == local.SlotReset {
			continue
		}
		if marks == nil {
			marks = make(map[int]int64)
		}
		marks[int(m.slot)] = m.at
	}
	return slots, marks
}

// mod is a mod b for b > 0, never negative.
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// fnv1a is the 64-bit FNV-1a hash of s.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// KeyHash is the hash a key travels under: FNV-1a of resource, a zero byte
// and domain. Every node computes the same one.
func KeyHash(resource, domain string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(resource); i++ {
		h ^= uint64(resource[i])
		h *= 1099511628211
	}
	h *= 1099511628211 // the zero byte
	for i := 0; i < len(domain); i++ {
		h ^= uint64(domain[i])
		h *= 1099511628211
	}
	return h
}
