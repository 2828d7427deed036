//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// loop_linux.go drives the load: one event loop on an OS thread of its own
// owns every connection of a phase (non-blocking sockets in an epoll set of
// its own, outside the Go runtime's network poller) and sends the
// pre-encoded requests. Per request it makes one write and one read system
// call and shares an epoll wait with the other replies that arrive together;
// it arms no Go timer, starts no goroutine, sends on no channel and
// allocates nothing (but for the sampled full decode of every 64th reply).
// It sleeps
// in epoll_pwait2, whose timeout is in nanoseconds, until the next request
// is due or a reply arrives; the thread's timer slack is set to 1 µs so that
// the kernel does not add its default 50 µs to each sleep.

// sysEpollPwait2 is epoll_pwait2's number, the same on every Linux
// architecture (Linux 5.11 and later).
const sysEpollPwait2 = 441

// Thread settings (prctl).
const (
	prSetTimerSlack = 29
	prGetTimerSlack = 30
	loopTimerSlack  = 1000 // ns
)

const (
	maxWait       = int64(50 * time.Millisecond) // longest sleep, to notice a cancelled context
	retryDelay    = int64(time.Millisecond)      // before reconnecting after a transport error
	drainLimit    = int64(2 * time.Second)       // how long replies are awaited after the end
	timeoutScan   = int64(100 * time.Millisecond)
	readBufSize   = 16 << 10
	maxLoopEvents = 256
)

// evloop is the event loop of one load.
type evloop struct {
	w        *worker
	spec     loadSpec
	reqs     [][]byte // every request, encoded
	wantType []byte
	network  string
	addr     string
	open     bool
	epoch    time.Time // instants are nanoseconds since it
	start    int64
	end      int64
	conns    []*lconn
	heap     connHeap // idle connections, by when they next need the loop
	inflight int
	epfd     int
	events   []syscall.EpollEvent
	ts       syscall.Timespec
	pwait2   bool
}

// pwait2Warning is printed once when epoll_pwait2 is missing.
var pwait2Warning sync.Once

// pwait2Supported reports whether the kernel has epoll_pwait2.
func pwait2Supported(epfd int) bool {
	var ts syscall.Timespec
	var ev [1]syscall.EpollEvent
	_, _, e := syscall.Syscall6(sysEpollPwait2, uintptr(epfd), uintptr(unsafe.Pointer(&ev[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0)
	return e != syscall.ENOSYS
}

// newEventLoop prepares a loop for spec's connections conns (their indexes
// among all the connections of the load); run runs it.
func newEventLoop(w *worker, spec loadSpec, reqs [][]byte, conns []int, epoch, start, end time.Time) (*evloop, error) {
	network, addr := "unix", spec.srv.socket
	if spec.tcp {
		if spec.srv.http == "" {
			return nil, fmt.Errorf("%s: no TCP address known (give -agent-http with -agent-socket)", spec.srv.name)
		}
		network, addr = "tcp", spec.srv.http
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	l := &evloop{
		w: w, spec: spec, reqs: reqs, wantType: []byte(spec.sc.enc.contentType()),
		network: network, addr: addr, open: spec.rate > 0,
		epoch: epoch, start: int64(start.Sub(epoch)), end: int64(end.Sub(epoch)),
		epfd: epfd, events: make([]syscall.EpollEvent, maxLoopEvents), pwait2: true,
	}
	if !pwait2Supported(epfd) {
		l.pwait2 = false
		pwait2Warning.Do(func() {
			fmt.Fprintln(os.Stderr, "warning: epoll_pwait2 is unavailable (Linux before 5.11): the generator sleeps in whole milliseconds, so a request may leave up to 1 ms late (charged to its latency)")
		})
	}
	for i, g := range conns {
		c := &lconn{idx: i, g: g, fd: -1, heapIdx: -1, rng: rand.New(rand.NewPCG(spec.seed, uint64(g))), buf: make([]byte, readBufSize)}
		c.wake = l.start
		if l.open {
			c.sched = newSchedule(l.start, spec.rate, spec.conns, g)
			c.wake = wakeAt(c.sched.due())
		}
		l.conns = append(l.conns, c)
		l.heap.push(c)
	}
	return l, nil
}

// clock is the monotonic time since the epoch, in nanoseconds.
func (l *evloop) clock() int64 { return int64(time.Since(l.epoch)) }

// run runs the loop until the end of the phase (and the replies then in
// flight, for at most drainLimit) or until ctx is done.
func (l *evloop) run(ctx context.Context) {
	// The thread is the loop's alone while it runs, with a fine timer slack.
	// It must not end with the loop (as a goroutine that exits locked makes
	// it): the agent and the floor are started with a parent-death signal,
	// which the kernel sends when the thread that started them ends, and any
	// thread may have. So the slack is restored and the thread handed back.
	runtime.LockOSThread()
	slack, _, _ := syscall.RawSyscall(syscall.SYS_PRCTL, prGetTimerSlack, 0, 0)
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, loopTimerSlack, 0)
	defer func() {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, slack, 0)
		runtime.UnlockOSThread()
	}()
	defer l.closeAll()
	done := ctx.Done()
	nextScan := int64(0)

	for {
		select {
		case <-done:
			return
		default:
		}
		now := l.clock()
		if now >= l.end && (l.inflight == 0 || now >= l.end+drainLimit) {
			return
		}
		l.w.mu.Lock()
		// Whatever is due (or due within aheadSlack) goes now.
		for l.heap.len() > 0 && l.heap.min().wake <= now {
			l.next(l.heap.pop(), now)
			now = l.clock()
		}
		if now >= nextScan {
			l.expire(now)
			nextScan = now + timeoutScan
		}
		l.w.mu.Unlock()

		wake := l.end
		if now >= l.end {
			wake = l.end + drainLimit
		}
		if l.heap.len() > 0 {
			wake = min(wake, l.heap.min().wake)
		}
		n, err := l.wait(min(max(wake-now, 0), maxWait))
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			l.w.mu.Lock()
			l.w.fail("epoll: " + err.Error())
			l.w.mu.Unlock()
			return
		}
		if n == 0 {
			continue
		}
		// Every reply of this wake-up had arrived by now: its latency ends
		// here, not after the loop has handled the ones before it.
		t := l.clock()
		l.w.mu.Lock()
		for _, ev := range l.events[:n] {
			c := l.conns[ev.Fd]
			if c.fd < 0 {
				continue
			}
			if ev.Events&syscall.EPOLLOUT != 0 && len(c.out) > 0 {
				l.flush(c)
			}
			if ev.Events&(syscall.EPOLLIN|syscall.EPOLLERR|syscall.EPOLLHUP|syscall.EPOLLRDHUP) != 0 && c.fd >= 0 {
				l.readable(c, t)
			}
		}
		l.w.mu.Unlock()
	}
}

// wait waits for events for at most timeout nanoseconds.
func (l *evloop) wait(timeout int64) (int, error) {
	if l.pwait2 {
		l.ts = syscall.NsecToTimespec(timeout)
		n, _, e := syscall.Syscall6(sysEpollPwait2, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])),
			uintptr(len(l.events)), uintptr(unsafe.Pointer(&l.ts)), 0, 0)
		if e == 0 {
			return int(n), nil
		}
		return 0, e
	}
	return syscall.EpollWait(l.epfd, l.events, int((timeout+999_999)/1_000_000))
}

