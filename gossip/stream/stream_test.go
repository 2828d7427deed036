package stream

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"
)

func msgs(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, size)
	}
	return out
}

func TestOutKeepsTheRecentMessages(t *testing.T) {
	o := NewOut(4, 1000)
	if o.Next() != 1 || o.Last() != 0 {
		t.Fatalf("a new stream: Next %d, Last %d; want 1, 0", o.Next(), o.Last())
	}
	if _, ok := o.Get(0); ok {
		t.Fatal("seq 0 kept")
	}
	o.Sent(msgs(3, 10))
	if o.Last() != 3 {
		t.Fatalf("Last %d, want 3", o.Last())
	}
	for s := uint64(1); s <= 3; s++ {
		if m, ok := o.Get(s); !ok || len(m) != 10 {
			t.Fatalf("seq %d not kept", s)
		}
	}
	o.Sent(msgs(3, 10)) // 4..6: the ring of 4 keeps 3..6
	for s, want := range map[uint64]bool{1: false, 2: false, 3: true, 6: true, 7: false} {
		if _, ok := o.Get(s); ok != want {
			t.Errorf("Get(%d) kept = %v, want %v", s, ok, want)
		}
	}
	if n, b := o.Kept(); n != 4 || b != 40 {
		t.Fatalf("Kept = %d, %d; want 4, 40", n, b)
	}
}

func TestOutBoundsTheBytes(t *testing.T) {
	o := NewOut(100, 250)
	o.Sent(msgs(5, 100)) // 500 bytes: keeps the last two
	if n, b := o.Kept(); n != 2 || b != 200 {
		t.Fatalf("Kept = %d, %d; want 2, 200", n, b)
	}
	if _, ok := o.Get(3); ok {
		t.Fatal("seq 3 kept past the byte bound")
	}
	o.Sent([][]byte{make([]byte, 1000)}) // larger than the bound alone: still kept
	if n, _ := o.Kept(); n != 1 {
		t.Fatalf("kept %d, want the newest alone", n)
	}
	if _, ok := o.Get(6); !ok {
		t.Fatal("the newest message is not kept")
	}
}

const ms = int64(1e6)

type ask struct {
	from string
	inc  uint64
	seqs []uint64
}

func due(in *In, now int64, limit int) ([]ask, []string) {
	var asks []ask
	rs := in.Due(now, limit, func(from string, inc uint64, seqs []uint64) {
		asks = append(asks, ask{from, inc, append([]uint64(nil), seqs...)})
	})
	return asks, rs
}

// TestInFindsGaps follows one origin through loss, reordering,
// duplicates, repair, retries and giving up, on fixed instants.
func TestInFindsGaps(t *testing.T) {
	in := NewIn(Options{Wait: 5 * ms, Retry: 100 * ms, Tries: 3, MaxGap: 10})
	steps := []struct {
		at     int64
		heard  uint64 // 0: call Due instead
		fresh  bool
		asks   []ask
		resync []string
	}{
		{at: 0, heard: 7, fresh: true},                      // the first seq starts the stream
		{at: 0, heard: 6, fresh: true},                      // one overtaken: untracked, news
		{at: 1 * ms, heard: 8, fresh: true},                 //
		{at: 1 * ms, heard: 8, fresh: false},                // a duplicate: the wait doubles to 10 ms
		{at: 2 * ms, heard: 11, fresh: true},                // 9 and 10 missing
		{at: 3 * ms, heard: 9, fresh: true},                 // 9 was only late
		{at: 7 * ms},                                        // 10 missing for 5 ms: not yet asked
		{at: 12 * ms, asks: []ask{{"a", 1, []uint64{10}}}},  // open 10 ms: asked
		{at: 50 * ms},                                       // asked 38 ms ago: not again
		{at: 112 * ms, asks: []ask{{"a", 1, []uint64{10}}}}, // retried after Retry
		{at: 150 * ms, heard: 12, fresh: true},              //
		{at: 311 * ms},                                      // the second retry waits 2·Retry
		{at: 312 * ms, asks: []ask{{"a", 1, []uint64{10}}}}, // three tries made
		{at: 711 * ms},                                      // the last try's 4·Retry not over
		{at: 712 * ms, resync: []string{"a"}},               // given up: resync
		{at: 800 * ms},                                      // nothing left
		{at: 801 * ms, heard: 10, fresh: false},             // too late: the resync's snapshot holds it
		{at: 802 * ms, heard: 30, fresh: true},              // a gap of 17 > MaxGap
		{at: 802 * ms, resync: []string{"a"}},               // resync at once
		{at: 803 * ms, heard: 25, fresh: false},             // below high, not missing
	}
	for i, st := range steps {
		if st.heard != 0 {
			if got := in.Heard("a", 1, st.heard, st.at); got != st.fresh {
				t.Fatalf("step %d: Heard(%d) = %v, want %v", i, st.heard, got, st.fresh)
			}
			continue
		}
		asks, rs := due(in, st.at, 128)
		if !reflect.DeepEqual(asks, st.asks) || !reflect.DeepEqual(rs, st.resync) {
			t.Fatalf("step %d at %d ms: Due = %v, %v; want %v, %v", i, st.at/ms, asks, rs, st.asks, st.resync)
		}
	}
	if in.Pending() {
		t.Fatal("pending after everything was settled")
	}
}

