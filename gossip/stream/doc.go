// Package stream numbers an origin's sync messages and finds, at each
// receiver, the ones that never arrived, so that a changed bucket can be
// shipped once and a lost datagram repaired by asking for it again instead
// of by blind resends.
//
// An origin numbers its messages 1, 2, … per incarnation (Out.Sent) and
// keeps the recent ones, bounded in count and bytes, to send again on
// request (Out.Get). A receiver notes every seq it hears per origin
// (In.Heard): a seq past the next one expected opens a gap, one already
// heard is a duplicate. A gap left open for Options.Wait (reordering) is
// asked for (In.Due), again every Options.Retry, at most Options.Tries
// times; then, or when a gap is wider than Options.MaxGap, the receiver
// resyncs with the origin instead (a full snapshot). A snapshot that holds
// every message before a seq closes the gaps below it (In.Covered).
//
// A node's messages to one receiver (owner mode's counts to a key's owner,
// and sums) are numbered per receiver, and the recent ones of all
// receivers kept together (Targets); the receiver notes them with an In of
// their own and asks for its gaps like any stream's.
//
// The package is pure: no clock, no network, no goroutines; time is an
// argument in nanoseconds. gossip runs it over memberlist and the cluster
// simulator over its virtual network, so both repair loss the same way.
package stream
