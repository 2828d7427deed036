package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
	"github.com/obol-dev/obol/internal/freeport"
)

// peer.go is the real thing: envoyproxy/ratelimit, built from the Go module
// proxy at run time into a temporary directory (never vendored), and the
// Redis it counts in (Debian's redis-server), both started as children.

// ratelimitModule and ratelimitVersion pin the envoyproxy/ratelimit build
// compared against (its latest pseudo-version when this was written; it
// builds with the Go of this module).
const (
	ratelimitModule  = "github.com/envoyproxy/ratelimit"
	ratelimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"
	ratelimitMain    = ratelimitModule + "/src/service_cmd"
)

// errUnavailable marks a missing prerequisite (redis-server, the go command,
// the module proxy): the differential test skips on it, saying how to run.
var errUnavailable = errors.New("prerequisite missing")

// howToRun says what the differential and the benchmark need.
const howToRun = "install redis-server (apt-get install -y redis-server, or .ci/rls-peer) and let the go command reach the module proxy"

// goTool returns the path of the go command.
func goTool() (string, error) {
	p, err := benchkit.GoTool()
	if err != nil {
		return "", fmt.Errorf("%w: %w", errUnavailable, err)
	}
	return p, nil
}

// buildRatelimit builds envoyproxy/ratelimit's service at the pinned version
// in a scratch module under dir and returns the binary's path. The scratch
// module only requires it; `go mod tidy` resolves its dependencies from the
// module proxy (or the module cache), with the environment's GOFLAGS
// cleared so that no -mod=vendor of the caller applies.
func buildRatelimit(ctx context.Context, dir string) (string, error) {
	gobin, err := goTool()
	if err != nil {
		return "", err
	}
	mod := filepath.Join(dir, "ratelimit-build")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return "", err
	}
	files := map[string]string{
		"go.mod": "module ratelimitbuild\n\ngo 1.25\n\nrequire " + ratelimitModule + " " + ratelimitVersion + "\n",
		// The build tag keeps the import out of every build but tidy's,
		// which reads all tags.
		"deps.go": "//go:build deps\n\npackage ratelimitbuild\n\nimport _ \"" + ratelimitMain + "\"\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "envoy-ratelimit")
	env := append(os.Environ(), "GOFLAGS=", "GOWORK=off", "CGO_ENABLED=0")
	for _, args := range [][]string{
		{"mod", "tidy"},
		{"build", "-o", bin, ratelimitMain},
	} {
		cmd := exec.CommandContext(ctx, gobin, args...)
		cmd.Dir, cmd.Env = mod, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%w: go %v of %s@%s: %v\n%s", errUnavailable, args, ratelimitModule, ratelimitVersion, err, bytes.TrimSpace(out))
		}
	}
	return bin, nil
}

// startRedis starts redis-server on a Unix socket in dir, with no TCP port
// and no persistence, and waits until it answers PING.
func startRedis(ctx context.Context, dir string) (*benchkit.Child, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("%w: redis-server is not on PATH", errUnavailable)
	}
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no",
		"--loglevel", "warning")
	c, err := startChild("redis-server", cmd)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", errUnavailable, err)
	}
	if err := benchkit.Poll(ctx, 10*time.Second, 20*time.Millisecond, func() error {
		err := redisPing(sock)
		if err != nil && !c.Alive() {
			return benchkit.Stop(err)
		}
		return err
	}); err != nil {
		c.Stop()
		return nil, "", c.Failure("did not answer PING on its socket within 10 s")
	}
	return c, sock, nil
}

// redisPing sends PING over the socket and expects +PONG.
func redisPing(sock string) error {
	conn, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 16)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(buf[:n], []byte("+PONG")) {
		return fmt.Errorf("redis answered %q to PING", buf[:n])
	}
	return nil
}

// startRatelimit starts redis-server and then envoyproxy/ratelimit (the
// binary bin) on the config directory runtimeRoot/ratelimit/config (see
// writeConfig), serving gRPC on a Unix socket in dir, its HTTP and debug
// ports on free loopback ports. The environment is its documented settings:
// the file runtime without watching the root, Redis over a Unix socket, no
// statsd, warnings only.
//
// Its CPU time is that of both processes. With GRPC_UDS set it serves gRPC
// on the socket only.
func startRatelimit(ctx context.Context, bin, dir, runtimeRoot string) (*service, error) {
	redis, redisSock, err := startRedis(ctx, dir)
	if err != nil {
		return nil, err
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freeport.Loopback(); err != nil {
			redis.Stop()
			return nil, err
		}
	}
	sock := filepath.Join(dir, "ratelimit.sock")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"RUNTIME_ROOT="+runtimeRoot,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false",
		"REDIS_SOCKET_TYPE=unix",
		"REDIS_URL="+redisSock,
		"USE_STATSD=false",
		"LOG_LEVEL=warn",
		"HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[0]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(ports[1]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(ports[2]),
		"GRPC_UDS="+sock,
	)
	proc, err := startChild("ratelimit", cmd)
	if err != nil {
		redis.Stop()
		return nil, err
	}
	stop := func() {
		proc.Stop()
		redis.Stop()
	}
	if err := waitServing(ctx, proc, "unix://"+sock); err != nil {
		stop()
		return nil, err
	}
	return &service{name: "ratelimit", socket: sock, pids: []int{proc.Pid(), redis.Pid()}, stop: stop}, nil
}
