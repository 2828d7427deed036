package benchkit

import (
	"flag"
	"io"
	"reflect"
	"testing"
)

func TestSetFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("n", 1, "")
	fs.Bool("quick", false, "")
	fs.String("mode", "x", "")
	if err := fs.Parse([]string{"-n", "1", "-quick=false"}); err != nil {
		t.Fatal(err)
	}
	if got, want := SetFlags(fs), map[string]bool{"n": true, "quick": true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v (a flag given its default value is set)", got, want)
	}
	if got := SetFlags(flag.NewFlagSet("empty", flag.ContinueOnError)); len(got) != 0 {
		t.Fatalf("unparsed: %v", got)
	}
}
