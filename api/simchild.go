package api

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/lowprio"
	"github.com/obol-dev/obol/internal/netguard"
	"github.com/obol-dev/obol/local"
)

// simchild.go runs a simulation in a child process (Options.SimulateInChild):
// the agent's own executable, started with SimulationChildEnv set, reads
// the request from its standard input, runs it as the agent would, and
// writes the reply to its standard output. Every thread of the child runs at
// the lowest priority, and it has a heap of its own: what a simulation
// allocates is collected there, by threads that yield the processor to the
// decisions, instead of by the agent's collector beside them. (In the agent,
// a 200-node cluster simulation moved the pinned probe's p99 5.4× idle, and
// 1.1× with the agent's collector off: go run ./bench/abuse -attack
// simcluster, with GOGC=off for the second.)

// SimulationChildEnv is the environment variable that marks a process
// started to run one simulation; its value is the time limit, in Go's
// notation. The child's first argument is SimulationChildArg too: a
// program that does not know the mode (an older build put in the agent's
// place) refuses the argument instead of starting as an agent, and the
// variable alone, left in an environment, turns no agent into a child. A
// program that sets Options.SimulateInChild must, first thing in main,
// call ServeSimulationChild when SimulationChild reports true.
const (
	SimulationChildEnv = "OBOL_SIMULATION_CHILD"
	SimulationChildArg = "--obol-simulation-child"
)

// SimulationChild reports whether this process was started to run one
// simulation: its first argument is SimulationChildArg and
// SimulationChildEnv is set.
func SimulationChild() bool {
	return len(os.Args) > 1 && os.Args[1] == SimulationChildArg && os.Getenv(SimulationChildEnv) != ""
}

// maxChildReply bounds a child's reply (headers and body). The largest
// reply seen, 100,000 traced decisions of 8 tiers with a global limit, is
// 60 MiB; a trace of 30,000 decisions on 64 tiers (the work budget's
// other edge) is larger still.
const maxChildReply = 256 << 20

// childStderr bounds what is kept of a child's standard error, for the log.
const childStderr = 4 << 10

// childCPU is the processor time a child may use in all, for a time
// limit of limit (which bounds the simulation's own thread): its garbage
// collection, its start and its reply besides.
func childCPU(limit time.Duration) time.Duration { return 2*limit + 2*time.Second }

// childSlack is added to fifteen times the time limit (the limit on the
// clock the child's own pacing holds a simulation to) before the agent
// kills a child: its start and its reply.
const childSlack = 5 * time.Second

// ServeSimulationChild runs the one simulation request read from in (an
// HTTP/1.1 request, as runInChild writes it) and writes its reply to out
// (an HTTP/1.1 response), with opts (ClusterSimulator; SimulateTimeLimit
// comes from SimulationChildEnv). It first lowers every thread of the
// process to the lowest priority, offers the process first to the
// kernel's OOM killer and bounds its processor time in all (childCPU). It
// returns the exit status: 0 when a reply was written, whatever its status
// code.
func ServeSimulationChild(in io.Reader, out io.Writer, opts Options) int {
	lowprio.LowerProcess()
	limit, err := time.ParseDuration(os.Getenv(SimulationChildEnv))
	if err != nil || limit <= 0 {
		fmt.Fprintf(os.Stderr, "simulation child: %s: want a time limit such as 2s, got %q\n", SimulationChildEnv, os.Getenv(SimulationChildEnv))
		return 2
	}
	childSetup(childCPU(limit))
	opts.SimulateTimeLimit, opts.SimulateInChild = limit, false
	s := New(local.New(config.Default()), opts)
	// Served by fasthttp on a connection made of in and out, as the agent
	// serves its listeners: the handlers take the request's context for a
	// context.Context, which only a server's gives.
	answered := false
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			answered = true
			simRouter.serve(s, ctx)
		},
		MaxRequestBodySize:    maxSimulateBody,
		ReadBufferSize:        64 << 10,
		NoDefaultDate:         true,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		Logger:                s.connLog,
	}
	err = srv.ServeConn(&stdioConn{in: in, out: out})
	if err != nil && !errors.Is(err, io.EOF) || !answered {
		fmt.Fprintf(os.Stderr, "simulation child: serving the request: %v (answered: %v)\n", err, answered)
		return 1
	}
	return 0
}