// next acts on idle connection c at now: it sends c's next request when it
// is due (or due within aheadSlack), or puts c back to sleep until then; a
// connection without a socket connects first.
func (l *evloop) next(c *lconn, now int64) {
	if c.done {
		return
	}
	due := now
	if l.open {
		due = c.sched.due()
		if due >= l.end {
			c.done = true
			return
		}
		if !sendNow(due, now) {
			c.wake = wakeAt(due)
			l.heap.push(c)
			return
		}
	}
	if now >= l.end {
		c.done = true
		return
	}
	if c.fd < 0 {
		if err := l.connect(c); err != nil {
			// The request that could not leave is an error, as a failed
			// send is; retry after a pause rather than spin.
			l.w.fail("transport: " + err.Error())
			if l.open {
				c.sched.advance()
			}
			c.wake = l.clock() + retryDelay
			l.heap.push(c)
			return
		}
	}
	l.send(c, due)
}

// send sends a request on c: due is when it was scheduled (open loop), or
// now in closed loop.
func (l *evloop) send(c *lconn, due int64) {
	req := l.reqs[c.rng.IntN(len(l.reqs))]
	sent := l.clock()
	if !l.open {
		due = sent
	}
	c.origin = latencyOrigin(due, sent)
	c.sentAt = sent
	c.inflight = true
	l.inflight++
	if l.open {
		c.sched.advance()
	}
	n, err := rawWrite(c.fd, req)
	if err != nil && err != syscall.EAGAIN {
		l.drop(c, "transport: write: "+err.Error())
		return
	}
	if n < len(req) {
		c.out = req[max(n, 0):]
		l.ctl(c, syscall.EPOLLIN|syscall.EPOLLOUT)
	}
}

// flush writes the rest of c's request.
func (l *evloop) flush(c *lconn) {
	n, err := rawWrite(c.fd, c.out)
	if err != nil {
		if err != syscall.EAGAIN {
			l.drop(c, "transport: write: "+err.Error())
		}
		return
	}
	c.out = c.out[n:]
	if len(c.out) == 0 {
		c.out = nil
		l.ctl(c, syscall.EPOLLIN)
	}
}

