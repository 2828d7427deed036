package local

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/adaptive"
)

// share.go bounds what one client may hold of an adaptive window
// (config.Resource.ClientShare): a client that admits calls and never
// completes them could otherwise fill the window for everyone until its
// tickets expire, and their expiry as backoffs shrinks the window. A client
// is whatever identity the caller passes (the API passes the peer process
// on the Unix socket, the address on TCP); "" is not bounded. No clock: the
// instant is an argument.

// clientShare is one adaptive resource's account of outstanding tickets by
// client. Safe for concurrent use.
type clientShare struct {
	bits     atomic.Uint64 // math.Float64bits of the share, in (0, 1]; 1: no bound (nothing is recorded)
	mu       sync.Mutex
	timeout  int64 // ns: a ticket older than this has expired
	byClient map[string][]heldTicket
	byTicket map[adaptive.Ticket]string
}

// heldTicket is an outstanding ticket of a client and when it was admitted.
type heldTicket struct {
	t  adaptive.Ticket
	at int64
}

func newClientShare(share float64, timeout time.Duration) *clientShare {
	c := &clientShare{timeout: int64(timeout),
		byClient: make(map[string][]heldTicket), byTicket: make(map[adaptive.Ticket]string)}
	c.bits.Store(math.Float64bits(share))
	return c
}

// share returns the share in force (safe without the lock: a reload may
// change it while admits read it).
func (c *clientShare) share() float64 { return math.Float64frombits(c.bits.Load()) }

// bounded reports whether the share bounds client at all.
func (c *clientShare) bounded(client string) bool { return c != nil && client != "" && c.share() < 1 }

// room reports whether client may take one more place of a window of w at
// t: its live tickets are fewer than max(1, ⌊share·w⌋). Expired tickets are
// forgotten first.
func (c *clientShare) room(client string, w int, t int64) bool {
	if !c.bounded(client) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune(client, t)
	return len(c.byClient[client]) < max(1, int(c.share()*float64(w)))
}

// took records that client was admitted ticket tk at t.
func (c *clientShare) took(client string, tk adaptive.Ticket, t int64) {
	if !c.bounded(client) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byClient[client] = append(c.byClient[client], heldTicket{tk, t})
	c.byTicket[tk] = client
}

// done forgets ticket tk (completed).
func (c *clientShare) done(tk adaptive.Ticket) {
	if c == nil || c.share() >= 1 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	client, ok := c.byTicket[tk]
	if !ok {
		return
	}
	delete(c.byTicket, tk)
	held := c.byClient[client]
	for i := range held {
		if held[i].t == tk {
			held = append(held[:i], held[i+1:]...)
			break
		}
	}
	if len(held) == 0 {
		delete(c.byClient, client)
	} else {
		c.byClient[client] = held
	}
}

// prune forgets client's tickets that expired by t (mu held).
func (c *clientShare) prune(client string, t int64) {
	held := c.byClient[client]
	n := 0
	for _, h := range held {
		if t-h.at >= c.timeout {
			delete(c.byTicket, h.t)
			continue
		}
		held[n] = h
		n++
	}
	if n == 0 {
		delete(c.byClient, client)
	} else {
		c.byClient[client] = held[:n]
	}
}

// sweep forgets every expired ticket (Step).
func (c *clientShare) sweep(t int64) {
	if c == nil || c.share() >= 1 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for client := range c.byClient {
		c.prune(client, t)
	}
}

// configure takes a reloaded config's share and timeout. Lowering the share
// keeps the tickets already held; raising it to 1 forgets the account.
func (c *clientShare) configure(share float64, timeout time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bits.Store(math.Float64bits(share))
	c.timeout = int64(timeout)
	if share >= 1 {
		c.byClient = make(map[string][]heldTicket)
		c.byTicket = make(map[adaptive.Ticket]string)
	}
}

// BoundsClients reports whether resource is an adaptive resource whose
// client_share bounds each client (below 1): only then does the caller need
// to tell its clients apart (AdmitAs).
func (e *Engine) BoundsClients(resource string) bool {
	a, ok := e.adaptiveOf(resource)
	return ok && a.share.share() < 1
}
