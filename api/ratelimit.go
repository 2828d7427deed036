package api

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// ratelimit.go renders the RateLimit header fields of GET /v1/check
// (check.go): a resource's policies, built once per config, and the one
// closest to its limit for a decision (setRateLimit).

// rlPolicy is one quota policy of the RateLimit-Policy field.
type rlPolicy struct {
	name string
	q, w int64 // quota, window in seconds
}

// policySet is the RateLimit-Policy of a resource for the domains that
// share a config (the resource's, or one override), built once per config.
type policySet struct {
	items        []rlPolicy
	tiers        int // items[:tiers] are the tiers (t0 alone for none)
	hard, global int // the index of the hard and global items; -1 = none
	field        []byte
	limits       []byte // ", 5;w=1;name="t1", …": the tail of X-RateLimit-Limit
}

// resPolicies are a resource's policy sets: its own and its overrides'.
type resPolicies struct {
	def  *policySet
	over map[string]*policySet
}

// policyTable holds the policy sets of a config's rate resources (tiers
// and gcra), by resource name. Read-only once built.
type policyTable map[string]*resPolicies

// newPolicyTable builds the policy sets of cfg (nil: none).
func newPolicyTable(cfg *config.Config) policyTable {
	t := policyTable{}
	if cfg == nil {
		return t
	}
	for name, rc := range cfg.Resources {
		var set func(o *config.Override) *policySet
		switch rc.Kind {
		case config.KindTiers:
			set = func(o *config.Override) *policySet {
				if o == nil {
					return tiersPolicies(rc.Tiers, rc.HardLimit, rc.GlobalLimit)
				}
				return tiersPolicies(o.Tiers, o.HardLimit, rc.GlobalLimit)
			}
		case config.KindGCRA:
			set = func(o *config.Override) *policySet {
				if o == nil {
					return gcraPolicies(rc.Burst, rc.Count, rc.Period)
				}
				return gcraPolicies(o.Burst, o.Count, o.Period)
			}
		default:
			continue
		}
		rp := &resPolicies{def: set(nil)}
		for d, o := range rc.Domains {
			if rp.over == nil {
				rp.over = make(map[string]*policySet, len(rc.Domains))
			}
			rp.over[d] = set(o)
		}
		t[name] = rp
	}
	return t
}

// lookup returns the policy set of domain's config for resource, or nil
// when the resource has none (unconfigured, or not a rate kind).
func (t policyTable) lookup(resource, domain string) *policySet {
	rp := t[resource]
	if rp == nil {
		return nil
	}
	if rp.over != nil {
		if ps, ok := rp.over[domain]; ok {
			return ps
		}
	}
	return rp.def
}

// tiersPolicies is the policy set of a tier list and its hard and global
// limits (nil = none).
func tiersPolicies(tiers []config.Tier, hard, global *int) *policySet {
	ps := &policySet{hard: -1, global: -1}
	for i, t := range tiers {
		ps.items = append(ps.items, rlPolicy{name: "t" + strconv.Itoa(i+1), q: int64(t.Limit), w: max(1, ceilSec(t.Window))})
	}
	if len(tiers) == 0 {
		ps.items = append(ps.items, rlPolicy{name: "t0", q: 0, w: 1})
	}
	ps.tiers = len(ps.items)
	if hard != nil {
		ps.hard = len(ps.items)
		ps.items = append(ps.items, rlPolicy{name: "hard", q: int64(*hard), w: 1})
	}
	if global != nil {
		ps.global = len(ps.items)
		ps.items = append(ps.items, rlPolicy{name: "global", q: int64(*global), w: 1})
	}
	return ps.render()
}

// gcraPolicies is the policy set of a gcra bucket: q is the burst and w
// the time to refill it from empty, burst emission intervals of
// period/count (whole nanoseconds, as the engine counts them).
func gcraPolicies(burst, count int, period time.Duration) *policySet {
	ei := time.Duration(1)
	if count > 0 {
		ei = max(1, period/time.Duration(count))
	}
	ps := &policySet{hard: -1, global: -1, items: []rlPolicy{{name: "gcra", q: int64(burst), w: max(1, ceilSec(ei*time.Duration(burst)))}}}
	return ps.render()
}

// render fills the field values of ps from its items.
func (ps *policySet) render() *policySet {
	for i, p := range ps.items {
		if i > 0 {
			ps.field = append(ps.field, ", "...)
		}
		ps.field = appendSFString(ps.field, p.name)
		ps.field = append(ps.field, ";q="...)
		ps.field = strconv.AppendInt(ps.field, p.q, 10)
		ps.field = append(ps.field, ";w="...)
		ps.field = strconv.AppendInt(ps.field, p.w, 10)
		ps.limits = append(ps.limits, ", "...)
		ps.limits = strconv.AppendInt(ps.limits, p.q, 10)
		ps.limits = append(ps.limits, ";w="...)
		ps.limits = strconv.AppendInt(ps.limits, p.w, 10)
		ps.limits = append(ps.limits, ";name="...)
		ps.limits = appendSFString(ps.limits, p.name)
	}
	return ps
}

// rlChoice is the policy the RateLimit field reports: its index in the
// set, what is left under it, and its effective window (local.Never: no
// more ever).
type rlChoice struct {
	i int
	r int64
	t time.Duration
}

