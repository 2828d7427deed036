package main

import (
	"encoding/binary"
	"os"
	"runtime"
	"strings"
	"testing"
)

// statLine is a /proc/PID/stat line with the given comm, utime 1234 and
// stime 567.
func statLine(comm string) string {
	return "4242 (" + comm + ") S 1 4242 4242 0 -1 4194560 2093 0 0 0 1234 567 0 0 20 0 7 0 123456 1234567 890 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
}

func TestParseStat(t *testing.T) {
	for _, comm := range []string{
		"obol-agent",
		"my agent",           // a space
		"a) S 1 2 3 (b",      // what looks like fields, inside the name
		"((x))",              // parentheses only
		") 99 99 (",          // a closing parenthesis first
		"",                   // empty
		"tab\tand  spaces  ", // other whitespace
	} {
		s, err := parseStat([]byte(statLine(comm)))
		if err != nil {
			t.Errorf("comm %q: %v", comm, err)
			continue
		}
		if s.comm != comm || s.state != 'S' || s.utime != 1234 || s.stime != 567 || s.cpu() != 1801 {
			t.Errorf("comm %q: got %+v", comm, s)
		}
	}
}

func TestParseStatRejects(t *testing.T) {
	for name, line := range map[string]string{
		"no parentheses": "4242 agent S 1 2 3",
		"truncated":      "4242 (agent) S 1 4242 4242 0 -1 4194560 2093 0 0 0 1234",
		"bad utime":      strings.Replace(statLine("agent"), " 1234 ", " 12x4 ", 1),
		"bad stime":      strings.Replace(statLine("agent"), " 567 ", " -5 ", 1),
		"long state":     strings.Replace(statLine("agent"), ") S ", ") SS ", 1),
		"empty":          "",
	} {
		if s, err := parseStat([]byte(line)); err == nil {
			t.Errorf("%s: parsed %+v, want an error", name, s)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux only")
	}
	s, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.comm == "" || s.state == 0 {
		t.Errorf("own stat: %+v", s)
	}
	st, err := readStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.rssKiB <= 0 || st.threads <= 0 {
		t.Errorf("own status: %+v", st)
	}
}

func TestParseStatus(t *testing.T) {
	const status = "Name:\tobol (agent)\nState:\tS (sleeping)\nVmPeak:\t  123456 kB\nVmRSS:\t   45678 kB\nRssAnon:\t 40000 kB\nThreads:\t9\nSigQ:\t0/1234\n"
	s, err := parseStatus([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if s.rssKiB != 45678 || s.threads != 9 {
		t.Errorf("got %+v, want rss 45678 KiB, 9 threads", s)
	}
	for name, bad := range map[string]string{
		"no VmRSS (a zombie)": "Name:\tx\nThreads:\t1\n",
		"no Threads":          "VmRSS:\t1 kB\n",
		"bad VmRSS":           "VmRSS:\tlots kB\nThreads:\t1\n",
		"VmRSS not in kB":     "VmRSS:\t1 MB\nThreads:\t1\n",
	} {
		if s, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("%s: parsed %+v, want an error", name, s)
		}
	}
}

func TestParseAuxv(t *testing.T) {
	for _, size := range []int{4, 8} {
		var b []byte
		put := func(v uint64) {
			if size == 4 {
				b = binary.NativeEndian.AppendUint32(b, uint32(v))
			} else {
				b = binary.NativeEndian.AppendUint64(b, v)
			}
		}
		for _, kv := range [][2]uint64{{6, 4096}, {atClkTck, 250}, {25, 7}, {0, 0}, {atClkTck, 1}} {
			put(kv[0])
			put(kv[1])
		}
		if v, ok := parseAuxv(b, atClkTck, size); !ok || v != 250 {
			t.Errorf("word size %d: got %d, %v; want 250", size, v, ok)
		}
		if _, ok := parseAuxv(b, 99, size); ok {
			t.Errorf("word size %d: found a key past the end of the vector", size)
		}
		if _, ok := parseAuxv(b[:size*3], atClkTck, size); ok {
			t.Errorf("word size %d: found a key in a cut pair", size)
		}
	}
}

func TestClockTicks(t *testing.T) {
	hz, ok := clockTicks()
	if hz <= 0 {
		t.Fatalf("clock ticks %d", hz)
	}
	if runtime.GOOS == "linux" && !ok {
		t.Errorf("could not read the clock tick rate from /proc/self/auxv (assumed %d)", hz)
	}
}
