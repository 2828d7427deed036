package local

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
)

// TestIdsAreUnguessable is the regression test of the hardening issue's third
// attack: ids were a fixed prefix plus a shared counter, so a second client
// derived a victim's hold, transfer and ticket from its own and released,
// seized and completed them. Now sessions, holds and transfers are 128
// random bits, and a ticket carries the window's signature: knowing one's
// own ids tells nothing about anyone else's.
func TestIdsAreUnguessable(t *testing.T) {
	e := engine(t, &config.Config{Resources: map[string]*config.Resource{
		"c/jobs":  {Kind: config.KindCopies, DomainLimit: config.Limit(100)},
		"a/login": {Kind: config.KindAdaptive, MinWindow: 1, MaxWindow: 100, GrowEvery: 10, Margin: 10, Timeout: time.Minute},
	}})
	format := regexp.MustCompile(`^[shx]-[A-Z2-7]{26}$`)
	seen := map[string]bool{}
	check := func(id string) {
		t.Helper()
		if !format.MatchString(id) {
			t.Fatalf("id %q: want a kind letter, '-' and 26 base32 characters (128 random bits)", id)
		}
		if seen[id] {
			t.Fatalf("id %q issued twice", id)
		}
		seen[id] = true
	}
	victim, _ := e.OpenSession(at(0), time.Minute)
	attacker, _ := e.OpenSession(at(0), time.Minute)
	check(victim)
	check(attacker)
	var victimHold, victimTransfer string
	for i := range 50 {
		r, err := e.Reserve(at(0), "c/jobs", "acme", 2, 2, victim)
		if err != nil || r.Hold == "" {
			t.Fatal(r, err)
		}
		check(r.Hold)
		x, err := e.Transfer(at(0), r.Hold, 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		check(x)
		if i == 0 {
			victimHold, victimTransfer = r.Hold, x
		}
	}
	// The attacker's own ids, and the victim's with one character changed,
	// open nothing of the victim's.
	mine, _ := e.Reserve(at(0), "c/jobs", "evil", 1, 1, attacker)
	for _, guess := range []string{mine.Hold, flip(victimHold), flip(victimTransfer), strings.ToLower(victimHold)} {
		if guess == mine.Hold {
			continue
		}
		if _, _, err := e.Release(at(1), guess, 1); !errors.Is(err, ErrUnknownHold) {
			t.Errorf("Release(%q) = %v, want unknown hold", guess, err)
		}
		if _, err := e.Seize(at(1), guess, attacker); !errors.Is(err, ErrUnknownTransfer) {
			t.Errorf("Seize(%q) = %v, want unknown transfer", guess, err)
		}
	}
	if _, err := e.EndSession(at(1), flip(victim)); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("EndSession(a guess) = %v, want unknown session", err)
	}

	// Tickets: the victim's call is admitted after the attacker's; the
	// attacker's ticket with the next sequence number is refused, and the
	// victim's own ticket still completes.
	own, _ := e.Admit(at(0), "a/login")
	vic, _ := e.Admit(at(0), "a/login")
	ownT, vicT := own.Ticket(), vic.Ticket()
	if !regexp.MustCompile(`^a/login#[0-9a-z]+\.[0-9a-z]+\.[A-Z2-7]{26}$`).MatchString(ownT) {
		t.Fatalf("ticket %q: want RESOURCE#EPOCH.SEQ.MAC", ownT)
	}
	forged := strings.TrimSuffix(vicT, vicT[strings.LastIndexByte(vicT, '.'):]) + ownT[strings.LastIndexByte(ownT, '.'):]
	for _, bad := range []string{forged, vicT[:strings.LastIndexByte(vicT, '.')], flip(vicT)} {
		if _, err := e.Complete(at(1), bad, adaptive.Backoff); !errors.Is(err, ErrUnknownTicket) {
			t.Errorf("Complete(%q) = %v, want unknown ticket", bad, err)
		}
	}
	if _, err := e.Complete(at(1), vicT, adaptive.Success); err != nil {
		t.Errorf("the victim's own ticket: %v", err)
	}
	if _, err := e.Complete(at(1), ownT, adaptive.Success); err != nil {
		t.Errorf("the attacker's own ticket: %v", err)
	}
}

// flip changes the last character of s to another of the same alphabet.
func flip(s string) string {
	c := s[len(s)-1]
	switch {
	case c == 'A':
		c = 'B'
	case c >= 'B' && c <= 'Z':
		c = 'A'
	default:
		c = 'Q'
	}
	return s[:len(s)-1] + string(c)
}
