package packet_test

import (
	"fmt"

	"github.com/obol-dev/obol/gossip/packet"
)

// Split packs a delta into datagram-sized messages; each decodes on its own.
func ExampleSplit() {
	p := &packet.Packet{From: "node-a", Incarnation: 1}
	for k := range 150 {
		h := uint64(k + 1)
		p.Names = append(p.Names, packet.Name{Hash: h, Resource: "api/search", Domain: fmt.Sprintf("tenant-%d", k)})
		p.Counts = append(p.Counts, packet.Count{Hash: h, Bucket: 1_700_000_000_000, Value: 3})
	}
	msgs, err := packet.Split(p, 1309)
	if err != nil {
		panic(err)
	}
	keys := 0
	for _, m := range msgs {
		q, err := packet.Decode(m)
		if err != nil {
			panic(err)
		}
		keys += len(q.Names)
	}
	fmt.Println(len(msgs), "messages,", keys, "keys")
	// Output: 4 messages, 150 keys
}

// A round trip through the wire form.
func ExampleEncode() {
	b, err := packet.Encode(&packet.Packet{
		From:   "node-a",
		Names:  []packet.Name{{Hash: 42, Resource: "jobs/sandbox", Domain: "acme"}},
		Gauges: []packet.Gauge{{Hash: 42, Value: 3, Version: 7}},
	})
	if err != nil {
		panic(err)
	}
	p, err := packet.Decode(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(b), "bytes:", p.From, p.Names[0].Resource, p.Names[0].Domain, p.Gauges[0].Value)
	// Output: 39 bytes: node-a jobs/sandbox acme 3
}
