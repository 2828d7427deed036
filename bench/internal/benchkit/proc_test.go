package benchkit

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
		s, err := ParseStat([]byte(statLine(comm)))
		if err != nil {
			t.Errorf("comm %q: %v", comm, err)
			continue
		}
		if s.Comm != comm || s.State != 'S' || s.Utime != 1234 || s.Stime != 567 || s.CPU() != 1801 {
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
		if s, err := ParseStat([]byte(line)); err == nil {
			t.Errorf("%s: parsed %+v, want an error", name, s)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux only")
	}
	s, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.Comm == "" || s.State == 0 {
		t.Errorf("own stat: %+v", s)
	}
	st, err := ReadStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.RSSKiB <= 0 || st.Threads <= 0 {
		t.Errorf("own status: %+v", st)
	}
}

func TestParseStatus(t *testing.T) {
	const status = "Name:\tobol (agent)\nState:\tS (sleeping)\nVmPeak:\t  123456 kB\nVmRSS:\t   45678 kB\nRssAnon:\t 40000 kB\nThreads:\t9\nSigQ:\t0/1234\n"
	s, err := ParseStatus([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSKiB != 45678 || s.Threads != 9 {
		t.Errorf("got %+v, want rss 45678 KiB, 9 threads", s)
	}
	for name, bad := range map[string]string{
		"no VmRSS (a zombie)": "Name:\tx\nThreads:\t1\n",
		"no Threads":          "VmRSS:\t1 kB\n",
		"bad VmRSS":           "VmRSS:\tlots kB\nThreads:\t1\n",
		"VmRSS not in kB":     "VmRSS:\t1 MB\nThreads:\t1\n",
	} {
		if s, err := ParseStatus([]byte(bad)); err == nil {
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
		for _, kv := range [][2]uint64{{6, 4096}, {AtClkTck, 250}, {25, 7}, {0, 0}, {AtClkTck, 1}} {
			put(kv[0])
			put(kv[1])
		}
		if v, ok := ParseAuxv(b, AtClkTck, size); !ok || v != 250 {
			t.Errorf("word size %d: got %d, %v; want 250", size, v, ok)
		}
		if _, ok := ParseAuxv(b, 99, size); ok {
			t.Errorf("word size %d: found a key past the end of the vector", size)
		}
		if _, ok := ParseAuxv(b[:size*3], AtClkTck, size); ok {
			t.Errorf("word size %d: found a key in a cut pair", size)
		}
	}
}

func TestClockTicks(t *testing.T) {
	hz, ok := ClockTicks()
	if hz <= 0 {
		t.Fatalf("clock ticks %d", hz)
	}
	if runtime.GOOS == "linux" && !ok {
		t.Errorf("could not read the clock tick rate from /proc/self/auxv (assumed %d)", hz)
	}
}

// TestParseStatCPU is the CPU time's table over real shapes of the line:
// fields counted from the last ')', whatever the name holds.
func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name, line string
		want       uint64
		wantErr    string
	}{
		{"plain", "42 (redis-server) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 4", 12, ""},
		{"comm with spaces and parens", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 300 11 0 0", 311, ""},
		{"no comm", "7 a R 1", 0, "no (comm)"},
		{"too short", "7 (x) R 1 2 3", 0, "fields after (comm)"},
		{"bad utime", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 11 0 0", 0, "utime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseStat([]byte(tt.line))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || s.CPU() != tt.want {
				t.Fatalf("ParseStat = %+v (CPU %d), %v; want CPU %d", s, s.CPU(), err, tt.want)
			}
		})
	}
}

func TestCPUTime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux only")
	}
	if d, err := CPUTime(os.Getpid(), os.Getpid()); err != nil || d < 0 {
		t.Fatalf("CPUTime(self, self) = %v, %v", d, err)
	}
	if _, err := CPUTime(os.Getpid(), 0); err == nil || !strings.Contains(err.Error(), "pid 0") {
		t.Fatalf("CPUTime of pid 0: %v, want an error naming it", err)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(statLine("obol-agent")))
	f.Add([]byte("7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 300 11 0 0"))
	f.Add([]byte("7 a R 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStat(b)
		if err == nil && s.CPU() != s.Utime+s.Stime {
			t.Fatalf("%q: %+v", b, s)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("Name:\tobol\nVmRSS:\t   45678 kB\nThreads:\t9\n"))
	f.Add([]byte("VmRSS:\t1 MB\nThreads:\t1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseStatus(b)
	})
}

func FuzzParseAuxv(f *testing.F) {
	f.Add(binary.NativeEndian.AppendUint64(binary.NativeEndian.AppendUint64(nil, AtClkTck), 100), 8)
	f.Add([]byte{17, 0, 0, 0, 100, 0, 0, 0}, 4)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		if size != 4 && size != 8 {
			return
		}
		_, _ = ParseAuxv(b, AtClkTck, size)
	})
}
