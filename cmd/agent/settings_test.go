package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

func TestResolveCluster(t *testing.T) {
	file := &config.Config{Gossip: config.Gossip{Bind: "10.0.0.1:7000", Join: []string{"peers.svc"}, SyncInterval: time.Second, SecretFile: "/k"}}
	none := &config.Config{}
	cases := []struct {
		name string
		f    flags
		e    env
		cfg  *config.Config
		want clusterSettings
		err  string
	}{
		{name: "alone by default", e: env{hostname: "h", nameSuffix: "abc123"}, cfg: none,
			want: clusterSettings{name: "h-abc123", nameGenerated: true, label: defaultLabel, sync: defaultSync}},
		{name: "join alone turns it on on the private address", f: flags{join: "a:1, b:2,", secretFile: "/k"}, e: env{hostname: "h", nameSuffix: "abc123"}, cfg: none,
			want: clusterSettings{enabled: true, name: "h-abc123", nameGenerated: true, bind: "10.1.2.3:7946", join: []string{"a:1", "b:2"}, secretFile: "/k", secretFrom: "--gossip-secret-file", label: defaultLabel, sync: defaultSync}},
		{name: "no key off loopback is refused", f: flags{join: "a:1"}, e: env{hostname: "h"}, cfg: none,
			err: `the default --gossip-bind "10.1.2.3:7946": gossip reachable from other hosts needs a key`},
		{name: "no key on 0.0.0.0 is refused", f: flags{gossipBind: "0.0.0.0:7946"}, e: env{hostname: "h"}, cfg: none,
			err: `--gossip-bind "0.0.0.0:7946": gossip reachable from other hosts needs a key`},
		{name: "no key, insecure asked for", f: flags{join: "a:1", insecure: true, set: map[string]bool{"gossip-insecure": true}}, e: env{hostname: "h", nameSuffix: "s"}, cfg: none,
			want: clusterSettings{enabled: true, name: "h-s", nameGenerated: true, bind: "10.1.2.3:7946", join: []string{"a:1"}, insecure: true, label: defaultLabel, sync: defaultSync}},
		{name: "insecure from env", f: flags{join: "a:1"}, e: env{hostname: "h", nameSuffix: "s", insecure: "true"}, cfg: none,
			want: clusterSettings{enabled: true, name: "h-s", nameGenerated: true, bind: "10.1.2.3:7946", join: []string{"a:1"}, insecure: true, label: defaultLabel, sync: defaultSync}},
		{name: "bad insecure env", f: flags{gossipBind: "127.0.0.1:0"}, e: env{hostname: "h", insecure: "yes please"}, cfg: none, err: `OBOL_GOSSIP_INSECURE "yes please": want true or false`},
		{name: "config file", e: env{hostname: "h", nameSuffix: "abc123"}, cfg: file,
			want: clusterSettings{enabled: true, name: "h-abc123", nameGenerated: true, bind: "10.0.0.1:7000", join: []string{"peers.svc"}, secretFile: "/k", secretFrom: "config gossip.secret_file", label: defaultLabel, sync: time.Second}},
		{name: "env over config", e: env{hostname: "h", nodeName: "n1", gossipBind: "127.0.0.1:0", join: "x:1", secretFile: "/e", label: "blue", sync: "100ms"}, cfg: file,
			want: clusterSettings{enabled: true, name: "n1", bind: "127.0.0.1:0", join: []string{"x:1"}, secretFile: "/e", secretFrom: "OBOL_GOSSIP_SECRET_FILE", label: "blue", sync: 100 * time.Millisecond}},
		{name: "flags over env", f: flags{nodeName: "f1", gossipBind: "127.0.0.1:9", sync: "1s", label: "red"}, e: env{nodeName: "n1", gossipBind: "127.0.0.1:0", sync: "100ms"}, cfg: none,
			want: clusterSettings{enabled: true, name: "f1", bind: "127.0.0.1:9", label: "red", sync: time.Second}},
		{name: "bad bind", f: flags{gossipBind: "nowhere"}, e: env{hostname: "h"}, cfg: none, err: `--gossip-bind "nowhere": want ip:port`},
		{name: "bind by name", f: flags{gossipBind: "peers.svc:7946"}, e: env{hostname: "h"}, cfg: none, err: `--gossip-bind "peers.svc:7946": host "peers.svc" is not an IP address`},
		{name: "bind port not a number", e: env{hostname: "h", gossipBind: "127.0.0.1:x"}, cfg: none, err: `OBOL_GOSSIP_BIND "127.0.0.1:x": port "x"`},
		{name: "bad bind in the config file", e: env{hostname: "h"}, cfg: &config.Config{Gossip: config.Gossip{Bind: "127.0.0.1:99999"}}, err: `config gossip.bind "127.0.0.1:99999"`},
		{name: "label too long", f: flags{gossipBind: "127.0.0.1:0", label: strings.Repeat("l", 256)}, e: env{hostname: "h"}, cfg: none, err: "256 bytes, want at most 255"},
		{name: "bad sync", f: flags{gossipBind: "127.0.0.1:0", sync: "often"}, e: env{hostname: "h"}, cfg: none, err: `--sync-interval "often": want a duration > 0`},
		{name: "zero sync from env", f: flags{gossipBind: "127.0.0.1:0"}, e: env{hostname: "h", sync: "0s"}, cfg: none, err: `OBOL_SYNC_INTERVAL "0s"`},
		{name: "no name", f: flags{gossipBind: "127.0.0.1:0"}, cfg: none, err: "--node-name"},
	}
	defer func(old func() string) { privateIP = old }(privateIP)
	privateIP = func() string { return "10.1.2.3" }
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolve(tc.f, tc.e, tc.cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.cluster, tc.want) {
				t.Fatalf("cluster settings %+v, want %+v", got.cluster, tc.want)
			}
		})
	}
}

func TestResolveStateFile(t *testing.T) {
	file := &config.Config{Agent: config.Agent{StateFile: "/var/lib/obol/c.state", StateInterval: 30 * time.Second}}
	cases := []struct {
		name  string
		f     flags
		e     env
		cfg   *config.Config
		file  value
		every time.Duration
		err   string
	}{
		{name: "none by default", cfg: &config.Config{}, every: defaultStateInterval},
		{name: "config file", cfg: file, file: value{"/var/lib/obol/c.state", "config agent.state_file"}, every: 30 * time.Second},
		{name: "env over config", e: env{stateFile: "/e", stateEvery: "1s"}, cfg: file, file: value{"/e", "OBOL_STATE_FILE"}, every: time.Second},
		{name: "flags over env", f: flags{stateFile: "/f", stateEvery: "2s"}, e: env{stateFile: "/e", stateEvery: "1s"}, cfg: file, file: value{"/f", "--state-file"}, every: 2 * time.Second},
		{name: "bad interval", f: flags{stateEvery: "often"}, cfg: &config.Config{}, err: `--state-interval "often": want a positive duration`},
		{name: "zero interval", e: env{stateEvery: "0s"}, cfg: &config.Config{}, err: `OBOL_STATE_INTERVAL "0s": want a positive duration`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolve(tc.f, tc.e, tc.cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.stateFile != tc.file || got.stateEvery != tc.every {
				t.Fatalf("state file %v every %v, want %v every %v", got.stateFile, got.stateEvery, tc.file, tc.every)
			}
		})
	}
}
