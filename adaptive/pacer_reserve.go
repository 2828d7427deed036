package adaptive

import (
	"math"
	"time"
)

// KeepReserve paces a group's requests on a schedule whose rate is a
// function of the server's remaining count r, the one signal every client
// of the quota sees alike:
//
//	per-member rate = S · exp((r − R)/s)
//
// with R a small reserve (0.5% of Limit: 22 of 4500) and s = 20 requests.
// Above the reserve the rate grows steeply (a large surplus, such as a full
// bucket, is spent at once: past r = R + 30s the pacer stops pacing); below
// it the rate falls smoothly, so that the clients together settle where the
// bucket holds about R, before it runs dry rather than after.
//
// S, the rate at the reserve, is learned. While the bucket stays between R
// and 2R, S grows by the same small amount per second for every client
// (additive increase); below R it shrinks by a proportion (multiplicative
// decrease), and each 429 cuts it by a fifth. That is AIMD: the decreases
// take more from the clients that send more, so their rates converge, which
// is what keeps the request counts of the clients equal. Far above the
// reserve (2R and more) S grows by a proportion, so a client that started
// slowly catches up quickly.
//
// A group with no information yet (S unknown) does not pace at all; its
// first observation of an empty bucket sets S to the whole refill rate
// divided among its members, the most it could ever use alone. Each pacer's
// first request goes at once; the group's later requests take slots spaced
// 1/(members · rate) apart (the rate of the moment each asks), so the
// members of a group never bunch.

// Tuning of KeepReserve.
const (
	reserveFraction = 0.005  // R, of Limit
	reserveSoftness = 20.0   // s, requests
	reserveUnpaced  = 30.0   // (r − R)/s past which the pacer stops pacing
	reserveAdd      = 0.0005 // additive increase of S, of the refill rate per second
	reserveShrink   = 0.02   // multiplicative decrease of S per second, at r = 0
	reserveGrow     = 0.05   // multiplicative increase of S per second, from 2R
	reserveCut      = 0.8    // S is multiplied by this per 429
)

// reserveGroup is the KeepReserve state a group shares.
type reserveGroup struct {
	scale   float64   // S: per-member requests/s at r = R; +Inf = unknown
	members int       // pacers made
	last    time.Time // the group's latest slot
	at      time.Time // the last observation
	rem     float64   // the remaining count it saw
	seen    bool
	since   time.Time // when S was set from nothing: earlier requests do not cut it
}

// reservePacer is one pacer's KeepReserve state.
type reservePacer struct {
	started bool
	sent    time.Time // when its last request went
}

func (s *reserveGroup) init(cfg *PacerConfig) {
	s.scale = math.Inf(1)
	if cfg.StartSleep > 0 {
		s.scale = 1 / cfg.StartSleep.Seconds()
	}
}

// rate returns the per-member rate at remaining r (+Inf: unpaced).
func (s *reserveGroup) rate(cfg *PacerConfig, r float64) float64 {
	x := (r - reserveFraction*float64(cfg.Limit)) / reserveSoftness
	if x > reserveUnpaced {
		return math.Inf(1)
	}
	return s.scale * math.Exp(x)
}

func (s *reserveGroup) delay(g *PacerGroup, p *reservePacer, now time.Time) time.Duration {
	r := s.rem
	if !s.seen {
		r = reserveFraction * float64(g.cfg.Limit) // nothing seen: pace at S
	}
	rate := s.rate(&g.cfg, r) * float64(max(s.members, 1))
	at := now
	if p.started && rate > 0 && !math.IsInf(rate, 1) {
		if next := s.last.Add(g.jittered(1 / rate)); next.After(now) {
			at = next
		}
	}
	p.started, p.sent = true, at
	if at.After(s.last) {
		s.last = at
	}
	return at.Sub(now)
}

// status returns the group's rate now and the delay a request of p would
// get at now, without jitter and without taking a slot.
func (s *reserveGroup) status(g *PacerGroup, p *reservePacer, now time.Time) (rate float64, wait time.Duration) {
	r := s.rem
	if !s.seen {
		r = reserveFraction * float64(g.cfg.Limit)
	}
	rate = s.rate(&g.cfg, r) * float64(max(s.members, 1))
	if p.started && rate > 0 && !math.IsInf(rate, 1) {
		if next := s.last.Add(seconds(1 / rate)); next.After(now) {
			wait = next.Sub(now)
		}
	}
	return rate, wait
}

func (s *reserveGroup) observe(g *PacerGroup, p *reservePacer, now time.Time, limited bool, remaining int) {
	cfg := &g.cfg
	if limited {
		remaining = 0 // a 429 says the bucket is empty
	}
	if remaining < 0 {
		return // nothing to learn from
	}
	rho := float64(cfg.Limit) / cfg.Period.Seconds()
	reserve := reserveFraction * float64(cfg.Limit)
	r := float64(remaining)
	switch {
	case math.IsInf(s.scale, 1):
		if r < reserve+3*reserveSoftness {
			s.scale = rho / float64(max(s.members, 1))
			s.since = now
		}
	case limited && !p.sent.Before(s.since):
		s.scale *= reserveCut
	}
	if s.seen && !math.IsInf(s.scale, 1) {
		dt := now.Sub(s.at).Seconds()
		level := (s.rem + r) / 2 // the mean level between the two samples
		switch {
		case dt <= 0:
		case level >= 2*reserve:
			s.scale *= math.Exp(reserveGrow * dt)
		case level >= reserve:
			s.scale += reserveAdd * rho * dt * (level - reserve) / reserve
		case level < 1:
			// At the edge of empty: the 429s, if any, say by how much
			// the clients ask too much, and cut S.
		default:
			s.scale *= math.Exp(-reserveShrink * dt * (reserve - level) / reserve)
		}
		s.scale = min(s.scale, 1e9)
	}
	s.at, s.rem, s.seen = now, r, true
}
