// Sessions: the one lease of the agent's that a client's holds belong to,
// opened on first use, kept alive, ended by Close, and the releases queued
// while the agent was unreachable.

package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// session is one lease of the agent's.
type session struct {
	id    string
	ended atomic.Bool // ended by Close, or found unknown by the agent
}

// pendingRelease is a release the agent could not take yet.
type pendingRelease struct {
	hold string
	n    int
	sess *session
}

// sessions is the client's session (opened on the first Reserve or Seize)
// and the background loop that keeps it alive and retries releases.
type sessions struct {
	mu      sync.Mutex
	cur     *session
	pending []pendingRelease
	loop    bool
	done    chan struct{}
	wg      sync.WaitGroup
}

func (s *sessions) init() { s.done = make(chan struct{}) }

// session returns the client's session, opening one (and starting the
// keepalive loop) when there is none.
func (c *Client) session(ctx context.Context) (*session, error) {
	s := &c.sessions
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if s.cur != nil && !s.cur.ended.Load() {
		return s.cur, nil
	}
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf, '{')
	k.buf = appendIntField(k.buf, "ttl_ms", ceilMs(int64(c.ttl)))
	k.buf = append(k.buf, '}')
	if err := c.post(ctx, k, epSessions); err != nil {
		return nil, err
	}
	id, err := decodeSession(k.resp.Body())
	if err != nil {
		return nil, &agentError{err}
	}
	s.cur = &session{id: id}
	c.stats.sessions.Add(1)
	if !s.loop {
		s.loop = true
		s.wg.Add(1)
		go c.keepAliveLoop()
	}
	return s.cur, nil
}

// ended marks sess ended (the agent no longer knows it): its holds have
// nothing left, and the next call opens a new session.
func (s *sessions) ended(sess *session) {
	sess.ended.Store(true)
	s.mu.Lock()
	if s.cur == sess {
		s.cur = nil
	}
	s.mu.Unlock()
}

func (s *sessions) queue(p pendingRelease) {
	s.mu.Lock()
	s.pending = append(s.pending, p)
	s.mu.Unlock()
}

func (s *sessions) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// keepAliveLoop calls step every third of the session TTL until Close.
func (c *Client) keepAliveLoop() {
	defer c.sessions.wg.Done()
	every := (c.ttl / 3).Truncate(time.Millisecond)
	for {
		select {
		case <-c.sessions.done:
			return
		case <-c.clock.After(every):
			c.step(context.Background())
		}
	}
}

// step is one turn of the background loop: it renews the session (a
// session the agent no longer knows is marked ended) and retries the
// releases the agent could not take, dropping those of ended sessions.
func (c *Client) step(ctx context.Context) {
	s := &c.sessions
	s.mu.Lock()
	cur, pending := s.cur, s.pending
	s.pending = nil
	s.mu.Unlock()
	if cur != nil && !cur.ended.Load() {
		if err := c.keepAlive(ctx, cur.id); errors.Is(err, ErrUnknownSession) {
			s.ended(cur)
		}
	}
	var keep []pendingRelease
	for _, p := range pending {
		if p.sess.ended.Load() {
			continue
		}
		if _, err := c.release(ctx, p.hold, p.n); isAgentError(err) {
			keep = append(keep, p)
		}
	}
	if len(keep) > 0 {
		s.mu.Lock()
		s.pending = append(keep, s.pending...)
		s.mu.Unlock()
	}
}

func (c *Client) keepAlive(ctx context.Context, id string) error {
	k := getCall()
	defer putCall(k)
	k.req.Header.SetMethod("POST")
	k.req.SetRequestURI(c.base + "/v1/sessions/" + id + "/keepalive")
	return c.do(ctx, k)
}

// close stops the loop and ends the session.
func (s *sessions) close(c *Client) error {
	s.mu.Lock()
	cur, loop := s.cur, s.loop
	s.cur, s.pending = nil, nil
	s.mu.Unlock()
	if loop {
		close(s.done)
		s.wg.Wait()
	}
	if cur == nil || cur.ended.Swap(true) {
		return nil
	}
	k := getCall()
	defer putCall(k)
	k.req.Header.SetMethod("DELETE")
	k.req.SetRequestURI(c.base + "/v1/sessions/" + cur.id)
	err := c.do(context.Background(), k)
	if err == nil || isAgentError(err) || errors.Is(err, ErrUnknownSession) {
		return nil
	}
	return err
}
