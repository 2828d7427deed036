package main

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// host.go watches what the machine does to the run: the process's own CPU
// use, the load average, UDP datagrams the kernel dropped for want of
// receive buffer, and how late a goroutine sleeping 1 ms wakes up (a stall
// of the whole process: on a shared machine, other processes' CPU).

// hostSample is what host counters read at one instant.
type hostSample struct {
	at      time.Time
	cpu     time.Duration // this process, -1 unknown
	udpDrop int64         // the host's UDP RcvbufErrors, -1 unknown
}

func sampleHost() hostSample {
	return hostSample{at: time.Now(), cpu: cpuTime(), udpDrop: udpRcvbufErrors()}
}

// udpRcvbufErrors reads Udp RcvbufErrors from /proc/net/snmp (Linux), or -1.
func udpRcvbufErrors() int64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return -1
	}
	var head []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i := 1; i < len(f) && i < len(head); i++ {
			if head[i] == "RcvbufErrors" {
				v, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil {
					return -1
				}
				return v
			}
		}
		return -1
	}
	return -1
}

// loadAvg returns the one-minute load average (Linux), or -1.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// stallWatch records every oversleep of a 1 ms sleep longer than
// stallMin, until stopped.
type stallWatch struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	stalls []stall
}

// stall is a goroutine waking late: at is when it woke (Unix ns).
type stall struct {
	at  int64
	dur time.Duration
}

const stallMin = 2 * time.Millisecond

func watchStalls() *stallWatch {
	w := &stallWatch{stop: make(chan struct{})}
	w.wg.Go(func() {
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			t := time.Now()
			time.Sleep(time.Millisecond)
			now := time.Now()
			if d := now.Sub(t) - time.Millisecond; d > stallMin {
				w.stalls = append(w.stalls, stall{now.UnixNano(), d})
			}
		}
	})
	return w
}

// done stops the watch and returns the stalls it saw.
func (w *stallWatch) done() []stall {
	close(w.stop)
	w.wg.Wait()
	return w.stalls
}

// stallsPer returns the longest stall in each aligned window [from+k·w,
// from+(k+1)·w) of n windows.
func stallsPer(ss []stall, from, w int64, n int) []time.Duration {
	out := make([]time.Duration, n)
	for _, s := range ss {
		if s.at < from {
			continue
		}
		if k := (s.at - from) / w; k < int64(n) {
			out[k] = max(out[k], s.dur)
		}
	}
	return out
}

// udpSockets sums, over this host's IPv4 UDP sockets bound to one of ports,
// the bytes waiting in their receive queues and the datagrams the kernel
// dropped for them (a full receive buffer), from /proc/net/udp (Linux); ok
// is false when it cannot be read.
func udpSockets(ports map[int]bool) (queued, drops int64, ok bool) {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return 0, 0, false
	}
	lines := strings.Split(string(b), "\n")
	for _, line := range lines[min(1, len(lines)):] {
		// sl local rem st tx_queue:rx_queue tr tm->when retrnsmt uid timeout inode ref pointer drops
		f := strings.Fields(line)
		if len(f) < 13 {
			continue
		}
		_, port, found := strings.Cut(f[1], ":")
		p, err := strconv.ParseUint(port, 16, 16)
		if !found || err != nil || !ports[int(p)] {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":")
		q, err1 := strconv.ParseInt(rx, 16, 64)
		d, err2 := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, false
		}
		queued += q
		drops += d
	}
	return queued, drops, true
}
