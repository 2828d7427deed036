package ring

import (
	"slices"
	"sort"
)

// Replicas is how many points each member has on the ring: with 64, the
// share of keys a member owns is within about ±25% of 1/N at any N (the
// spread of consistent hashing falls as 1/√Replicas).
const Replicas = 64

type point struct {
	at     uint64
	member int32
}

// Ring is the placement of keys over a set of members. The zero value
// and a Ring of no members own nothing.
type Ring struct {
	points  []point
	members []string
}

// New returns the ring of members (their order and duplicates do not
// matter; empty names are skipped).
func New(members []string) *Ring {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	if len(ms) > 0 && ms[0] == "" {
		ms = ms[1:]
	}
	r := &Ring{members: ms, points: make([]point, 0, len(ms)*Replicas)}
	for i, m := range ms {
		h := fnv(m)
		for j := range Replicas {
			r.points = append(r.points, point{at: mix(h + uint64(j)*0x9e3779b97f4a7c15), member: int32(i)})
		}
	}
	slices.SortFunc(r.points, func(a, b point) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return int(a.member - b.member)
	})
	return r
}

// Members returns how many members the ring places keys on.
func (r *Ring) Members() int {
	if r == nil {
		return 0
	}
	return len(r.members)
}

// Names returns the ring's members, sorted. The slice is the ring's own:
// the caller must not modify it.
func (r *Ring) Names() []string {
	if r == nil {
		return nil
	}
	return r.members
}

// Has reports whether name is a member of the ring.
func (r *Ring) Has(name string) bool {
	if r == nil {
		return false
	}
	_, ok := slices.BinarySearch(r.members, name)
	return ok
}

// Owners returns the owner of key hash h and its successor ("" when the
// ring has fewer members than that).
func (r *Ring) Owners(h uint64) (owner, successor string) {
	if r == nil || len(r.points) == 0 {
		return "", ""
	}
	x := mix(h)
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].at >= x })
	n := len(r.points)
	first := r.points[i%n].member
	owner = r.members[first]
	for k := 1; k < n; k++ {
		if m := r.points[(i+k)%n].member; m != first {
			return owner, r.members[m]
		}
	}
	return owner, ""
}

// Walk appends to dst the members that key hash h would fall to in turn,
// distinct, up to n of them: the owner and the successor first (as
// Owners), then those that would take over were those to go, in that
// order. Fewer when the ring has fewer members.
func (r *Ring) Walk(dst []string, h uint64, n int) []string {
	if r == nil || len(r.points) == 0 || n <= 0 {
		return dst
	}
	n = min(n, len(r.members))
	x := mix(h)
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].at >= x })
	var seen []int32
	for k := 0; k < len(r.points) && len(seen) < n; k++ {
		m := r.points[(i+k)%len(r.points)].member
		if !slices.Contains(seen, m) {
			seen = append(seen, m)
			dst = append(dst, r.members[m])
		}
	}
	return dst
}

// fnv is the 64-bit FNV-1a hash of s.
func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix is splitmix64's finalizer: it spreads hashes whose low bits vary
// little (FNV of similar names) over the whole ring.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
