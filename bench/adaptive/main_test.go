package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestRunSmall(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-duration", "30s", "-warmup", "6s"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	var ours, oz float64
	var oursDone, ozDone, p50 int
	if _, err := fmt.Sscanf(last, "RESULT ours_timedout_ratio=%g ours_completed=%d openziti_timedout_ratio=%g openziti_completed=%d ours_window_p50=%d",
		&ours, &oursDone, &oz, &ozDone, &p50); err != nil {
		t.Fatalf("last line %q: %v", last, err)
	}
	if ours > 0.01 || ours >= oz || oursDone < ozDone || p50 < 5 || p50 > 250 {
		t.Fatalf("ours %.4f (%d) vs openziti %.4f (%d), p50 %d:\n%s", ours, oursDone, oz, ozDone, p50, out.String())
	}
}

func TestRunDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	args := []string{"-duration", "20s", "-overrun", "1ms", "-seed", "7"}
	if err := run(args, &a); err != nil {
		t.Fatal(err)
	}
	if err := run(args, &b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatal("two runs with one seed differ")
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-min", "0"}, {"-work", "0s"}, {"extra"}, {"-max", "3", "-min", "4"}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
