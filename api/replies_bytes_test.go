package api

import (
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// replyCases are the replies the agent writes with a Writer, other than the
// decision (package replies holds its own bytes), each written once per
// format: TestReplyBytes holds them to fixed bytes, so that a change of
// writer keeps every reply as it was.
var replyCases = []struct {
	name  string
	write func(w replies.Writer, b []byte) []byte
}{
	{"session", func(w replies.Writer, b []byte) []byte { return replies.AppendSession(w, b, "s-1f", 30000) }},
	{"released", func(w replies.Writer, b []byte) []byte { return replies.AppendReleased(w, b, 1, 2) }},
	{"session ended", func(w replies.Writer, b []byte) []byte { return replies.AppendInt(w, b, replies.KeyReleased, 3) }},
	{"transfer", func(w replies.Writer, b []byte) []byte { return replies.AppendTransfer(w, b, "x-9") }},
	{"reservation", func(w replies.Writer, b []byte) []byte {
		return writeReservation(w, b, &local.Reservation{Granted: 3, Hold: "h-1", DomainLimit: 5, GlobalLimit: 100,
			DomainHolds: 3, GlobalHolds: 40, Groups: []local.GroupHolds{{Name: "partners", Limit: 20, Holds: 3},
				{Name: "open", Limit: local.NoLimit, Holds: 300}}, Shadow: true, Lenient: true})
	}},
	{"reservation rejected", func(w replies.Writer, b []byte) []byte {
		return writeReservation(w, b, &local.Reservation{DomainLimit: local.NoLimit, GlobalLimit: local.NoLimit,
			DomainHolds: 5})
	}},
	{"seized", func(w replies.Writer, b []byte) []byte {
		return writeSeized(w, b, &local.Seized{Hold: "h-2", Resource: "t/copies", Domain: "acme",
			Groups: []string{"partners", "gold"}, Copies: 2})
	}},
	{"seized in no group", func(w replies.Writer, b []byte) []byte {
		return writeSeized(w, b, &local.Seized{Hold: "h-3", Resource: "t/copies", Domain: "solo", Copies: 1})
	}},
	{"error", func(w replies.Writer, b []byte) []byte {
		return replies.AppendError(w, b, "bad_request", "domain \"a\xffb\": too long")
	}},
	{"refund", func(w replies.Writer, b []byte) []byte { return replies.AppendInt(w, b, replies.KeyRemaining, 17) }},
	{"pace", func(w replies.Writer, b []byte) []byte {
		return writePacing(w, b, &local.Pacing{Wait: 1500 * time.Microsecond, Remaining: 4, Rate: 2.5}, false)
	}},
	{"observe", func(w replies.Writer, b []byte) []byte {
		return writePacing(w, b, &local.Pacing{Wait: 0, Remaining: 4, Rate: 1.0 / 3, Lenient: true}, true)
	}},
	{"observe without rate", func(w replies.Writer, b []byte) []byte {
		return writePacing(w, b, &local.Pacing{Wait: time.Second, Remaining: -1, Rate: math.Inf(1)}, true)
	}},
}

func TestReplyBytes(t *testing.T) {
	want := map[string][2]string{ // JSON, MessagePack in hex
		"session": {"{\"session\":\"s-1f\",\"ttl_ms\":30000}",
			"82a773657373696f6ea4732d3166a674746c5f6d73cd7530"},
		"released": {"{\"released\":1,\"held\":2}",
			"82a872656c656173656401a468656c6402"},
		"session ended": {"{\"released\":3}",
			"81a872656c656173656403"},
		"transfer": {"{\"transfer\":\"x-9\"}",
			"81a87472616e73666572a3782d39"},
		"reservation": {"{\"granted\":3,\"hold\":\"h-1\",\"domain_limit\":5,\"global_limit\":100,\"domain_holds\":3,\"global_holds\":40,\"groups\":[{\"name\":\"partners\",\"limit\":20,\"holds\":3},{\"name\":\"open\",\"holds\":300}],\"shadow\":true,\"lenient\":true}",
			"89a76772616e74656403a4686f6c64a3682d31ac646f6d61696e5f6c696d697405ac676c6f62616c5f6c696d697464ac646f6d61696e5f686f6c647303ac676c6f62616c5f686f6c647328a667726f7570739283a46e616d65a8706172746e657273a56c696d697414a5686f6c64730382a46e616d65a46f70656ea5686f6c6473cd012ca6736861646f77c3a76c656e69656e74c3"},
		"reservation rejected": {"{\"granted\":0,\"domain_holds\":5,\"global_holds\":0,\"groups\":[]}",
			"84a76772616e74656400ac646f6d61696e5f686f6c647305ac676c6f62616c5f686f6c647300a667726f75707390"},
		"seized": {"{\"hold\":\"h-2\",\"resource\":\"t/copies\",\"domain\":\"acme\",\"groups\":[\"partners\",\"gold\"],\"copies\":2}",
			"85a4686f6c64a3682d32a87265736f75726365a8742f636f70696573a6646f6d61696ea461636d65a667726f75707392a8706172746e657273a4676f6c64a6636f7069657302"},
		"seized in no group": {"{\"hold\":\"h-3\",\"resource\":\"t/copies\",\"domain\":\"solo\",\"groups\":[],\"copies\":1}",
			"85a4686f6c64a3682d33a87265736f75726365a8742f636f70696573a6646f6d61696ea4736f6c6fa667726f75707390a6636f7069657301"},
		"error": {"{\"error\":{\"code\":\"bad_request\",\"message\":\"domain \\\"a\\ufffdb\\\": too long\"}}",
			"81a56572726f7282a4636f6465ab6261645f72657175657374a76d657373616765b8646f6d61696e202261efbfbd62223a20746f6f206c6f6e67"},
		"refund": {"{\"remaining\":17}",
			"81a972656d61696e696e6711"},
		"pace": {"{\"wait_ms\":2}",
			"81a7776169745f6d7302"},
		"observe": {"{\"wait_ms\":0,\"remaining\":4,\"rate_per_s\":0.333333,\"lenient\":true}",
			"84a7776169745f6d7300a972656d61696e696e6704aa726174655f7065725f73cb3fd55553ef6b5d46a76c656e69656e74c3"},
		"observe without rate": {"{\"wait_ms\":1000}",
			"81a7776169745f6d73cd03e8"},
	}
	for _, c := range replyCases {
		j := string(c.write(replies.NewWriter(formatJSON), nil))
		m := hex.EncodeToString(c.write(replies.NewWriter(formatMsgpack), nil))
		if w, ok := want[c.name]; !ok {
			t.Errorf("%s: no bytes to compare with: JSON %s, MessagePack %s", c.name, j, m)
		} else if j != w[0] || m != w[1] {
			t.Errorf("%s:\n JSON %s\n want %s\n MessagePack %s\n want        %s", c.name, j, w[0], m, w[1])
		}
	}
}
