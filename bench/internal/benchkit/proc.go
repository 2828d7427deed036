package benchkit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Stat is the part of /proc/PID/stat the benchmarks use.
type Stat struct {
	Comm  string // the process name, without its parentheses
	State byte
	Utime uint64 // user CPU time, in clock ticks
	Stime uint64 // system CPU time, in clock ticks
}

// CPU returns the process's CPU time (user + system), in clock ticks.
func (s Stat) CPU() uint64 { return s.Utime + s.Stime }

// ParseStat parses the contents of /proc/PID/stat. The second field is the
// process name in parentheses, which may itself hold spaces and parentheses,
// so the fields after it are found from the last ')' of the line.
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return s, fmt.Errorf("/proc stat: no (comm) in %q", Snippet(b))
	}
	s.Comm = string(b[open+1 : closing])
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
	s.State = rest[0][0]
	var err error
	if s.Utime, err = strconv.ParseUint(string(rest[idx(utimeField)]), 10, 64); err != nil {
		return s, fmt.Errorf("/proc stat: utime: %w", err)
	}
	if s.Stime, err = strconv.ParseUint(string(rest[idx(stimeField)]), 10, 64); err != nil {
		return s, fmt.Errorf("/proc stat: stime: %w", err)
	}
	return s, nil
}

// ReadStat reads /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// CPUTicks returns the CPU time of process pid in clock ticks; an error
// (os.ErrNotExist for pid ≤ 0) when it cannot be read.
func CPUTicks(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, os.ErrNotExist
	}
	s, err := ReadStat(pid)
	if err != nil {
		return 0, err
	}
	return s.CPU(), nil
}

// CPUTime returns the CPU time (user + system) the processes pids have used
// so far, converted at the clock tick rate ClockTicks reads.
func CPUTime(pids ...int) (time.Duration, error) {
	var ticks uint64
	for _, pid := range pids {
		t, err := CPUTicks(pid)
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", pid, err)
		}
		ticks += t
	}
	hz, _ := ClockTicks()
	return time.Duration(ticks) * time.Second / time.Duration(hz), nil
}

// Status is the part of /proc/PID/status the benchmarks use.
type Status struct {
	RSSKiB  int64 // VmRSS
	Threads int64 // Threads
}

// ParseStatus parses the contents of /proc/PID/status. Both VmRSS and
// Threads must be present.
func ParseStatus(b []byte) (Status, error) {
	var s Status
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
			s.RSSKiB, haveRSS = n, true
		case "Threads":
			n, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return s, fmt.Errorf("/proc status: Threads: %w", err)
			}
			s.Threads, haveThreads = n, true
		}
	}
	if !haveRSS || !haveThreads {
		return s, errors.New("/proc status: no VmRSS or no Threads line (a zombie or kernel thread?)")
	}
	return s, nil
}

// ReadStatus reads /proc/PID/status.
func ReadStatus(pid int) (Status, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(b)
}

// AtClkTck is the auxiliary-vector key of the clock tick rate: what
// sysconf(_SC_CLK_TCK) returns.
const AtClkTck = 17

// DefaultClockTicks is the clock tick rate assumed when it cannot be read
// (it is 100 on every common Linux build).
const DefaultClockTicks = 100

// ParseAuxv returns the value of key in an auxiliary vector (pairs of
// native-endian machine words of wordSize bytes, 4 or 8, ended by key 0);
// false when the vector has no such key before its end.
func ParseAuxv(b []byte, key uint64, wordSize int) (uint64, bool) {
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

// ClockTicks returns the clock tick rate (the unit of /proc/PID/stat's CPU
// times), read as sysconf does from the auxiliary vector, and whether it was
// read; when it cannot be (not Linux, or a value outside (0, 10⁶]), it
// returns DefaultClockTicks and false.
func ClockTicks() (int64, bool) {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return DefaultClockTicks, false
	}
	wordSize := strconv.IntSize / 8
	v, ok := ParseAuxv(b, AtClkTck, wordSize)
	if !ok || v == 0 || v > 1e6 {
		return DefaultClockTicks, false
	}
	return int64(v), true
}

// Snippet returns b cut to 80 bytes, for an error message.
func Snippet(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}
