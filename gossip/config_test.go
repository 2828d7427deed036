package gossip

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/clock"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings, one per expected problem
	}{
		{name: "minimal", cfg: Config{Name: "a"}},
		{name: "full", cfg: Config{Name: "a", Bind: "127.0.0.1:0", Advertise: "10.0.0.1", Join: []string{"peers.svc:7946"}, SecretKey: testKey[:24], Label: "x"}},
		{name: "ipv6", cfg: Config{Name: "a", Bind: "[::1]:7946", Advertise: "[::1]:8000"}},
		{name: "everything wrong", cfg: Config{
			Bind: "localhost:7946", Advertise: "10.0.0.1:99999", Join: []string{" "},
			SecretKey: []byte("short"), Label: string(make([]byte, 300)),
		}, want: []string{
			"name is required",
			`bind "localhost:7946": host "localhost" is not an IP address`,
			`advertise "10.0.0.1:99999": port "99999" is not a number`,
			"join[0] is empty",
			"secret key is 5 bytes (want 16, 24 or 32)",
			"label is 300 bytes (want at most 255)",
		}},
		{name: "bind without port", cfg: Config{Name: "a", Bind: "127.0.0.1"}, want: []string{`bind "127.0.0.1": address 127.0.0.1: missing port`}},
		{name: "receive at its bounds", cfg: Config{Name: "a", ReceiveWorkers: 256, ReceiveQueue: 65536}},
		{name: "receive negative", cfg: Config{Name: "a", ReceiveWorkers: -1, ReceiveQueue: -5}, want: []string{
			"receive workers -1 (want 1 to 256, or 0 for min(4, GOMAXPROCS))",
			"receive queue -5 (want 1 to 65536 datagrams per worker, or 0 for 1024)",
		}},
		{name: "receive absurd", cfg: Config{Name: "a", ReceiveWorkers: 100_000, ReceiveQueue: 1 << 30}, want: []string{
			"receive workers 100000 (want 1 to 256",
			"receive queue 1073741824 (want 1 to 65536",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want ErrConfig", err)
			}
			var joined interface{ Unwrap() []error }
			if errors.As(err, &joined) {
				if got := len(joined.Unwrap()); got != len(tc.want) {
					t.Errorf("%d problems, want %d: %v", got, len(tc.want), err)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to mention %q", err, w)
				}
			}
			if _, err := New(tc.cfg, &recorder{}); !errors.Is(err, ErrConfig) {
				t.Errorf("New = %v, want ErrConfig", err)
			}
		})
	}
}

// TestConfigSettings: each zero field takes its default, a negative
// interval turns its loop off, and a set value is kept.
func TestConfigSettings(t *testing.T) {
	wall := time.Unix(1_700_000_000, 5)
	fake := clock.NewFake(wall)
	type view struct {
		inc                                                uint64
		joinTimeout, rejoinEvery, resyncAfter, beaconEvery time.Duration
		realClock                                          bool
	}
	tests := []struct {
		name string
		cfg  Config
		want view
	}{
		{name: "defaults, no seeds: no rejoin loop",
			cfg:  Config{Name: "a"},
			want: view{inc: uint64(wall.UnixNano()), joinTimeout: 5 * time.Second, resyncAfter: 2500 * time.Millisecond, beaconEvery: 200 * time.Millisecond, realClock: true}},
		{name: "defaults with seeds",
			cfg:  Config{Name: "a", Join: []string{"peers"}},
			want: view{inc: uint64(wall.UnixNano()), joinTimeout: 5 * time.Second, rejoinEvery: 30 * time.Second, resyncAfter: 2500 * time.Millisecond, beaconEvery: 200 * time.Millisecond, realClock: true}},
		{name: "negative: never",
			cfg:  Config{Name: "a", Join: []string{"peers"}, JoinTimeout: -1, RejoinInterval: -1, ResyncAfter: -1, BeaconInterval: -1},
			want: view{inc: uint64(wall.UnixNano()), joinTimeout: 5 * time.Second, realClock: true}},
		{name: "set values kept",
			cfg: Config{Name: "a", Join: []string{"peers"}, Incarnation: 7, JoinTimeout: time.Second, RejoinInterval: time.Minute,
				ResyncAfter: time.Second, BeaconInterval: time.Second, Clock: fake},
			want: view{inc: 7, joinTimeout: time.Second, rejoinEvery: time.Minute, resyncAfter: time.Second, beaconEvery: time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.cfg.settings(wall)
			_, isReal := s.clk.(clock.Real)
			got := view{inc: s.inc, joinTimeout: s.joinTimeout, rejoinEvery: s.rejoinEvery, resyncAfter: s.resyncAfter, beaconEvery: s.beaconEvery, realClock: isReal}
			if got != tc.want {
				t.Errorf("settings\n %+v\nwant\n %+v", got, tc.want)
			}
			if s.log == nil || s.rng == nil {
				t.Errorf("no logger (%v) or no rng (%v)", s.log, s.rng)
			}
		})
	}
}

// TestConfigReceiveSettings: the receive workers and their queues take
// their defaults at zero and keep a set value.
func TestConfigReceiveSettings(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	tests := []struct {
		name           string
		cfg            Config
		workers, queue int
	}{
		{name: "defaults", cfg: Config{Name: "a"}, workers: min(4, procs), queue: 1024},
		{name: "one worker", cfg: Config{Name: "a", ReceiveWorkers: 1}, workers: 1, queue: 1024},
		{name: "set values kept", cfg: Config{Name: "a", ReceiveWorkers: 16, ReceiveQueue: 10}, workers: 16, queue: 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.cfg.settings(time.Unix(1, 0))
			if s.workers != tc.workers || s.queue != tc.queue {
				t.Errorf("workers %d, queue %d; want %d, %d", s.workers, s.queue, tc.workers, tc.queue)
			}
		})
	}
}
