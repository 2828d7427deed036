package local

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// TestLimitAbsentIsNoneZeroIsZero is docs/semantics.md's "Limits: absent is
// none, zero is zero", field by field and kind by kind: "Every limit field
// (hard_limit, global_limit, domain_limit, a group's limit, in a resource or
// in an override) is either absent, meaning no limit of that scope, or a
// number ≥ 0 that is enforced as written: a limit of 0 grants nothing in its
// scope", and "A request rejected by a limit of 0 has retry_after_ms: -1".
// Each config is parsed from YAML, as a user writes it, so that the decoder's
// absent-versus-0 distinction is part of what is tested.
func TestLimitAbsentIsNoneZeroIsZero(t *testing.T) {
	for _, tc := range []struct {
		name   string
		absent string // the resource with the field left out
		zero   string // the same with the field at 0
		domain string // the domain asked for
	}{
		{name: "tiers hard_limit", domain: "d",
			absent: `{kind: tiers, tiers: "5,1,1,0"}`,
			zero:   `{kind: tiers, tiers: "5,1,1,0", hard_limit: 0}`},
		{name: "tiers global_limit", domain: "d",
			absent: `{kind: tiers, tiers: "5,1,1,0"}`,
			zero:   `{kind: tiers, tiers: "5,1,1,0", global_limit: 0}`},
		{name: "tiers override hard_limit", domain: "evil",
			absent: `{kind: tiers, tiers: "5,1,1,0", hard_limit: 0, domains: {evil: {tiers: "5,1,1,0"}}}`,
			zero:   `{kind: tiers, tiers: "5,1,1,0", domains: {evil: {tiers: "5,1,1,0", hard_limit: 0}}}`},
		{name: "copies domain_limit", domain: "d",
			absent: `{kind: copies}`,
			zero:   `{kind: copies, domain_limit: 0}`},
		{name: "copies global_limit", domain: "d",
			absent: `{kind: copies, domain_limit: 5}`,
			zero:   `{kind: copies, domain_limit: 5, global_limit: 0}`},
		{name: "copies group limit", domain: "mallory",
			absent: `{kind: copies, domain_limit: 5, groups: [{name: banned, domains: [mallory]}]}`,
			zero:   `{kind: copies, domain_limit: 5, groups: [{name: banned, limit: 0, domains: [mallory]}]}`},
		{name: "copies override domain_limit", domain: "evil",
			absent: `{kind: copies, domain_limit: 0, domains: {evil: {}}}`,
			zero:   `{kind: copies, domain_limit: 5, domains: {evil: {domain_limit: 0}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []struct {
				yaml    string
				granted bool
			}{{tc.absent, true}, {tc.zero, false}} {
				c, err := config.Parse([]byte("resources: {z/r: " + v.yaml + "}"))
				if err != nil {
					t.Fatalf("%s: %v", v.yaml, err)
				}
				e := New(c)
				granted, retry := zeroProbe(t, e, c.Resources["z/r"].Kind, tc.domain)
				if granted != v.granted {
					t.Errorf("%s: granted %v, want %v", v.yaml, granted, v.granted)
				}
				if !v.granted && retry != Never {
					t.Errorf("%s: retry_after %v, want never (-1)", v.yaml, retry)
				}
				// A per-domain 0 (override, group) leaves other domains alone.
				if tc.domain != "d" && !v.granted {
					if g, _ := zeroProbe(t, e, c.Resources["z/r"].Kind, "other"); !g {
						t.Errorf("%s: domain %q, which has no zero limit, was refused too", v.yaml, "other")
					}
				}
			}
		})
	}
}

// zeroProbe asks for one hit (rate kinds) or one copy (copies) of z/r and
// reports whether it was granted and, for rate kinds, the retry wait.
func zeroProbe(t *testing.T, e *Engine, k config.Kind, domain string) (bool, time.Duration) {
	t.Helper()
	if k == config.KindCopies {
		sid, err := e.OpenSession(at(0), 10*s)
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.Reserve(at(0), "z/r", domain, 1, 1, sid)
		if err != nil {
			t.Fatal(err)
		}
		return r.Granted == 1, Never
	}
	d, err := e.Request(at(0), "z/r", domain, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	// A peek agrees: nothing remains and nothing ever will.
	p, _ := e.Request(at(10), "z/r", domain, 0, 0)
	if d.Granted == 0 && (p.Remaining != 0 || p.RetryAfter != Never) {
		t.Errorf("peek after a zero-limit rejection: %+v", p)
	}
	return d.Granted == 1, d.RetryAfter
}
