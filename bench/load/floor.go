package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// floor.go is the floor: a bare fasthttp handler answering every request with
// one fixed 200 body (a typical reply of the agent), served by a child
// process of its own so that its CPU time can be read from /proc exactly as
// the agent's is. It is what the same transport costs with no decision
// behind it.

// floorMain serves the floor: `-serve-floor SOCKET -body FILE -type CT`. It
// listens on the Unix socket and on a free loopback TCP port, prints
// "floor http=ADDR" on stdout once both are up, and serves until stdin
// reaches EOF (the generator closed it, or died) or it gets SIGTERM.
func floorMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	sock := fs.String("serve-floor", "", "Unix socket to serve on")
	bodyFile := fs.String("body", "", "file holding the reply body")
	ctype := fs.String("type", "application/json", "Content-Type of the reply")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sock == "" {
		return errors.New("floor: -serve-floor SOCKET is required")
	}
	body := []byte(`{"granted":1,"remaining":999}`)
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		body = b
	}
	_ = os.Remove(*sock)
	ul, err := net.Listen("unix", *sock)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	defer os.Remove(*sock)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ul.Close()
		return fmt.Errorf("floor: %w", err)
	}
	srv := floorServer(body, *ctype)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ul) }()
	go func() { errc <- srv.Serve(tl) }()
	fmt.Fprintf(stdout, "floor http=%s\n", tl.Addr())

	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sig)
	select {
	case <-eof:
	case <-sig:
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.ShutdownWithContext(sctx)
	return err
}

// floorServer is a fasthttp server with the agent's settings whose handler
// writes body and nothing else: no routing, no decoding.
func floorServer(body []byte, ctype string) *fasthttp.Server {
	ct := []byte(ctype)
	return &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetStatusCode(fasthttp.StatusOK)
			ctx.SetContentTypeBytes(ct)
			ctx.SetBody(body)
		},
		ReadTimeout:                  30 * time.Second,
		WriteTimeout:                 30 * time.Second,
		IdleTimeout:                  2 * time.Minute,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
	}
}

// startFloor starts this binary as the floor in dir, serving body with
// Content-Type ctype.
func startFloor(ctx context.Context, dir string, body []byte, ctype string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	bodyFile := filepath.Join(dir, "floor-body")
	if err := os.WriteFile(bodyFile, body, 0o600); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	sock := filepath.Join(dir, "floor.sock")
	cmd := exec.Command(exe, benchkit.FloorFlag, sock, "-body", bodyFile, "-type", ctype)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	proc, err := benchkit.StartChild("floor", cmd, 20, nil) // its stderr's last lines
	if err != nil {
		return nil, err
	}
	proc.Stdin = stdin
	c := &child{server: server{name: "floor", socket: sock, pid: proc.Pid()}, Child: proc}
	addr := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		if a, ok := strings.CutPrefix(strings.TrimSpace(line), "floor http="); ok {
			addr <- a
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	select {
	case c.http = <-addr:
	case <-c.Exited:
		return nil, fmt.Errorf("the floor exited at start (%s):\n%s", cmd.ProcessState, c.Logs)
	case <-deadline.C:
		c.stop()
		return nil, fmt.Errorf("the floor did not start within 20 s:\n%s", c.Logs)
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
	return c, nil
}
