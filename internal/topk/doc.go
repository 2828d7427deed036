// Package topk finds the heaviest keys of a stream over a sliding time
// window, in memory bounded by a fixed capacity however many distinct keys
// the stream holds.
//
// Each summary is Space-Saving (Metwally, Agrawal and El Abbadi, 2005): at
// most Capacity counters; a key not counted takes over the smallest counter
// m, as m+1 with an error of m. A summary of n adds overestimates every
// key it counts by at most its error (≤ m ≤ n/Capacity), and counts every key
// whose true count exceeds n/Capacity.
//
// A Window rotates Slots summaries, each covering Span of time, and splits
// keys among Shards (by a hash) so that concurrent adds rarely share a lock.
// Top merges the live slots: a key's Count is the sum over slots of its
// counter there, or the slot's smallest counter where it has none, so it is
// never below the true count and above it by at most Err ≤ N/Capacity, N
// being the adds in the window. Time is an argument: no method reads a clock.
package topk
