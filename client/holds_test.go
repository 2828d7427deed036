package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// holds returns the agent's (sessions, holds, transfers).
func (a *agent) holds() [3]int {
	s, h, x := a.srv.Engine().Sessions()
	return [3]int{s, h, x}
}

func TestHoldReserveTransferSeizeRelease(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	other, _ := newClient(t, Config{Socket: a.sock, Clock: fc}) // another process
	ctx := context.Background()

	h, err := c.Reserve(ctx, "t/copies", "acme", Copies(3))
	if err != nil {
		t.Fatal(err)
	}
	if h.Granted != 3 || h.ID == "" || h.Held() != 3 || !slices.Equal(h.Groups, []string{"partners"}) ||
		h.Reply.DomainHolds != 3 || h.Reply.DomainLimit != 5 || h.Degraded || h.Killed {
		t.Fatalf("Reserve = %+v", h)
	}
	id, err := h.Transfer(ctx, 2, 10*time.Second)
	if err != nil || id == "" {
		t.Fatalf("Transfer = %q, %v", id, err)
	}
	if h.Held() != 1 {
		t.Fatalf("Held after Transfer = %d, want 1", h.Held())
	}
	h2, err := other.Seize(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Granted != 2 || h2.Held() != 2 || h2.Resource != "t/copies" || h2.Domain != "acme" || h2.ID == "" ||
		!slices.Equal(h2.Groups, []string{"partners"}) {
		t.Fatalf("Seize = %+v", h2)
	}
	if _, err := other.Seize(ctx, id); !errors.Is(err, ErrUnknownTransfer) {
		t.Fatalf("second Seize = %v, want ErrUnknownTransfer", err)
	}
	if got := a.holds(); got != [3]int{2, 2, 0} {
		t.Fatalf("agent (sessions, holds, transfers) = %v", got)
	}
	if err := h.ReleaseN(ctx, 2); !errors.Is(err, ErrOverRelease) {
		t.Fatalf("ReleaseN(2) of 1 = %v, want ErrOverRelease", err)
	}
	for i := range 2 { // idempotent
		if err := h.Release(); err != nil {
			t.Fatalf("Release #%d: %v", i, err)
		}
	}
	if err := h2.ReleaseN(ctx, 1); err != nil || h2.Held() != 1 {
		t.Fatalf("ReleaseN(1) = %v, held %d", err, h2.Held())
	}
	if err := h2.Release(); err != nil {
		t.Fatal(err)
	}
	if got := a.holds(); got != [3]int{2, 0, 0} {
		t.Fatalf("agent after releases = %v", got)
	}
	// Release after a Transfer of everything: nothing left, nothing sent.
	h3, _ := c.Reserve(ctx, "t/copies", "acme", Copies(1))
	if _, err := h3.Transfer(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	before := a.count("/v1/release")
	if err := h3.Release(); err != nil || a.count("/v1/release") != before {
		t.Fatalf("Release after a whole Transfer = %v (sent %d)", err, a.count("/v1/release")-before)
	}
	if st := c.Stats(); st.Sessions != 1 {
		t.Errorf("sessions opened = %d, want 1", st.Sessions)
	}
}

func TestReserveRejectionAndPartialGrant(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	h1, _ := c.Reserve(ctx, "t/two", "d", Copies(2))
	h, err := c.Reserve(ctx, "t/two", "d")
	if err != nil || h.Granted != 0 || h.ID != "" || h.Held() != 0 {
		t.Fatalf("Reserve over the limit = %+v, %v; want a rejection", h, err)
	}
	if err := h.Release(); err != nil {
		t.Fatalf("Release of a rejection = %v", err)
	}
	h1.ReleaseN(ctx, 1)
	h, err = c.Reserve(ctx, "t/two", "d", Copies(3), MinCopies(1))
	if err != nil || h.Granted != 1 {
		t.Fatalf("Reserve(3, min 1) = %+v, %v; want 1", h, err)
	}
}

func TestReserveMaxWait(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	h1, _ := c.Reserve(ctx, "t/two", "d", Copies(2))
	done := make(chan *Hold, 1)
	go func() {
		h, err := c.Reserve(ctx, "t/two", "d", MaxWait(time.Second))
		if err != nil {
			t.Error(err)
		}
		done <- h
	}()
	// Two sleepers: the keepalive loop (at t0+10s) and the retry.
	if _, ok := sleepersOrDone(t, fc, 2, done); ok {
		t.Fatal("Reserve returned without waiting")
	}
	h1.Release()
	next, _ := fc.Next()
	if next.Sub(t0) >= 20*time.Millisecond {
		t.Fatalf("the retry sleeps until t0+%v, want about 10ms", next.Sub(t0))
	}
	fc.Set(next)
	h := <-done
	if h.Granted != 1 {
		t.Fatalf("Reserve after the wait = %+v", h)
	}
}

func TestCloseReleasesEverything(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	h1, _ := c.Reserve(ctx, "t/copies", "acme", Copies(2))
	h2, _ := c.Reserve(ctx, "t/two", "x")
	if got := a.holds(); got != [3]int{1, 2, 0} {
		t.Fatalf("agent before Close = %v", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := a.holds(); got != [3]int{0, 0, 0} {
		t.Fatalf("agent after Close = %v, want nothing held", got)
	}
	if err := h1.Release(); err != nil || h2.Release() != nil {
		t.Fatalf("Release after Close = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := c.Request(ctx, "t/gcra", "d"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Request after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Reserve(ctx, "t/two", "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reserve after Close = %v, want ErrClosed", err)
	}
}

func TestSessionKeptAlive(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc, SessionTTL: 3 * time.Second})
	ctx := context.Background()
	h, _ := c.Reserve(ctx, "t/two", "d", Copies(2))
	for range 10 { // 10 s: past the TTL three times
		if err := fc.BlockUntil(waitCtx(t), 1); err != nil { // the loop waits for its tick
			t.Fatal(err)
		}
		fc.Advance(time.Second)
	}
	if err := fc.BlockUntil(waitCtx(t), 1); err != nil { // the last tick is done
		t.Fatal(err)
	}
	if n := a.count("/v1/sessions/" + c.sessions.cur.id + "/keepalive"); n != 10 {
		t.Errorf("keepalives = %d, want 10", n)
	}
	if err := h.ReleaseN(ctx, 1); err != nil {
		t.Fatalf("the session expired: %v", err)
	}
	if got := a.holds(); got != [3]int{1, 1, 0} {
		t.Fatalf("agent = %v", got)
	}
}

func TestSessionLostIsReopened(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	old, _ := c.Reserve(ctx, "t/two", "d", Copies(2))
	// The agent forgets the session (as after a restart of its state).
	if _, err := a.srv.Engine().EndSession(fc.Now(), c.sessions.cur.id); err != nil {
		t.Fatal(err)
	}
	h, err := c.Reserve(ctx, "t/two", "d", Copies(2))
	if err != nil || h.Granted != 2 {
		t.Fatalf("Reserve after the session was lost = %+v, %v", h, err)
	}
	if st := c.Stats(); st.Sessions != 2 {
		t.Errorf("sessions opened = %d, want 2", st.Sessions)
	}
	before := a.count("/v1/release")
	if err := old.Release(); err != nil || a.count("/v1/release") != before {
		t.Fatalf("Release of a hold of the lost session = %v (sent %d)", err, a.count("/v1/release")-before)
	}
	// The keepalive loop finds a lost session too.
	a.srv.Engine().EndSession(fc.Now(), c.sessions.cur.id)
	c.step(ctx)
	if c.sessions.cur != nil {
		t.Fatal("step kept a session the agent does not know")
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseRetriedWhenAgentComesBack(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	ctx := context.Background()
	h, _ := c.Reserve(ctx, "t/two", "d", Copies(2))
	a.fail.Store(true)
	if err := h.Release(); err != nil {
		t.Fatalf("Release while the agent fails = %v, want nil", err)
	}
	if st := c.Stats(); st.PendingReleases != 1 {
		t.Fatalf("pending releases = %d, want 1", st.PendingReleases)
	}
	c.step(ctx) // still failing: kept
	if st := c.Stats(); st.PendingReleases != 1 {
		t.Fatalf("pending releases = %d after a failed retry, want 1", st.PendingReleases)
	}
	a.fail.Store(false)
	c.step(ctx)
	if st := c.Stats(); st.PendingReleases != 0 {
		t.Fatalf("pending releases = %d, want 0", st.PendingReleases)
	}
	if got := a.holds(); got != [3]int{1, 0, 0} {
		t.Fatalf("agent = %v, want the hold released", got)
	}
}

func TestDegradedHolds(t *testing.T) {
	sock := shortTempDir(t) + "/gone.sock"
	c, _ := newClient(t, Config{Socket: sock})
	ctx := context.Background()
	h, err := c.Reserve(ctx, "t/copies", "acme", Copies(3), MinCopies(2))
	if err != nil || !h.Degraded || h.Granted != 2 || h.Held() != 2 || h.ID != "" {
		t.Fatalf("degraded Reserve = %+v, %v", h, err)
	}
	id, err := h.Transfer(ctx, 1, time.Second)
	if err != nil || id != "degraded:1" || h.Held() != 1 {
		t.Fatalf("degraded Transfer = %q, %v (held %d)", id, err, h.Held())
	}
	h2, err := c.Seize(ctx, id)
	if err != nil || !h2.Degraded || h2.Granted != 1 {
		t.Fatalf("Seize(%q) = %+v, %v", id, h2, err)
	}
	if err := h.Release(); err != nil || h2.Release() != nil {
		t.Fatal(err)
	}
	h3, err := c.Seize(ctx, "x-unknown")
	if err != nil || !h3.Degraded || h3.Granted != 0 {
		t.Fatalf("degraded Seize = %+v, %v", h3, err)
	}
	if _, err := c.Seize(ctx, "degraded:zero"); !errors.Is(err, ErrUnknownTransfer) {
		t.Fatalf("Seize of a bad degraded id = %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	a := startAgent(t, nil)
	c, _ := newClient(t, Config{Socket: a.sock})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 20 {
				if _, err := c.Request(ctx, "t/gcra", "c"); err != nil {
					t.Error(err)
					return
				}
				h, err := c.Reserve(ctx, "t/copies", "acme", Copies(1))
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 && h.Granted > 0 {
					if _, err := h.Transfer(ctx, h.Held(), time.Second); err != nil {
						t.Error(err)
					}
				}
				var rw sync.WaitGroup
				for range 2 { // two releases race: one sends, the other has nothing left
					rw.Go(func() { h.Release() })
				}
				rw.Wait()
			}
		})
	}
	wg.Wait()
	if got := a.holds(); got[1] != 0 {
		t.Fatalf("agent holds = %v, want none left", got)
	}
	if st := c.Stats(); st.Sessions != 1 || st.Degraded != 0 || st.Errors != 0 {
		t.Fatalf("Stats = %+v", st)
	}
}