// offer makes policy i, with r left and window t, the choice when it is
// closer to its limit: less left, or as much and a longer window (Never is
// the longest); on a full tie the first offered stays.
func (c *rlChoice) offer(i int, r int64, t time.Duration) {
	if c.i >= 0 {
		if r > c.r || r == c.r && (c.t == local.Never || t != local.Never && t <= c.t) {
			return
		}
	}
	*c = rlChoice{i: i, r: r, t: t}
}

// choose returns the policy of ps closest to its limit after decision d,
// or false when none applies (no set, or a set of another kind).
func choose(ps *policySet, d *local.Decision) (rlChoice, bool) {
	c := rlChoice{i: -1}
	if ps == nil {
		return c, false
	}
	left := func(i int, used int) int64 { // what policy i, of which used is spent, has left
		return min(max(ps.items[i].q-int64(used), 0), ps.items[i].q)
	}
	switch d.Kind {
	case config.KindGCRA:
		if ps.items[0].name != "gcra" {
			return c, false
		}
		c.offer(0, min(int64(max(d.Remaining, 0)), ps.items[0].q), d.GCRARefill)
	case config.KindTiers:
		if ps.items[0].name == "gcra" {
			return c, false
		}
		switch k := d.PolicyTier; {
		case ps.items[0].name == "t0":
			c.offer(0, 0, local.Never)
		case k >= 1 && k <= ps.tiers:
			c.offer(k-1, min(int64(max(d.PolicyTierRemaining, 0)), ps.items[k-1].q), d.PolicyTierRefill)
		}
		if ps.hard >= 0 {
			c.offer(ps.hard, left(ps.hard, d.DomainHitsLastSecond), d.HardRefill)
		}
		if ps.global >= 0 {
			c.offer(ps.global, left(ps.global, d.GlobalHitsLastSecond), d.GlobalRefill)
		}
	}
	return c, c.i >= 0
}

// setRateLimit sets the RateLimit fields of decision d, in form, using buf
// as scratch (and returning it). retry is the reply's Retry-After in
// seconds (0 = none): the window t reported is then at most retry. A
// lenient decision (no limit applied) gets no field.
//
// The fields follow draft-ietf-httpapi-ratelimit-headers-11.
// RateLimit-Policy lists every policy that applies to the domain (from its
// override when it has one, else the resource's config), the same list on
// every reply:
//
//	"t1";q=5;w=1, "t2";q=50;w=5, "hard";q=100;w=1, "global";q=1000;w=1
//	"gcra";q=20;w=1
//
// Items are named t1…tN (the tiers, lowest first; an empty tier list is
// the fake tier "t0";q=0;w=1, which grants nothing), hard (the hard limit,
// per 1 s), global (the global limit, per 1 s) and gcra (the bucket: q is
// its burst, w the time it takes to refill from empty, burst × period /
// count). w is in seconds, rounded up, at least 1. A limit of 0 is listed
// (q=0).
//
// RateLimit names the one policy closest to its limit, with r, what the
// domain has left under it (never above its q), and t, its effective
// window: the seconds, rounded up, within which the domain can use no more
// than r under that policy (until more of it is available, with no other
// traffic; its window when nothing is used). t is left out when no more
// will ever be (a limit of 0). The closest policy is the one with the
// least r; ties go to the longer t, then to the first in the list. Among
// the tiers only those a request draws from now take part (the current
// tier and those the walk would enter; local.Decision.PolicyTier). On a
// rejection with a Retry-After, t is at most Retry-After: the draft asks
// that Retry-After not point earlier than the end of the effective window.
//
// The draft-03 form, Envoy's, is the same choice in three fields:
// X-RateLimit-Limit: q, then the policy list ("5, 5;w=1;name="t1", …"),
// X-RateLimit-Remaining: r, X-RateLimit-Reset: t (left out as t is).
func setRateLimit(ctx *fasthttp.RequestCtx, buf []byte, ps *policySet, d *local.Decision, form headerForm, retry int64) []byte {
	if d.Lenient {
		return buf
	}
	c, ok := choose(ps, d)
	if !ok {
		return buf
	}
	t := int64(-1) // none
	if c.t != local.Never {
		t = ceilSec(c.t)
	}
	if retry > 0 && (t < 0 || t > retry) {
		t = retry
	}
	p := &ps.items[c.i]
	if form&formDraft11 != 0 {
		ctx.Response.Header.SetCanonical(hdrPolicy, ps.field)
		start := len(buf)
		buf = appendSFString(buf, p.name)
		buf = append(buf, ";r="...)
		buf = strconv.AppendInt(buf, c.r, 10)
		if t >= 0 {
			buf = append(buf, ";t="...)
			buf = strconv.AppendInt(buf, t, 10)
		}
		ctx.Response.Header.SetCanonical(hdrRateLimit, buf[start:])
	}
	if form&formDraft03 != 0 {
		start := len(buf)
		buf = strconv.AppendInt(buf, p.q, 10)
		buf = append(buf, ps.limits...)
		ctx.Response.Header.SetCanonical(hdrXLimit, buf[start:])
		start = len(buf)
		buf = strconv.AppendInt(buf, c.r, 10)
		ctx.Response.Header.SetCanonical(hdrXRemaining, buf[start:])
		if t >= 0 {
			start = len(buf)
			buf = strconv.AppendInt(buf, t, 10)
			ctx.Response.Header.SetCanonical(hdrXReset, buf[start:])
		}
	}
	return buf
}

// appendSFString appends s as a structured-field string (RFC 9651): '"' and
// '\' are escaped; bytes outside printable ASCII, which an sf-string cannot
// hold, are percent-encoded.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