// readable reads from c and, when a whole reply is in, records it at t and
// acts on the connection.
func (l *evloop) readable(c *lconn, t int64) {
	var r reply
	var m int
	for {
		if c.have == len(c.buf) {
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		space := len(c.buf) - c.have
		n, err := rawRead(c.fd, c.buf[c.have:])
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
			return
		case err != nil:
			l.drop(c, "transport: read: "+err.Error())
			return
		case n == 0:
			l.drop(c, "transport: the server closed the connection")
			return
		}
		c.have += n
		var want int
		var perr error
		r, m, want, perr = parseReply(c.buf[:c.have])
		if perr != nil {
			l.drop(c, perr.Error())
			return
		}
		if m > 0 {
			break
		}
		if want > len(c.buf) {
			c.buf = append(c.buf[:c.have], make([]byte, want-c.have)...)
			c.buf = c.buf[:cap(c.buf)]
		}
		if n < space {
			return // the socket is empty: wait for the rest
		}
		// The buffer was full: more may be waiting already.
	}
	switch {
	case !c.inflight:
		l.w.fail("a reply without a request")
		l.drop(c, "")
		return
	case m != c.have:
		l.drop(c, fmt.Sprintf("%d bytes after the reply to the only request in flight", c.have-m))
		return
	}
	c.have = 0
	c.inflight = false
	l.inflight--
	l.record(c, &r, t)
	if r.close {
		l.closeConn(c)
	}
	l.next(c, l.clock())
}

// record tallies reply r of c, complete at t.
func (l *evloop) record(c *lconn, r *reply, t int64) {
	var fail string
	var decisions, granted int
	switch {
	case r.status != 200:
		fail = describeStatus(r.status, r.contentType, r.body)
	case !bytes.HasPrefix(r.contentType, l.wantType):
		fail = fmt.Sprintf("reply Content-Type %q, want %q", r.contentType, l.wantType)
	case c.replies%sampleEvery == 0:
		var err error
		if decisions, granted, err = checkReply(l.spec.sc, r.body); err != nil {
			fail = err.Error()
		}
	}
	c.replies++
	if fail != "" {
		l.w.fail(fail)
		return
	}
	l.w.c.requests++
	l.w.c.sampled += int64(decisions)
	l.w.c.granted += int64(granted)
	_ = l.w.hist.RecordValue(min(max((t-c.origin)/1000, histMin), histMax))
}

// expire fails the requests in flight for longer than clientTimeout.
func (l *evloop) expire(now int64) {
	for _, c := range l.conns {
		if c.inflight && now-c.sentAt > int64(clientTimeout) {
			l.drop(c, fmt.Sprintf("transport: no reply within %s", clientTimeout))
		}
	}
}

// drop ends c's connection after a transport or protocol error: the request
// in flight, if any, is an error. c reconnects after a pause.
func (l *evloop) drop(c *lconn, why string) {
	if c.inflight {
		l.w.fail(why)
		c.inflight = false
		l.inflight--
	}
	l.closeConn(c)
	if c.heapIdx < 0 && !c.done {
		c.wake = l.clock() + retryDelay
		l.heap.push(c)
	}
}

// closeConn closes c's socket (closing removes it from the epoll set).
func (l *evloop) closeConn(c *lconn) {
	if c.fd >= 0 {
		_ = syscall.Close(c.fd)
	}
	c.fd, c.have, c.out = -1, 0, nil
}

func (l *evloop) closeAll() {
	for _, c := range l.conns {
		l.closeConn(c)
	}
	_ = syscall.Close(l.epfd)
}

// connect opens c's connection. It dials with the net package (name
// resolution, timeout, TCP_NODELAY), then keeps a duplicate of the socket and
// closes the net.Conn, so that the socket is in the loop's epoll set alone.
func (l *evloop) connect(c *lconn) error {
	d := net.Dialer{Timeout: clientTimeout}
	conn, err := d.Dial(l.network, l.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return fmt.Errorf("%T has no file descriptor", conn)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			dupErr = e
			return
		}
		fd = int(r)
	}); err != nil {
		return err
	}
	if dupErr != nil {
		return fmt.Errorf("dup: %w", dupErr)
	}
	// The duplicate shares the socket's file status: non-blocking.
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(c.idx)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		_ = syscall.Close(fd)
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	c.fd, c.have, c.out = fd, 0, nil
	return nil
}

// ctl changes the events c waits for.
func (l *evloop) ctl(c *lconn, events uint32) {
	ev := syscall.EpollEvent{Events: events | syscall.EPOLLRDHUP, Fd: int32(c.idx)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		l.drop(c, "epoll_ctl: "+err.Error())
	}
}

// rawWrite and rawRead are write and read on a non-blocking socket: they
// never block, so they need not tell the Go scheduler.
func rawWrite(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawRead(fd int, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
