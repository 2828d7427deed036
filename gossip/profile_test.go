package gossip

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// profileView is what profile sets from a Config, as comparable fields.
type profileView struct {
	name      string
	bindAddr  string
	bindPort  int
	advAddr   string
	advPort   int
	key       string
	label     string
	transport bool
}

func viewProfile(mc *memberlist.Config) profileView {
	return profileView{
		name: mc.Name, bindAddr: mc.BindAddr, bindPort: mc.BindPort,
		advAddr: mc.AdvertiseAddr, advPort: mc.AdvertisePort,
		key: string(mc.SecretKey), label: mc.Label, transport: mc.Transport != nil,
	}
}

// TestProfile checks what profile tells memberlist for each kind of
// config, without starting it: the addresses, key, label and transport
// from the config, and the same LAN profile with obol's changes for all.
func TestProfile(t *testing.T) {
	tr := (&memberlist.MockNetwork{}).NewTransport("mock")
	tests := []struct {
		name string
		cfg  Config
		want profileView
	}{
		{name: "name only: every interface, the default port",
			cfg:  Config{Name: "a"},
			want: profileView{name: "a", bindAddr: "0.0.0.0", bindPort: 7946, advPort: 7946}},
		{name: "empty bind host",
			cfg:  Config{Name: "a", Bind: ":7000"},
			want: profileView{name: "a", bindAddr: "0.0.0.0", bindPort: 7000, advPort: 7000}},
		{name: "bind and advertise with ports",
			cfg:  Config{Name: "a", Bind: "127.0.0.1:0", Advertise: "10.0.0.1:8000"},
			want: profileView{name: "a", bindAddr: "127.0.0.1", bindPort: 0, advAddr: "10.0.0.1", advPort: 8000}},
		{name: "advertise without a port takes the bound one",
			cfg:  Config{Name: "a", Bind: "10.0.0.5:7000", Advertise: "10.0.0.1"},
			want: profileView{name: "a", bindAddr: "10.0.0.5", bindPort: 7000, advAddr: "10.0.0.1", advPort: 7000}},
		{name: "advertise port 0 takes the bound one",
			cfg:  Config{Name: "a", Bind: "10.0.0.5:7000", Advertise: "10.0.0.1:0"},
			want: profileView{name: "a", bindAddr: "10.0.0.5", bindPort: 7000, advAddr: "10.0.0.1", advPort: 7000}},
		{name: "ipv6",
			cfg:  Config{Name: "a", Bind: "[::1]:7946", Advertise: "[::1]:8000"},
			want: profileView{name: "a", bindAddr: "::1", bindPort: 7946, advAddr: "::1", advPort: 8000}},
		{name: "key and label",
			cfg:  Config{Name: "a", SecretKey: testKey, Label: "obol"},
			want: profileView{name: "a", bindAddr: "0.0.0.0", bindPort: 7946, advPort: 7946, key: string(testKey), label: "obol"}},
		{name: "own transport; Tune is New's, not the profile's",
			cfg:  Config{Name: "a", Transport: tr, Tune: func(*memberlist.Config) { panic("Tune called") }},
			want: profileView{name: "a", bindAddr: "0.0.0.0", bindPort: 7946, advPort: 7946, transport: true}},
	}
	lan := memberlist.DefaultLANConfig()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			mc := profile(tc.cfg)
			if got := viewProfile(mc); got != tc.want {
				t.Errorf("profile sets\n %+v\nwant\n %+v", got, tc.want)
			}
			// The same for every config: LAN timers, obol's changes.
			if mc.ProbeInterval != lan.ProbeInterval || mc.ProbeTimeout != lan.ProbeTimeout || mc.SuspicionMult != lan.SuspicionMult ||
				mc.GossipInterval != lan.GossipInterval || mc.TCPTimeout != lan.TCPTimeout || mc.PushPullInterval != lan.PushPullInterval {
				t.Errorf("timers differ from DefaultLANConfig: probe %v/%v suspicion %d gossip %v tcp %v push/pull %v",
					mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult, mc.GossipInterval, mc.TCPTimeout, mc.PushPullInterval)
			}
			if mc.EnableCompression || mc.DeadNodeReclaimTime != time.Second || mc.HandoffQueueDepth != 4096 || mc.UDPBufferSize != MaxDatagram {
				t.Errorf("compression %v, DeadNodeReclaimTime %v, HandoffQueueDepth %d, UDPBufferSize %d; want false, 1s, 4096, %d",
					mc.EnableCompression, mc.DeadNodeReclaimTime, mc.HandoffQueueDepth, mc.UDPBufferSize, MaxDatagram)
			}
			if mc.Delegate != nil || mc.Events != nil || mc.Conflict != nil || mc.Logger == nil {
				t.Errorf("delegates %v %v %v (want none), logger %v (want one)", mc.Delegate, mc.Events, mc.Conflict, mc.Logger)
			}
		})
	}
}

// TestProfileKeyIsCopied: the profile holds its own copy of the key.
func TestProfileKeyIsCopied(t *testing.T) {
	key := []byte(string(testKey))
	mc := profile(Config{Name: "a", SecretKey: key})
	key[0] = 'X'
	if string(mc.SecretKey) != string(testKey) {
		t.Fatalf("SecretKey follows the caller's slice: %q", mc.SecretKey)
	}
}

// TestProfileLogger: memberlist's log lines reach the config's logger as
// debug records of component memberlist, their level as an attribute.
func TestProfileLogger(t *testing.T) {
	logs := &logCapture{}
	mc := profile(Config{Name: "a", Logger: logs.logger()})
	mc.Logger.Printf("[WARN] memberlist: Was able to connect to b over TCP but UDP probes failed")
	got := logs.match("Was able to connect to b over TCP but UDP probes failed", map[string]string{"component": "memberlist", "memberlist_level": "WARN"})
	if len(got) != 1 || got[0].level != slog.LevelDebug {
		t.Fatalf("memberlist's line logged as:\n%s", logs)
	}
}
