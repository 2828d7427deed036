package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/api"
)

// TestMain serves the simulation children the agents these tests run
// start (api.Options.SimulateInChild): their executable is this test
// binary, as the agent's is the agent.
func TestMain(m *testing.M) {
	if api.SimulationChild() {
		os.Exit(simulationChild())
	}
	os.Exit(m.Run())
}

// The agent runs its simulations in children of its own executable
// (TestMain serves them here): a cluster simulation and a single-node one
// are answered by a child that has the agent's cluster simulator, and the
// same cluster simulation twice gives the same figures.
func TestAgentSimulatesInChildren(t *testing.T) {
	sock := filepath.Join(tempDir(t), "obol.sock")
	a := startAgent(t, []string{"--socket", sock, "--http", "off"}, noEnv, sock)
	c := unixClient(sock)
	c.Timeout = 30 * time.Second
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := c.Post("http://obol"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const cluster = `{"resource":{"kind":"gcra","burst":10,"count":10,"period":"1s"},"nodes":3,"keys":10,"duration_ms":500,"offered_per_s":20,"seed":7}`
	st, first := post("/v1/simulate/cluster", cluster)
	var figures map[string]any
	if err := json.Unmarshal([]byte(first), &figures); st != 200 || err != nil || figures["worst_window_ratio"] == nil {
		t.Fatalf("cluster simulation: %d %s (%v)", st, first, err)
	}
	if _, second := post("/v1/simulate/cluster", cluster); second != first {
		t.Errorf("the same cluster simulation twice:\n%s\n%s", first, second)
	}
	st, body := post("/v1/simulate", `{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"d"},{"at_ms":0,"domain":"d"}]}`)
	if st != 200 || !strings.Contains(body, `"granted":1`) || !strings.Contains(body, `"granted":0`) {
		t.Fatalf("simulation: %d %s", st, body)
	}
	if log := a.stderr.String(); strings.Contains(log, "could not start") {
		t.Errorf("the simulations ran in the agent: %s", log)
	}
}
