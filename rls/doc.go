// Package rls is Envoy's global rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) on obol:
// a drop-in replacement for envoyproxy/ratelimit that needs no Redis, its
// counters kept in memory and shared across agents through obol's gossip.
//
// It reads envoyproxy/ratelimit's YAML config as it is (config.go), maps
// each request descriptor onto it as GetLimit does (match.go), counts
// fixed windows aligned to the wall-clock unit with their exact decisions
// (window.go, the pure rules; store.go, the counters and the cluster
// seam), writes the response into a pooled reply (service.go, reply.go),
// and serves it over gRPC on a Unix socket and TCP, with the HTTP /json and
// /healthcheck endpoints (grpc.go, http.go). Metrics carry
// envoyproxy/ratelimit's names (stats.go).
//
// Time is an argument everywhere but the servers' edge, which reads the
// wall clock once per request.
package rls
