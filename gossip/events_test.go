package gossip

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/internal/gossiptest"
)

// logRecord is one captured log record, its attributes rendered as text.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// logCapture keeps every record logged through its logger. Safe for
// concurrent use.
type logCapture struct {
	mu   sync.Mutex
	recs []logRecord
}

func (c *logCapture) logger() *slog.Logger { return slog.New(&captureHandler{c: c}) }

// match returns the records with message msg whose attributes include want.
func (c *logCapture) match(msg string, want map[string]string) []logRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []logRecord
	for _, r := range c.recs {
		if r.msg != msg {
			continue
		}
		ok := true
		for k, v := range want {
			if r.attrs[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// prefixed returns the records whose message starts with prefix.
func (c *logCapture) prefixed(prefix string) []logRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []logRecord
	for _, r := range c.recs {
		if strings.HasPrefix(r.msg, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// events returns the membership records (peer events and conflicts).
func (c *logCapture) events() []logRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []logRecord
	for _, r := range c.recs {
		if strings.HasPrefix(r.msg, "gossip: peer ") || strings.HasPrefix(r.msg, "gossip: node name conflict") {
			out = append(out, r)
		}
	}
	return out
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, r := range c.recs {
		fmt.Fprintf(&b, "%s %q %v\n", r.level, r.msg, r.attrs)
	}
	return b.String()
}

// captureHandler is the slog.Handler of a logCapture (groups are not used
// by this package and are flattened).
type captureHandler struct {
	c     *logCapture
	attrs []slog.Attr
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.c.mu.Lock()
	h.c.recs = append(h.c.recs, rec)
	h.c.mu.Unlock()
	return nil
}

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &captureHandler{c: h.c, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *captureHandler) WithGroup(string) slog.Handler { return h }

// member is a memberlist node named name on 127.0.0.1:port with meta of
// incarnation inc.
func member(name string, port int, inc uint64, leaving bool) *memberlist.Node {
	return &memberlist.Node{Name: name, Addr: net.ParseIP("127.0.0.1"), Port: uint16(port), Meta: encodeMeta(inc, leaving)}
}

// TestEventLogs drives the event delegate directly with sequences of
// memberlist events about a peer x, and checks the record the last event
// logs.
func TestEventLogs(t *testing.T) {
	type step func(d *delegate)
	join := func(port int, inc uint64) step {
		return func(d *delegate) { d.NotifyJoin(member("x", port, inc, false)) }
	}
	leave := func(port int, inc uint64, leaving bool) step {
		return func(d *delegate) { d.NotifyLeave(member("x", port, inc, leaving)) }
	}
	update := func(port int, inc uint64, leaving bool) step {
		return func(d *delegate) { d.NotifyUpdate(member("x", port, inc, leaving)) }
	}
	tests := []struct {
		name  string
		steps []step
		level slog.Level
		msg   string
		attrs map[string]string
	}{
		{name: "joined", steps: []step{join(1, 7)}, level: slog.LevelInfo,
			msg: "gossip: peer joined", attrs: map[string]string{"node": "x", "addr": "127.0.0.1:1", "incarnation": "7"}},
		{name: "declared dead", steps: []step{join(1, 7), leave(1, 7, false)}, level: slog.LevelWarn,
			msg: "gossip: peer declared dead", attrs: map[string]string{"node": "x", "addr": "127.0.0.1:1"}},
		{name: "left", steps: []step{join(1, 7), leave(1, 7, true)}, level: slog.LevelInfo,
			msg: "gossip: peer left", attrs: map[string]string{"node": "x", "addr": "127.0.0.1:1"}},
		{name: "updated", steps: []step{join(1, 7), update(1, 7, true)}, level: slog.LevelInfo,
			msg: "gossip: peer updated", attrs: map[string]string{"node": "x", "leaving": "true", "incarnation": "7"}},
		{name: "left after announcing it", steps: []step{join(1, 7), update(1, 7, true), leave(1, 7, false)}, level: slog.LevelInfo,
			msg: "gossip: peer left", attrs: map[string]string{"node": "x"}},
		{name: "back after a false death", steps: []step{join(1, 7), leave(1, 7, false), join(1, 7)}, level: slog.LevelInfo,
			msg: "gossip: peer back", attrs: map[string]string{"node": "x", "was": "dead", "restarted": "false", "addr": "127.0.0.1:1"}},
		{name: "back restarted at the same address", steps: []step{join(1, 7), leave(1, 7, false), join(1, 8)}, level: slog.LevelInfo,
			msg: "gossip: peer back", attrs: map[string]string{"node": "x", "was": "dead", "restarted": "true", "incarnation": "8"}},
		{name: "rejoined at a new address after leaving", steps: []step{join(1, 7), leave(1, 7, true), join(2, 8)}, level: slog.LevelInfo,
			msg: "gossip: peer rejoined at a new address", attrs: map[string]string{"node": "x", "addr": "127.0.0.1:2", "old_addr": "127.0.0.1:1", "was": "left", "restarted": "true"}},
		{name: "rejoined at a new address after dying", steps: []step{join(1, 7), leave(1, 7, false), join(2, 8)}, level: slog.LevelInfo,
			msg: "gossip: peer rejoined at a new address", attrs: map[string]string{"node": "x", "was": "dead", "old_addr": "127.0.0.1:1"}},
		{name: "name conflict", steps: []step{join(1, 7), func(d *delegate) { d.NotifyConflict(member("x", 1, 7, false), member("x", 2, 9, false)) }},
			level: slog.LevelWarn, msg: "gossip: node name conflict", attrs: map[string]string{"node": "x", "addr": "127.0.0.1:1", "other_addr": "127.0.0.1:2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logCapture{}
			nd := start(t, gossiptest.NewFaultNet(), "solo", func(c *Config) {
				c.Tune, c.Logger, c.ResyncAfter = quiet, logs.logger(), -1
			})
			d := (*delegate)(nd.Node)
			for _, s := range tc.steps {
				s(d)
			}
			evs := logs.events()
			if len(evs) != len(tc.steps) {
				t.Fatalf("%d events logged for %d steps:\n%s", len(evs), len(tc.steps), logs)
			}
			last := evs[len(evs)-1]
			if last.level != tc.level || !strings.HasPrefix(last.msg, tc.msg) {
				t.Fatalf("last event %s %q, want %s %q:\n%s", last.level, last.msg, tc.level, tc.msg, logs)
			}
			for k, v := range tc.attrs {
				if last.attrs[k] != v {
					t.Errorf("%s = %q, want %q (record %v)", k, last.attrs[k], v, last.attrs)
				}
			}
			if last.attrs["component"] != "gossip" {
				t.Errorf("record without component=gossip: %v", last.attrs)
			}
			// This node's own membership is never logged as a peer's.
			for _, r := range evs {
				if r.attrs["node"] == "solo" {
					t.Errorf("self logged as a peer: %q %v", r.msg, r.attrs)
				}
			}
		})
	}
}

// TestMeshEventsLogged: memberlist's real events, over the in-process mesh,
// reach the log: peers joining, one declared dead behind a partition and
// back after the heal, one leaving and coming back at a new address.
func TestMeshEventsLogged(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	logs := &logCapture{}
	tune := func(c *memberlist.Config) {
		fast(c)
		c.DeadNodeReclaimTime = time.Millisecond // let a restarted node back at once
	}
	nodes := mesh(t, fn, 3, func(c *Config) {
		c.Tune = tune
		if c.Name == "n0" {
			c.Logger = logs.logger()
		}
	})
	wait := func(within time.Duration, msg, node string, extra map[string]string) logRecord {
		t.Helper()
		want := map[string]string{"node": node}
		for k, v := range extra {
			want[k] = v
		}
		var got []logRecord
		eventually(t, within, fmt.Sprintf("n0 logs %q for %s; log:\n%s", msg, node, logs), func() bool {
			got = logs.match(msg, want)
			return len(got) > 0
		})
		return got[len(got)-1]
	}
	for _, nd := range nodes[1:] {
		if r := wait(5*time.Second, "gossip: peer joined", nd.Name(), map[string]string{"addr": nd.Addr()}); r.level != slog.LevelInfo {
			t.Errorf("peer joined at %s", r.level)
		}
	}

	fn.Partition(nodes[2].Addr())
	if r := wait(15*time.Second, "gossip: peer declared dead", "n2", nil); r.level != slog.LevelWarn {
		t.Errorf("peer declared dead at %s", r.level)
	}
	fn.Heal()
	wait(10*time.Second, "gossip: peer back", "n2", map[string]string{"was": "dead", "restarted": "false", "addr": nodes[2].Addr()})

	old := nodes[1]
	if err := old.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = old.Shutdown()
	wait(20*time.Second, "gossip: peer left", "n1", nil) // a leave travels by gossip: slow on a loaded machine
	re := start(t, fn, "n1", func(c *Config) {
		c.Tune = tune
		c.Incarnation = old.Incarnation() + 1
		c.Join = []string{nodes[0].Addr()}
	})
	wait(10*time.Second, "gossip: peer rejoined at a new address", "n1", map[string]string{
		"addr": re.Addr(), "old_addr": old.Addr(), "was": "left", "restarted": "true",
		"incarnation": strconv.FormatUint(re.Incarnation(), 10),
	})
}

// TestJoinLogs: a join that reaches a seed logs how many it reached; one
// that reaches none says so, with the error, and the rejoin that later
// succeeds logs it.
func TestJoinLogs(t *testing.T) {
	fn := gossiptest.NewFaultNet()
	seed := start(t, fn, "seed", nil)

	logs := &logCapture{}
	start(t, fn, "ok", func(c *Config) { c.Join, c.Logger = []string{seed.Addr()}, logs.logger() })
	if r := logs.match("gossip: joined", map[string]string{"reached": "1", "members": "2"}); len(r) != 1 {
		t.Errorf("a join that reached the seed logged:\n%s", logs)
	}

	tr, err := fn.Listen()
	if err != nil {
		t.Fatal(err)
	}
	fn.Partition(tr.Addr())
	fake := clock.NewFake(time.Unix(0, 0))
	logs = &logCapture{}
	n, err := New(Config{
		Name: "late", Transport: tr, Tune: quick, Logger: logs.logger(),
		Join: []string{seed.Addr()}, RejoinInterval: time.Second, Clock: fake, BeaconInterval: -1,
	}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	failed := logs.match("gossip: join failed: no peer reached; running alone, retrying", map[string]string{"reached": "0", "retry_every": "1s"})
	if len(failed) != 1 || failed[0].level != slog.LevelWarn || !strings.Contains(failed[0].attrs["err"], seed.Addr()) {
		t.Fatalf("a join that reached nobody logged:\n%s", logs)
	}
	if r := logs.match("gossip: joined", nil); len(r) != 0 {
		t.Fatalf("a failed join logged a success:\n%s", logs)
	}
	fn.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal("the rejoin loop is not waiting on the clock")
	}
	fake.Advance(2 * time.Second)
	eventually(t, 10*time.Second, "the rejoin is logged", func() bool {
		return len(logs.match("gossip: rejoined", map[string]string{"reached": "1"})) == 1
	})
}

// TestExposedWithoutKeyWarns: gossip off loopback without a key logs a
// warning at start; on loopback, or with a key, it does not.
func TestExposedWithoutKeyWarns(t *testing.T) {
	const msg = "gossip: listening off loopback without a secret key"
	tests := []struct {
		name      string
		bind      string // "" uses a fault transport on 127.0.0.1
		advertise string
		key       []byte
		warn      bool
	}{
		{name: "every interface, no key", bind: "0.0.0.0:0", advertise: "127.0.0.1", warn: true},
		{name: "every interface, a key", bind: "0.0.0.0:0", advertise: "127.0.0.1", key: testKey},
		{name: "loopback, no key", bind: "127.0.0.1:0"},
		{name: "own transport advertising loopback, no key"},
		{name: "own transport advertising elsewhere, no key", advertise: "192.0.2.1", warn: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logCapture{}
			cfg := Config{Name: "a", Bind: tc.bind, Advertise: tc.advertise, SecretKey: tc.key, Logger: logs.logger(),
				Tune: quiet, RejoinInterval: -1, BeaconInterval: -1}
			if tc.bind == "" {
				tr, err := gossiptest.NewFaultNet().Listen()
				if err != nil {
					t.Fatal(err)
				}
				cfg.Transport = tr
			}
			n, err := New(cfg, &recorder{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = n.Shutdown() })
			got := logs.prefixed(msg)
			if tc.warn != (len(got) == 1) {
				t.Fatalf("warned %d times, want warn=%v:\n%s", len(got), tc.warn, logs)
			}
			if tc.warn && (got[0].level != slog.LevelWarn || got[0].attrs["advertise"] != n.Addr()) {
				t.Errorf("warning %s %v", got[0].level, got[0].attrs)
			}
		})
	}
}
