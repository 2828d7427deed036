package benchkit

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestTailBuffer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		write func(*TailBuffer)
		want  string
	}{
		{"fewer than n", 3, func(b *TailBuffer) { b.Add("a"); b.Add("b") }, "a\nb"},
		{"the last n", 2, func(b *TailBuffer) { b.Add("a"); b.Add("b"); b.Add("c") }, "b\nc"},
		{"write splits lines", 3, func(b *TailBuffer) { fmt.Fprint(b, "a\nb\n"); fmt.Fprint(b, "c\nd") }, "b\nc\nd"},
		{"n below 1 keeps one", 0, func(b *TailBuffer) { b.Add("a"); b.Add("b") }, "b"},
		{"empty", 2, func(*TailBuffer) {}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewTailBuffer(tc.n)
			tc.write(b)
			if got := b.String(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIsFloor(t *testing.T) {
	for args, want := range map[string]bool{
		"":                  false,
		"-serve-floor s":    true,
		"--serve-floor s":   true,
		"-x -serve-floor":   false,
		"---serve-floor":    false,
		"-serve-floor-more": false,
	} {
		if got := IsFloor(strings.Fields(args)); got != want {
			t.Errorf("IsFloor(%q) = %v, want %v", args, got, want)
		}
	}
}

func TestBuildErrorWraps(t *testing.T) {
	inner := errors.New("exit status 1")
	err := error(&BuildError{Err: inner, Output: []byte("  x.go:1: oops \n")})
	if !errors.Is(err, inner) || err.Error() != "go build "+AgentPackage+": exit status 1\nx.go:1: oops" {
		t.Fatalf("%q", err)
	}
}

// TestTerminate ends a child that heeds SIGTERM and one that ignores it.
func TestTerminate(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs sh and signals")
	}
	for _, tc := range []struct{ name, script string }{
		{"heeds SIGTERM", "exec sleep 60"},
		{"ignores SIGTERM", "trap '' TERM; echo up; while :; do sleep 0.01; done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			out := NewTailBuffer(1)
			up := make(chan struct{})
			cmd.Stdout = writerFunc(func(p []byte) (int, error) {
				select {
				case <-up:
				default:
					close(up)
				}
				return out.Write(p)
			})
			SetParentDeathSignal(cmd)
			if err := cmd.Start(); err != nil {
				t.Skip(err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			if strings.Contains(tc.script, "echo up") {
				<-up // the trap is set
			}
			Terminate(cmd.Process, exited, 100*time.Millisecond)
			select {
			case <-exited:
			default:
				t.Fatal("Terminate returned before the process exited")
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestStartedField(t *testing.T) {
	for _, tc := range []struct {
		line, name, want string
		ok               bool
	}{
		{`{"time":"t","level":"INFO","msg":"obol agent started","http":"127.0.0.1:4242","socket":"/s"}`, "http", "127.0.0.1:4242", true},
		{`{"msg":"obol agent started","socket":"/s"}`, "http", "", true},
		{`{"msg":"obol agent started","http":7}`, "http", "", true},
		{`{"msg":"listening","note":"obol agent started","http":"x"}`, "http", "", false},
		{`obol agent started http=x`, "http", "", false},
		{`{"msg":"something else"}`, "http", "", false},
		{``, "http", "", false},
	} {
		got, ok := StartedField(tc.line, tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("StartedField(%s, %q) = %q, %v; want %q, %v", tc.line, tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzStartedField(f *testing.F) {
	f.Add(`{"msg":"obol agent started","http":"127.0.0.1:1"}`)
	f.Add(`obol agent started`)
	f.Fuzz(func(t *testing.T, line string) {
		if v, ok := StartedField(line, "http"); !ok && v != "" {
			t.Fatalf("%q: %q from a line that is not the started line", line, v)
		}
	})
}

func TestStartChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs sh")
	}
	var seen []string
	c, err := StartChild("sh", exec.Command("sh", "-c", "echo one; echo two >&2; echo three; exit 3"), 2,
		func(line string) { seen = append(seen, line) })
	if err != nil {
		t.Skip(err)
	}
	<-c.Exited
	if c.Alive() {
		t.Fatal("alive after Exited")
	}
	if len(seen) != 3 || c.Logs.String() != strings.Join(seen[1:], "\n") {
		t.Fatalf("lines %q, kept %q", seen, c.Logs)
	}
	err = c.Failure("did not serve")
	if !strings.Contains(err.Error(), "sh: did not serve (exit status 3); its last output:\n") {
		t.Fatalf("%v", err)
	}
	c.Stop() // exited already: returns at once
	var nilChild *Child
	nilChild.Stop()

	if _, err := StartChild("none", exec.Command("/nonexistent/binary"), 1, nil); err == nil || !strings.Contains(err.Error(), "start none") {
		t.Fatalf("a binary that does not exist: %v", err)
	}
}

// TestChildStopClosesStdin stops a child that ends at its stdin's EOF.
func TestChildStopClosesStdin(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs cat")
	}
	cmd := exec.Command("cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartChild("cat", cmd, 1, nil)
	if err != nil {
		t.Skip(err)
	}
	c.Stdin = stdin
	c.Stop()
	if c.Alive() {
		t.Fatal("alive after Stop")
	}
}
