// Package ui is the agent's dashboard: plain HTML, CSS and JavaScript
// embedded in the binary (go:embed), with no build step and nothing fetched
// from the network. The agent serves the page at GET / and its files under
// /ui/ (package api); the page reads the agent's documented JSON API and
// nothing else.
//
// Four views share one page: Live (decisions per second by outcome, the
// heaviest domains, a domain inspector), Cluster (peers, merge lag, drift
// flushes, the overshoot estimate), Simulator (burst tiers or gcra buckets
// run through POST /v1/simulate, the state kept in the URL) and Drift tuner
// (POST /v1/simulate/cluster, and its sweep over drifts, POST
// /v1/simulate/cluster/sweep, plotted against drift with the cheapest
// drift that meets a target and its YAML). Charts are plain SVG drawn by the page's own
// script: no charting library, so nothing to vendor or keep up to date.
//
// The package holds no state and imports nothing of the agent's: Lookup
// returns a file's bytes and content type.
package ui
