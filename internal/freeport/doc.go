// Package freeport finds a loopback TCP port that is free now, for a test or
// a benchmark that must start a program (the agent, a proxy, a peer
// service) which cannot be told to pick its own port and report it.
//
// A port the kernel hands out for ":0" comes from its ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768–60999 by default), the
// range every outgoing connection and every other ":0" listener on the
// machine also draws from: between the moment such a port is found free and
// the moment the program binds it, another test's connection may take it
// ("address already in use"). Loopback instead picks a random port below
// that range, where the kernel never assigns one by itself, and checks that
// it can be bound (TCP and UDP) before returning it. Two callers that pick
// the same port at the same instant remain possible, at odds of one in
// thousands per pair.
//
// This package is internal: it is shared by obol's own tests and benches.
package freeport
