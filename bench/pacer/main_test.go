package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestRunSmall(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-duration", "5m"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	var retry, maxSleep, stdev, clear float64
	if _, err := fmt.Sscanf(last, "RESULT retry_rate=%g max_sleep_s=%g stdev_requests=%g clear_s=%g", &retry, &maxSleep, &stdev, &clear); err != nil {
		t.Fatalf("last line %q: %v", last, err)
	}
	if retry <= 0 || retry > 0.03 || maxSleep <= 0 || clear < 70 || clear > 80 {
		t.Fatalf("implausible figures:\n%s", out.String())
	}
	for _, s := range []string{"ExponentialBackoff", "ExponentialIncreaseProportionalRemainingDecrease", "KeepReserve", "published"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the table lacks %q", s)
		}
	}
}

func TestRunDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	args := []string{"-duration", "3m", "-seed", "9", "-seeds", "2"}
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
	for _, args := range [][]string{{"-procs", "0"}, {"-request", "0s"}, {"extra"}, {"-seeds", "0"}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
