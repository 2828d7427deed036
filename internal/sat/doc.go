// Package sat is saturating integer arithmetic: sums and products that
// stop at the type's bounds instead of wrapping. Every counter of hits a
// request or a peer can make grow (the Envoy service's windows, the engine's
// tiers, a gcra bucket's spends, the counts merged from peers) adds through
// it, so that a count only ever grows toward its ceiling and a huge claim
// reads as "over every limit", never as a small number.
//
// The functions are pure and branch-light; each inlines.
package sat
