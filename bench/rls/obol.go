package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/obol-dev/obol/bench/internal/benchkit"
	"github.com/obol-dev/obol/internal/freeport"
)

// obol.go builds obol's agent and runs it as Envoy's rate limit service.

// buildAgent builds the agent into dir and returns the binary's path. It
// must run inside the module.
func buildAgent(ctx context.Context, dir string) (string, error) {
	gobin, err := goTool()
	if err != nil {
		return "", err
	}
	return benchkit.BuildAgent(ctx, gobin, dir)
}

// startObol starts the agent bin alone (no gossip), its own API on a socket
// in dir and no HTTP port, serving ShouldRateLimit on the Unix socket
// dir/rls.sock and on a free loopback port, on the ratelimit config
// directory cfgDir.
func startObol(ctx context.Context, bin, dir, cfgDir string) (*service, error) {
	port, err := freeport.Loopback()
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "rls.sock")
	tcp := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin,
		"--socket", filepath.Join(dir, "agent.sock"), "--http", "off",
		"--rls-socket", sock, "--rls-grpc", tcp, "--rls-config", cfgDir,
		"--log-level", "warn")
	c, err := startChild("obol", cmd)
	if err != nil {
		return nil, err
	}
	if err := waitServing(ctx, c, "unix://"+sock); err != nil {
		c.Stop()
		return nil, err
	}
	return &service{name: "obol", socket: sock, tcp: tcp, pids: []int{c.Pid()}, stop: c.Stop}, nil
}
