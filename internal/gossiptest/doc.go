// Package gossiptest is an in-process network for memberlist meshes under
// test: fault-injecting transports that lose, delay and partition traffic.
//
// A FaultNet is one policy (a drop probability, a fixed datagram delay, a
// partition) shared by the transports it makes: Listen binds a memberlist
// NetTransport to a free port on 127.0.0.1 and wraps it, Wrap wraps any
// transport. Each transport counts what it sent, lost and received
// (FaultStats). Give each node of a mesh a transport of one FaultNet
// (gossip.Config.Transport) and steer faults for the whole mesh from it.
// Only tests and benchmark harnesses import it.
//
// This package is internal: it is shared by obol's own packages and tests.
package gossiptest
