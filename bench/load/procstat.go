package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// procstat.go reads what the kernel says about a process: CPU time from
// /proc/PID/stat, resident memory and threads from /proc/PID/status, and the
// unit of the CPU times (clock ticks per second) from the auxiliary vector.

// procStat is the part of /proc/PID/stat the load generator uses.
type procStat struct {
	comm  string // the process name, without its parentheses
	state byte
	utime uint64 // user CPU time, in clock ticks
	stime uint64 // system CPU time, in clock ticks
}

// cpu returns the process's CPU time (user + system), in clock ticks.
func (s procStat) cpu() uint64 { return s.utime + s.stime }

// parseStat parses the contents of /proc/PID/stat. The second field is the
// process name in parentheses, which may itself hold spaces and parentheses,
// so the fields after it are found from the last ')' of the line.
func parseStat(b []byte) (procStat, error) {
	var s procStat
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return s, fmt.Errorf("/proc stat: no (comm) in %q", snippet(b))
	}
	s.comm = string(b[open+1 : closing])
	// After "pid (comm) " come state (field 3), ppid … utime (14), stime (15).
	rest := bytes.Fields(b[closing+1:])
	const stateField, utimeField, stimeField = 3, 14, 15
	idx := func(field int) int { return field - stateField }
	if len(rest) <= idx(stimeField) {
		return s, fmt.Errorf("/proc stat: %d fields after (comm), want at least %d", len(rest), idx(stimeField)+1)
	}
	if len(rest[0]) != 1 {
		return s, fmt.Errorf("/proc stat: state %q is not one letter", rest[0])
	}
	s.state = rest[0][0]
	var err error
	if s.utime, err = strconv.ParseUint(string(rest[idx(utimeField)]), 10, 64); err != nil {
		return s, fmt.Errorf("/proc stat: utime: %w", err)
	}
	if s.stime, err = strconv.ParseUint(string(rest[idx(stimeField)]), 10, 64); err != nil {
		return s, fmt.Errorf("/proc stat: stime: %w", err)
	}
	return s, nil
}

// readStat reads /proc/PID/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// procStatus is the part of /proc/PID/status the load generator uses.
type procStatus struct {
	rssKiB  int64 // VmRSS
	threads int64 // Threads
}

// parseStatus parses the contents of /proc/PID/status. Both VmRSS and
// Threads must be present.
func parseStatus(b []byte) (procStatus, error) {
	var s procStatus
	var haveRSS, haveThreads bool
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		key, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f := bytes.Fields(val)
		if len(f) == 0 {
			continue
		}
		switch string(key) {
		case "VmRSS":
			n, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return s, fmt.Errorf("/proc status: VmRSS: %w", err)
			}
			if len(f) > 1 && string(f[1]) != "kB" {
				return s, fmt.Errorf("/proc status: VmRSS unit %q, want kB", f[1])
			}
			s.rssKiB, haveRSS = n, true
		case "Threads":
			n, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return s, fmt.Errorf("/proc status: Threads: %w", err)
			}
			s.threads, haveThreads = n, true
		}
	}
	if !haveRSS || !haveThreads {
		return s, errors.New("/proc status: no VmRSS or no Threads line (a zombie or kernel thread?)")
	}
	return s, nil
}

// readStatus reads /proc/PID/status.
func readStatus(pid int) (procStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	return parseStatus(b)
}

// atClkTck is the auxiliary-vector key of the clock tick rate: what
// sysconf(_SC_CLK_TCK) returns.
const atClkTck = 17

// defaultClockTicks is the clock tick rate assumed when it cannot be read
// (it is 100 on every common Linux build).
const defaultClockTicks = 100

// parseAuxv returns the value of key in an auxiliary vector (pairs of
// native-endian machine words, ended by key 0).
func parseAuxv(b []byte, key uint64, wordSize int) (uint64, bool) {
	word := func(p []byte) uint64 {
		if wordSize == 4 {
			return uint64(binary.NativeEndian.Uint32(p))
		}
		return binary.NativeEndian.Uint64(p)
	}
	for len(b) >= 2*wordSize {
		k, v := word(b), word(b[wordSize:])
		b = b[2*wordSize:]
		if k == 0 {
			break
		}
		if k == key {
			return v, true
		}
	}
	return 0, false
}

// clockTicks returns the clock tick rate (the unit of /proc/PID/stat's CPU
// times), read as sysconf does from the auxiliary vector, and whether it was
// read; when it cannot be, it returns 100 and false.
func clockTicks() (int64, bool) {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return defaultClockTicks, false
	}
	wordSize := strconv.IntSize / 8
	v, ok := parseAuxv(b, atClkTck, wordSize)
	if !ok || v == 0 || v > 1e6 {
		return defaultClockTicks, false
	}
	return int64(v), true
}

// snippet returns b cut to 80 bytes for an error message.
func snippet(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}