// stdioConn is a connection made of a reader and a writer: a simulation
// child's standard input and output.
type stdioConn struct {
	in  io.Reader
	out io.Writer
}

func (c *stdioConn) Read(p []byte) (int, error)       { return c.in.Read(p) }
func (c *stdioConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *stdioConn) Close() error                     { return nil }
func (c *stdioConn) LocalAddr() net.Addr              { return &net.UnixAddr{Name: "stdout", Net: "unix"} }
func (c *stdioConn) RemoteAddr() net.Addr             { return &net.UnixAddr{Name: "stdin", Net: "unix"} }
func (c *stdioConn) SetDeadline(time.Time) error      { return nil }
func (c *stdioConn) SetReadDeadline(time.Time) error  { return nil }
func (c *stdioConn) SetWriteDeadline(time.Time) error { return nil }

// simRouter routes a child's request: the simulation endpoints only.
var simRouter = func() *router {
	var table []route
	for _, r := range routes {
		if strings.HasPrefix(r.path, "/v1/simulate") {
			table = append(table, r)
		}
	}
	return newRouter(table)
}()

// childRunner starts simulation children. exe is the agent's executable
// (childExe), read at New; warned is set once a child could not start,
// which is logged once (the simulation then runs in the agent); log is
// where a child's failures go, cut and rate-limited: never a child's whole
// standard error, one line per request.
type childRunner struct {
	exe      string
	warned   atomic.Bool
	started  atomic.Int64 // children started
	log      *netguard.ConnLog
	slackSet time.Duration // childSlack when 0 (tests shorten it)
}

func (cr *childRunner) slack() time.Duration { return cmp.Or(cr.slackSet, childSlack) }

