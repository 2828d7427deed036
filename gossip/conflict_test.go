package gossip

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// TestNameConflictReportsTheNewcomer is a regression test of the hardening
// issue's second attack (a second agent under a name in use): of the two
// nodes memberlist tells of a conflict, only the newer one (higher
// incarnation) reports it, and only when the other answers at its address;
// a former self that no longer answers (a restart at a new address) is no
// conflict.
func TestNameConflictReportsTheNewcomer(t *testing.T) {
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	go func() {
		for {
			c, err := live.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().(*net.TCPAddr)
	dead.Close()
	liveAddr := live.Addr().(*net.TCPAddr)

	for _, tc := range []struct {
		name     string
		ourInc   uint64
		theirInc uint64
		addr     *net.TCPAddr
		want     bool
	}{
		{name: "we are newer, they answer", ourInc: 20, theirInc: 10, addr: liveAddr, want: true},
		{name: "we are older", ourInc: 10, theirInc: 20, addr: liveAddr, want: false},
		{name: "we are newer, they do not answer (our former self)", ourInc: 20, theirInc: 10, addr: deadAddr, want: false},
	} {
		got := make(chan uint64, 1)
		n := &Node{name: "same", inc: tc.ourInc, log: slog.New(slog.DiscardHandler), onConflict: func(inc uint64) { got <- inc }}
		self := &memberlist.Node{Name: "same", Addr: net.IPv4(127, 0, 0, 1), Port: 1}
		other := &memberlist.Node{Name: "same", Addr: tc.addr.IP, Port: uint16(tc.addr.Port), Meta: encodeMeta(tc.theirInc, false)}
		(*delegate)(n).NotifyConflict(self, other)
		select {
		case inc := <-got:
			if !tc.want || inc != tc.theirInc {
				t.Errorf("%s: reported %d", tc.name, inc)
			}
		case <-time.After(2 * time.Second): // the check dials with a 1 s timeout
			if tc.want {
				t.Errorf("%s: not reported", tc.name)
			}
		}
	}
}
