package api

import (
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/netguard"
	"github.com/obol-dev/obol/local"
)

// POST /v1/reset {"resource", "domain"} → {"reset": true}: the key's
// counts, tier entries and gcra state are forgotten here and on every peer
// (local.Engine.Reset; the cluster carries it). Each reset is logged with
// who asked (requesterOf) and counted in obol_key_resets_total{resource}.
// A resource the config does not define, in a namespace that allows it,
// holds nothing to reset: {"reset": true}, logged and counted under
// resource="unconfigured"; one of a limit set by a request ("limit") is
// counted under resource="requested".
func (s *Server) reset(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, resetFields, fResource|fDomain)
	if !ok {
		return
	}
	defer putCall(c)
	resource, _, err := s.limited(g, c.body.resource, c.body.limit)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	domain := string(c.body.domain)
	if err := g.engine.Reset(s.now(), resource, domain); err != nil {
		s.fail(ctx, err)
		return
	}
	label := resource
	if _, configured := g.engine.Config().Resources[resource]; !configured {
		label = unconfiguredLabel
		if _, _, ok := local.SplitLimitedName(resource); ok {
			label = requestedLabel
		}
	}
	s.metrics.resets.WithLabelValues(label).Inc()
	s.log.Info("key reset", "resource", shownName(resource), "domain", domain, "client", requesterOf(ctx, s.needsAuth(ctx)))
	w := c.writer(ctx)
	b := w.Object(c.out[:0], 1)
	b = w.Bool(w.First(b, `,"reset":`), true)
	c.reply(ctx, w.End(b))
}

// requesterOf says who sent ctx's request, as far as the agent can tell,
// for the log of an operation that changes state: the process on the Unix
// socket (pid and uid, from the kernel), else the remote address; the
// subject of a TLS client certificate when one was verified; and "token"
// when the listener required the bearer token (which the request, being
// served, carried).
func requesterOf(ctx *fasthttp.RequestCtx, token bool) string {
	var who string
	if uc, ok := netguard.Unwrap(ctx.Conn()).(*net.UnixConn); ok {
		if cred := peerCred(uc); cred != nil {
			who = "pid:" + strconv.Itoa(int(cred.Pid)) + " uid:" + strconv.Itoa(int(cred.Uid))
		}
	} else {
		who = clientOf(ctx)
	}
	if st := ctx.TLSConnectionState(); st != nil && len(st.VerifiedChains) > 0 && len(st.VerifiedChains[0]) > 0 {
		who += " cert:" + st.VerifiedChains[0][0].Subject.String()
	}
	if token {
		who += " token"
	}
	if who == "" {
		return "unknown"
	}
	return who
}