// runInChild runs the simulation request of ctx in a child and puts its
// reply in ctx.Response. It returns false, having written nothing, when
// no child could be started: the caller then runs the simulation itself.
// The child is given a request of its own, not the client's: the method,
// path and query, Content-Type, Accept and the body (no credentials, and
// headers that fit the agent's buffer fit the child's). A child that fails
// to reply is answered 500 internal, one past its time on the clock is
// killed and answered 413 too_large, as a simulation past its time limit
// is, and so is one the kernel ended for its processor time (childCPU);
// one running when the agent stops is killed and answered 503
// not_ready; each is logged (childRunner.log) with the start of the
// child's standard error, and so is a 5xx reply.
func (s *Server) runInChild(ctx *fasthttp.RequestCtx) bool {
	cr := &s.sim.child
	if cr.exe == "" {
		return false
	}
	cmd := exec.Command(cr.exe, SimulationChildArg)
	cmd.Env = []string{SimulationChildEnv + "=" + s.sim.limit.String(), "GOMAXPROCS=1"}
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = time.Second // the reply is read: Wait does not wait on the pipes for long
	stderr := &capBuffer{max: childStderr}
	cmd.Stderr = stderr
	stdin, err1 := cmd.StdinPipe()
	stdout, err2 := cmd.StdoutPipe()
	if err := errors.Join(err1, err2); err != nil {
		s.childFailedToStart(err)
		return false
	}
	if err := cmd.Start(); err != nil {
		s.childFailedToStart(err)
		return false
	}
	cr.started.Add(1)
	var timedOut, stopping atomic.Bool
	deadline := time.AfterFunc(15*s.sim.limit+cr.slack(), func() {
		timedOut.Store(true)
		_ = cmd.Process.Kill()
	})
	defer deadline.Stop()
	done := make(chan struct{})
	defer close(done)
	stop := ctx.Done() // read here: ctx is not the goroutine's to read
	go func() {        // the agent stopping ends the child
		select {
		case <-stop:
			stopping.Store(true)
			_ = cmd.Process.Kill()
		case <-done:
		}
	}()
	// The request, then the reply, on this (low-priority) thread: copying
	// a body of up to 16 MiB is work too. The child reads the whole
	// request before it answers (fasthttp reads a body before the
	// handler runs), so the two need not overlap; a child that stops
	// reading early fails the write, and its reply is read all the same.
	req := childRequest(ctx)
	w := bufio.NewWriterSize(stdin, 64<<10)
	if req.Write(w) == nil {
		_ = w.Flush()
	}
	fasthttp.ReleaseRequest(req)
	_ = stdin.Close()
	readErr := ctx.Response.ReadLimitBody(bufio.NewReaderSize(stdout, 64<<10), maxChildReply)
	if readErr != nil {
		_ = cmd.Process.Kill() // a reply too long, or garbled: the child is done either way
	}
	waitErr := cmd.Wait()
	switch {
	case stopping.Load():
		ctx.Response.Reset()
		writeError(ctx, fasthttp.StatusServiceUnavailable, codeNotReady, "the agent is stopping: the simulation was stopped")
		cr.log.Printf("stopped with the agent; its standard error: %q", stderr.String())
	case timedOut.Load():
		ctx.Response.Reset()
		s.fail(ctx, &apiError{status: fasthttp.StatusRequestEntityTooLarge, code: codeTooLarge,
			msg: fmt.Sprintf("simulation: stopped after %s on the clock (fifteen times its time limit of %s, and %s to start); the machine is busy: retry later, or simulate less", 15*s.sim.limit+cr.slack(), s.sim.limit, cr.slack())})
		cr.log.Printf("killed after %s on the clock; its standard error: %q", 15*s.sim.limit+cr.slack(), stderr.String())
	case overCPU(cmd.ProcessState, childCPU(s.sim.limit)):
		ctx.Response.Reset()
		s.fail(ctx, &apiError{status: fasthttp.StatusRequestEntityTooLarge, code: codeTooLarge,
			msg: fmt.Sprintf("simulation: stopped after %s of processor time in all, its garbage collection included (twice its time limit of %s, and 2 s); simulate less", childCPU(s.sim.limit), s.sim.limit)})
		cr.log.Printf("ended by the kernel for its processor time; its standard error: %q", stderr.String())
	case readErr != nil || waitErr != nil:
		ctx.Response.Reset()
		id := s.requestID()
		writeError(ctx, fasthttp.StatusInternalServerError, codeInternal, "internal error; request id "+id)
		cr.log.Printf("request id %s: no reply (%v; exit: %v); its standard error: %q", id, readErr, waitErr, stderr.String())
	case ctx.Response.StatusCode() >= 500:
		cr.log.Printf("reply %d; its standard error: %q", ctx.Response.StatusCode(), stderr.String())
	}
	return true
}

// childRequest returns the request a child is given for ctx's: the
// method, path and query, Content-Type, Accept and the body, which are all
// a simulation's handlers read. Release it with fasthttp.ReleaseRequest.
func childRequest(ctx *fasthttp.RequestCtx) *fasthttp.Request {
	req := fasthttp.AcquireRequest()
	req.Header.SetMethodBytes(ctx.Method())
	req.URI().SetPathBytes(ctx.Path())
	req.URI().SetQueryStringBytes(ctx.URI().QueryString())
	req.URI().SetHost("obol")
	if ct := ctx.Request.Header.ContentType(); len(ct) > 0 {
		req.Header.SetContentTypeBytes(ct)
	}
	if a := ctx.Request.Header.Peek(fasthttp.HeaderAccept); len(a) > 0 {
		req.Header.SetBytesV(fasthttp.HeaderAccept, a)
	}
	req.SetBodyRaw(ctx.Request.Body())
	return req
}

// childFailedToStart logs, once, that no simulation child could start.
func (s *Server) childFailedToStart(err error) {
	if s.sim.child.warned.CompareAndSwap(false, true) {
		s.log.Warn("simulations run in the agent: a child process could not start (logged once)", "exe", s.sim.child.exe, "err", err)
	}
}

// capBuffer keeps the first max bytes written to it and drops the rest.
type capBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}