// TestInWaitAdapts: a duplicate doubles an origin's wait (up to MaxWait),
// a gap filled after an ask takes an eighth back (down to Wait); other
// origins keep theirs.
func TestInWaitAdapts(t *testing.T) {
	in := NewIn(Options{Wait: 4 * ms, MaxWait: 20 * ms})
	in.Heard("a", 1, 1, 0)
	in.Heard("b", 1, 1, 0)
	for range 4 {
		in.Heard("a", 1, 1, 0) // duplicates: 8, 16, 20, 20 ms
	}
	in.Heard("a", 1, 3, 0)
	in.Heard("b", 1, 3, 0)
	if at, _ := in.NextDue(); at != 4*ms {
		t.Fatalf("NextDue = %d ms, want b's 4", at/ms)
	}
	asks, _ := due(in, 4*ms, 128)
	if len(asks) != 1 || asks[0].from != "b" {
		t.Fatalf("at 4 ms asks %v, want b's alone", asks)
	}
	asks, _ = due(in, 20*ms, 128)
	if len(asks) != 1 || asks[0].from != "a" {
		t.Fatalf("at 20 ms asks %v, want a's (its wait is 20 ms)", asks)
	}
	in.Heard("a", 1, 2, 21*ms) // answered: 20 − 20/8 = 17.5 ms
	in.Heard("a", 1, 5, 30*ms)
	if at, _ := in.NextDue(); at != 30*ms+17500*1000 {
		t.Fatalf("NextDue = %d µs, want 47,500", at/1000)
	}
}

func TestInIncarnations(t *testing.T) {
	in := NewIn(Options{})
	in.Heard("a", 5, 10, 0)
	in.Heard("a", 5, 13, 0) // 11, 12 missing
	if !in.Pending() {
		t.Fatal("no gap open")
	}
	if !in.Heard("a", 4, 1, 0) { // an older incarnation: the merge's to judge
		t.Fatal("a stale incarnation's message was taken for a duplicate")
	}
	if !in.Pending() {
		t.Fatal("a stale message closed the gap")
	}
	in.Heard("a", 6, 3, 0) // a restart: a new stream from seq 3
	if in.Pending() {
		t.Fatal("the old incarnation's gap is still open")
	}
	if in.Heard("a", 6, 3, 0) {
		t.Fatal("the new stream's first seq heard twice is news")
	}
	in.Heard("a", 6, 6, 0)
	in.Forget("a")
	if in.Pending() {
		t.Fatal("a forgotten origin has a gap open")
	}
	if !in.Heard("a", 6, 9, 0) {
		t.Fatal("a forgotten origin's next message is not news")
	}
}

func TestInCovered(t *testing.T) {
	in := NewIn(Options{Wait: ms})
	in.Covered("a", 1, 21) // a snapshot first, taken before message 21: the stream starts there
	in.Heard("a", 1, 23, 0)
	asks, _ := due(in, ms, 128)
	if want := []ask{{"a", 1, []uint64{21, 22}}}; !reflect.DeepEqual(asks, want) {
		t.Fatalf("asks %v, want %v", asks, want)
	}
	in.Heard("a", 1, 26, 2*ms)
	in.Covered("a", 1, 25) // a later snapshot holds 21..24
	asks, _ = due(in, 300*ms, 128)
	if want := []ask{{"a", 1, []uint64{25}}}; !reflect.DeepEqual(asks, want) {
		t.Fatalf("after the snapshot, asks %v, want %v", asks, want)
	}
	in.Covered("a", 1, 31)
	if in.Pending() {
		t.Fatal("a snapshot past every gap left one open")
	}
	if in.Heard("a", 1, 28, 0) {
		t.Fatal("a message the snapshot covered is news")
	}
	// A snapshot taken before anything was sent starts the stream at 1:
	// the loss of the very first message is found.
	in.Covered("b", 1, 1)
	in.Heard("b", 1, 2, 0)
	if asks, _ := due(in, 300*ms, 128); !reflect.DeepEqual(asks, []ask{{"b", 1, []uint64{1}}}) {
		t.Fatalf("asks %v, want b's seq 1", asks)
	}
}

