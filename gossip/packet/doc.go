// Package packet is the sync message that obol agents exchange: its types
// and its wire codec. It knows nothing of memberlist or of limits, so the
// merging layer and the tools that read or write messages need not link
// the network.
//
// Every message starts with its type (Type: MsgSync, MsgSeqSync, MsgSum
// and MsgTargeted are sync messages, MsgRequest and MsgReship requests,
// MsgState a mesh state), whose one layout types.go lists. A Packet is one
// node's cumulative counts, tier marks and gauges for some keys, with the
// names those key hashes stand for; its Type follows from its fields.
// Encode writes a packet as one message of any size (push/pull state);
// Split writes it as messages of at most a given budget each (datagrams),
// keeping each entry with its key's name. Both write msgpack arrays with
// compact ints, entries grouped by key hash and times as offsets from a
// base. Decode reads one sync message strictly, DecodeRequest one request,
// with the MessagePack reader the API uses (internal/wire/mpwire): anything
// else is an error wrapping ErrMalformed or ErrVersion. Peek reads a
// message's type and origin alone, for the receiver to dispatch on.
// Receivers keep maxima, so loss, duplication and reordering of messages
// are harmless.
//
// The codec is split by concern: types.go (the enum, the layouts, the
// values), encode.go (grouping, sizes, Encode, Split, EncodeRequest),
// decode.go (Decode, DecodeRequest, Peek) and state.go (the mesh state).
package packet
