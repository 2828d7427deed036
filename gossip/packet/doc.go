// Package packet is the sync message that obol agents exchange: its types
// and its wire codec. It knows nothing of memberlist or of limits, so the
// merging layer and the tools that read or write messages need not link
// the network.
//
// A Packet is one node's cumulative counts, tier marks and gauges for some
// keys, with the names those key hashes stand for. Encode writes a packet as
// one message of any size (push/pull state); Split writes it as messages of
// at most a given budget each (datagrams), keeping each entry with its key's
// name. Both write msgpack arrays with compact ints, entries grouped by key
// hash and times as offsets from a base (see WireVersion). Decode reads one
// message strictly, with the MessagePack reader the API uses
// (internal/wire/mpwire): anything else is an error wrapping ErrMalformed or
// ErrVersion. Receivers keep maxima, so loss, duplication and reordering of
// messages are harmless.
package packet