// TestInDueOrderAndLimit: origins in name order, seqs ascending, at most
// limit seqs an ask; NextDue says when.
func TestInDueOrderAndLimit(t *testing.T) {
	in := NewIn(Options{Wait: 5 * ms, MaxGap: 1000})
	for _, name := range []string{"c", "a", "b"} {
		in.Heard(name, 1, 1, 0)
		in.Heard(name, 1, 6, 2*ms) // 2..5 missing
	}
	if at, ok := in.NextDue(); !ok || at != 7*ms {
		t.Fatalf("NextDue = %d, %v; want 7 ms", at, ok)
	}
	asks, _ := due(in, 7*ms, 3)
	var got []string
	for _, a := range asks {
		got = append(got, fmt.Sprint(a.from, a.seqs))
	}
	want := []string{"a[2 3 4]", "a[5]", "b[2 3 4]", "b[5]", "c[2 3 4]", "c[5]"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("asks %v, want %v", got, want)
	}
	if at, ok := in.NextDue(); !ok || at != 7*ms+DefaultRetry {
		t.Fatalf("NextDue = %d, %v; want 7 ms + Retry", at, ok)
	}
}

func BenchmarkInHeard(b *testing.B) {
	in := NewIn(Options{})
	b.ReportAllocs()
	var s uint64
	for b.Loop() {
		s++
		in.Heard("node-1", 1, s, int64(s))
	}
}

// TestTargets: each receiver's stream is numbered from 1; the recent
// messages of all receivers are kept together, bounded in count and in
// bytes, oldest forgotten first, the newest always kept.
func TestTargets(t *testing.T) {
	tg := NewTargets(4, 100)
	if n := tg.Next("a"); n != 1 {
		t.Fatalf("Next(a) = %d before any message, want 1", n)
	}
	tg.Sent("a", [][]byte{[]byte("a1"), []byte("a2")})
	tg.Sent("b", [][]byte{[]byte("b1")})
	if tg.Next("a") != 3 || tg.Next("b") != 2 {
		t.Fatalf("Next: a %d, b %d; want 3 and 2", tg.Next("a"), tg.Next("b"))
	}
	if m, ok := tg.Get("a", 2); !ok || string(m) != "a2" {
		t.Fatalf("Get(a, 2) = %q, %v", m, ok)
	}
	if _, ok := tg.Get("b", 2); ok {
		t.Fatal("Get(b, 2) found a message not sent")
	}
	tg.Sent("a", [][]byte{[]byte("a3"), []byte("a4")}) // 5 kept: a1 goes
	if _, ok := tg.Get("a", 1); ok {
		t.Fatal("the oldest message is still kept past 4")
	}
	if n, b := tg.Kept(); n != 4 || b != 8 {
		t.Fatalf("Kept = %d, %d; want 4, 8", n, b)
	}
	big := make([]byte, 150)
	tg.Sent("c", [][]byte{big}) // past 100 bytes: only the newest stays
	if n, b := tg.Kept(); n != 1 || b != 150 {
		t.Fatalf("Kept = %d, %d after a message past the byte bound; want 1, 150", n, b)
	}
	if _, ok := tg.Get("c", 1); !ok {
		t.Fatal("the newest message is not kept")
	}
	for i := range 1000 { // the fifo is compacted, not grown for ever
		tg.Sent("d", [][]byte{{byte(i)}})
	}
	if n, _ := tg.Kept(); n != 4 || cap(tg.fifo) > 1024 {
		t.Fatalf("Kept %d, fifo capacity %d after 1,000 messages", n, cap(tg.fifo))
	}
}

// TestBegin: a stream begun at 1 finds the seqs before the first heard
// missing; Begin does nothing to a stream already followed.
func TestBegin(t *testing.T) {
	in := NewIn(Options{Wait: 1})
	in.Begin("o", 1, 1)
	in.Heard("o", 1, 3, 0)
	var asked []uint64
	in.Due(10, 128, func(_ string, _ uint64, seqs []uint64) { asked = append(asked, seqs...) })
	if len(asked) != 2 || asked[0] != 1 || asked[1] != 2 {
		t.Fatalf("asked %v, want [1 2]", asked)
	}
	in.Begin("o", 1, 1) // followed: nothing changes
	in.Heard("o", 1, 4, 20)
	asked = asked[:0]
	in.Due(10_000_000_000, 128, func(_ string, _ uint64, seqs []uint64) { asked = append(asked, seqs...) })
	if len(asked) != 2 {
		t.Fatalf("asked %v after Begin on a followed stream, want 1 and 2 again", asked)
	}
}

