package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// TestAgentStateFile: agent.state_file takes a path, agent.state_interval a
// positive duration; 0, a negative one or a bare number is refused naming
// the key.
func TestAgentStateFile(t *testing.T) {
	cfg, err := config.Parse([]byte("agent:\n  state_file: /var/lib/obol/obol.state\n  state_interval: 10s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.StateFile != "/var/lib/obol/obol.state" || cfg.Agent.StateInterval != 10*time.Second {
		t.Fatalf("agent %+v", cfg.Agent)
	}
	for _, v := range []string{"0s", "-1s", "5", "often"} {
		_, err := config.Parse([]byte("agent:\n  state_interval: " + v + "\n"))
		if err == nil || !strings.Contains(err.Error(), "agent.state_interval") {
			t.Errorf("state_interval %s: error %v, want one naming agent.state_interval", v, err)
		}
	}
}
