package config_test

import (
	"strings"
	"testing"

	"github.com/obol-dev/obol/config"
)

// TestGossipOwnerFrom: owner_from takes -1 or a member count of at least
// 2, and says which value is wrong otherwise; 0, once read as the default,
// is refused saying to leave the key out.
func TestGossipOwnerFrom(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want int
		err  string
	}{{"0", 0, "leave owner_from out for the default (100 members)"}, {"-1", -1, ""}, {"2", 2, ""}, {"64", 64, ""}, {"1", 0, "gossip.owner_from"}, {"-2", 0, "gossip.owner_from"}, {"many", 0, "gossip.owner_from"}} {
		cfg, err := config.Parse([]byte("gossip:\n  owner_from: " + tc.v + "\n"))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("owner_from %s: error %v, want one naming %s", tc.v, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("owner_from %s: %v", tc.v, err)
		}
		if cfg.Gossip.OwnerFrom != tc.want {
			t.Errorf("owner_from %s: got %d", tc.v, cfg.Gossip.OwnerFrom)
		}
	}
}