func TestStretch(t *testing.T) {
	for _, c := range []struct{ live, peers, want int }{
		{0, 100, 1}, {1, 100, 1}, {2, 100, 1}, {101, 100, 1}, {102, 100, 2},
		{201, 100, 2}, {202, 100, 3}, {1000, 100, 10}, {1001, 100, 10}, {1002, 100, 11},
		{10, 3, 3}, {10, 0, 1}, {1000, -1, 1},
	} {
		if got := Stretch(c.live, c.peers); got != c.want {
			t.Errorf("Stretch(%d, %d) = %d, want %d", c.live, c.peers, got, c.want)
		}
	}
}

// TestInForgottenOriginReplayNotNews: once an origin is forgotten (it
// died), its messages up to the highest seq heard, and any of an earlier
// incarnation, are not news when they come again (a replay); later ones
// and a newer incarnation's are, and a targeted stream begun again starts
// past them.
func TestInForgottenOriginReplayNotNews(t *testing.T) {
	in := NewIn(Options{})
	for s := uint64(1); s <= 5; s++ {
		if !in.Heard("p", 7, s, 0) {
			t.Fatalf("seq %d: not news the first time", s)
		}
	}
	in.Forget("p")
	for _, tc := range []struct {
		inc, seq uint64
		news     bool
	}{
		{7, 1, false}, {7, 5, false}, {6, 9, false}, {7, 6, true}, {7, 3, false},
	} {
		if got := in.Heard("p", tc.inc, tc.seq, 0); got != tc.news {
			t.Errorf("incarnation %d seq %d after Forget: news %v, want %v", tc.inc, tc.seq, got, tc.news)
		}
	}
	if in.Pending() {
		t.Error("a gap opened below the seq the stream resumed at")
	}
	in.Forget("p")
	if !in.Heard("p", 8, 1, 0) {
		t.Error("a newer incarnation's first message is not news")
	}

	tin := NewIn(Options{})
	tin.Begin("q", 3, 1)
	tin.Heard("q", 3, 1, 0)
	tin.Heard("q", 3, 2, 0)
	tin.Forget("q")
	tin.Begin("q", 3, 1)
	if !tin.Heard("q", 3, 3, 0) || tin.Pending() {
		t.Error("a targeted stream begun again asks for what was heard before Forget")
	}

	// At most MaxGone forgotten origins are remembered.
	many := NewIn(Options{})
	for i := range MaxGone + 10 {
		name := "o" + strconv.Itoa(i)
		many.Heard(name, 1, 1, 0)
		many.Forget(name)
	}
	if len(many.gone) != MaxGone {
		t.Errorf("%d forgotten origins remembered, want %d", len(many.gone), MaxGone)
	}
}

// The ring grows as messages are kept: against a model that keeps the
// last maxMsgs messages while they hold at most maxBytes (the newest
// always), every Get and Kept agree, for sizes below, at and past the
// first ring and across doublings.
func TestOutGrowsAsTheModel(t *testing.T) {
	for _, c := range []struct{ maxMsgs, maxBytes int }{{1, 100}, {5, 1 << 20}, {16, 1 << 20}, {17, 1 << 20}, {100, 1 << 20}, {4096, 3000}, {300, 1 << 20}} {
		o := NewOut(c.maxMsgs, c.maxBytes)
		var model [][]byte // model[i] is seq i+1; nil once forgotten
		first := 0         // index of the oldest kept
		bytes := 0
		for step := range 700 {
			m := make([]byte, 1+step*7%23)
			m[0] = byte(step)
			o.Sent([][]byte{m})
			model = append(model, m)
			bytes += len(m)
			for len(model)-first > c.maxMsgs || (bytes > c.maxBytes && first < len(model)-1) {
				bytes -= len(model[first])
				model[first] = nil
				first++
			}
			if n, b := o.Kept(); n != len(model)-first || b != bytes {
				t.Fatalf("%+v, step %d: Kept %d, %d; want %d, %d", c, step, n, b, len(model)-first, bytes)
			}
			for seq := uint64(1); seq <= uint64(len(model))+1; seq++ {
				got, ok := o.Get(seq)
				var want []byte
				if int(seq) <= len(model) {
					want = model[seq-1]
				}
				if ok != (want != nil) || (ok && &got[0] != &want[0]) {
					t.Fatalf("%+v, step %d: Get(%d) = %v, %v; want %v", c, step, seq, got, ok, want != nil)
				}
			}
		}
		if len(o.ring) > c.maxMsgs {
			t.Fatalf("%+v: ring of %d", c, len(o.ring))
		}
	}
}
