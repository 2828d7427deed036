// Package ring places keys on members: a consistent-hash ring over the
// names of the live members, each at Replicas points, on which a key
// hash's owner is the member of the first point at or after the hash and
// its successor the next distinct member. When a member joins or goes,
// only the keys of its points move (about 1/N of them), and the successor
// of a key whose owner went is its new owner. Pure: a Ring is immutable,
// safe for concurrent use, and every node that lists the same members
// places every key alike.
package ring
