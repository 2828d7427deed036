package gossiptest

import (
	"errors"
	"testing"
	"time"
)

// recv returns the next datagram t receives, or nil when none comes within
// a second.
func recv(t *FaultTransport) []byte {
	select {
	case p := <-t.PacketCh():
		return p.Buf
	case <-time.After(time.Second):
		return nil
	}
}

// TestFaultNetSteps drives two transports of one FaultNet through each
// fault in turn and checks what arrives and what is counted. Datagrams on
// loopback arrive in order, so the first one received after a fault shows
// that those sent under it were lost.
func TestFaultNetSteps(t *testing.T) {
	fn := NewFaultNet()
	a, err := fn.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b, err := fn.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	if a.Addr() == "" || a.Addr() == b.Addr() {
		t.Fatalf("addresses %q and %q", a.Addr(), b.Addr())
	}

	send := func(msg string) {
		t.Helper()
		if _, err := a.WriteTo([]byte(msg), b.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	send("open")
	if got := string(recv(b)); got != "open" {
		t.Fatalf("received %q, want open", got)
	}

	fn.Partition(a.Addr())
	send("cut") // counted at once; the datagram after the heal shows it never arrives
	if _, err := a.DialTimeout(b.Addr(), time.Second); !errors.Is(err, errPartitioned) {
		t.Fatalf("dial across the partition: %v", err)
	}
	fn.Heal()
	c, err := a.DialTimeout(b.Addr(), time.Second)
	if err != nil {
		t.Fatalf("dial after the heal: %v", err)
	}
	defer c.Close()
	select { // memberlist's listener hands every accepted stream over
	case in := <-b.StreamCh():
		defer in.Close()
	case <-time.After(time.Second):
		t.Fatal("the stream did not arrive")
	}
	fn.Partition(b.Addr())
	if _, err := c.Write([]byte("x")); !errors.Is(err, errPartitioned) {
		t.Fatalf("write on a stream a partition separates: %v", err)
	}
	fn.Heal()

	fn.SetDrop(1, nil)
	send("lost")
	fn.SetDrop(0, nil)
	send("after")
	if got := string(recv(b)); got != "after" {
		t.Fatalf("received %q, want after (the cut and the lost one never)", got)
	}

	st := fn.Stats()
	want := FaultStats{Datagrams: 4, Bytes: 4 + 3 + 4 + 5, MaxSize: 5, Dropped: 1, CutOut: 1, Received: 2, StreamsCut: 2}
	if st != want {
		t.Fatalf("Stats = %+v, want %+v", st, want)
	}
}
