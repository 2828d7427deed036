package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// TestMain lets the test binary serve as the floor, as the real binary does:
// run starts os.Executable() with -serve-floor.
func TestMain(m *testing.M) {
	if benchkit.IsFloor(os.Args[1:]) {
		if err := floorMain(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRun runs the whole bench briefly: every service and transport must
// be measured, with no error, and the RESULT line must hold a positive
// number for each field.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent and envoyproxy/ratelimit and drives each: run it without -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skipf("redis-server is not on PATH; to run: %s", howToRun)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	ok, err := run(ctx, options{
		duration: 300 * time.Millisecond, warmup: 100 * time.Millisecond, rounds: 1,
		concurrency: 4, conns: 2, genProcs: 1, keys: 16,
	}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("a service was not measured")
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "errors") || !strings.HasPrefix(line, "obol") && !strings.HasPrefix(line, "floor") && !strings.HasPrefix(line, "ratelimit") {
			continue
		}
		if f := strings.Fields(line); len(f) < 10 || f[len(f)-1] != "0" {
			t.Errorf("row %q: want ten columns ending in 0 errors", line)
		}
	}
	last := strings.TrimSpace(out.String())
	last = last[strings.LastIndexByte(last, '\n')+1:]
	fields := strings.Fields(last)
	if len(fields) != 6 || fields[0] != "RESULT" {
		t.Fatalf("last line %q, want RESULT and five fields", last)
	}
	for i, name := range []string{"rls_rps", "floor_rps", "ratelimit_rps", "cpu_us", "ratelimit_cpu_us"} {
		k, v, _ := strings.Cut(fields[i+1], "=")
		x, err := strconv.ParseFloat(v, 64)
		if k != name || err != nil || x <= 0 {
			t.Errorf("RESULT field %d = %q, want %s=<a positive number>", i+1, fields[i+1], name)
		}
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	_, err := run(context.Background(), options{duration: time.Second, rounds: 0, concurrency: 1, conns: 1, genProcs: 1, keys: 1}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-rounds 0") {
		t.Fatalf("err = %v, want one naming -rounds 0", err)
	}
}
