// Package gossip moves sync packets between obol agents over hashicorp
// memberlist; it knows nothing of limits.
//
// memberlist provides membership (join, failure detection, leave), the
// keyring (AES-GCM) and the per-mesh label. What travels is a packet.Packet
// (package packet: the types and the wire codec, without memberlist): one
// node's cumulative counts, tier marks and gauges for some keys. Deltas go
// by direct fan-out: Send splits a packet into messages that fit one
// datagram (Budget) and sends each, best effort, to every live member.
// Push/pull anti-entropy, and every join, carry a full snapshot
// (Handler.Snapshot) both ways. Departures reach Handler.NodeGone.
// Receivers keep maxima, so loss, duplication and reordering are harmless.
//
// While every live member reads them (memberlist's delegate protocol max),
// a node numbers its messages (Repairs) and keeps the recent ones; each
// receiver follows every peer's numbers (package stream) and asks for the
// gaps with a Request, which the peer answers by sending them again, or by
// a push/pull when they are gone (repair.go). A Request also asks for the
// names of key hashes, which a Handler that is a NameSource tells. With a
// member of an earlier release in the mesh, messages go unnumbered and the
// merging layer resends changes on its own schedule.
//
// While every live member also reads sums (a delegate protocol max of 2;
// Aggregates), the merging layer may run in owner mode (reconcile.Router):
// Owners places each key hash on an owner and a successor, on a
// consistent-hash ring of the live members' names (package ring) that
// every node builds alike and rebuilds when the live set changes (Epoch);
// SendTo sends a packet to one member alone, such as a key's owner, or a
// sum (packet.Packet.Sum) from the owner to a node, numbered in this
// node's stream to that member while Reships (packet.MsgTargeted) and
// unnumbered otherwise (route.go). Config.NoOwners keeps a node, and so the mesh, out of it.
//
// memberlist delivers every datagram on one goroutine, behind a queue of
// 4096 that it drops from when full. NotifyMsg only checks the size, reads
// the sender's name (packet.Peek), copies the datagram and queues it
// for the receive worker the name hashes to (Config.ReceiveWorkers). The
// worker dispatches on the message's type (packet.Type) in one switch: a
// sync message is decoded and handed to Handler.HandlePacket, a request
// or a reship request is answered (repair.go). One origin's messages are
// handled in the order memberlist delivered them, origins in parallel
// (receive.go). A
// datagram that finds its worker's queue full is dropped, counted in
// Stats.QueueDrops and logged at warn at most once a minute; the gap it
// leaves is asked for like any loss.
//
// A Config (config.go) becomes memberlist's profile in one pure function
// (profile.go); the Node's API is in node.go, what memberlist calls it
// back with in delegate.go, the receive workers in receive.go, the
// repair of numbered streams in repair.go and owner placement in
// route.go. Three loops run on the node's injected clock
// (Config.Clock), each a step(now): the beacon, which calls on peers
// recently declared dead so that a healed partition is noticed at once,
// and the rejoin, which joins seed addresses that are not members
// (loops.go). A peer heard from after a silence of ResyncAfter on that
// clock (times HeartbeatStretch in a mesh of more than 101 members that
// all stretch their idle heartbeats) gets a push/pull. Tests inject loss,
// delay and partitions through Config.Transport (an internal
// fault-injecting transport).
package gossip
