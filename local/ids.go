package local

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
)

// ids.go makes the ids the engine hands out unguessable: an id is the only
// proof a caller has that a session, hold, transfer or ticket is its own
// (there is no other authentication on the local socket), so an id must not
// be derivable from another.
//
// Sessions, holds and transfers are "K-" and 26 characters of crypto/rand
// base32 (at least 128 random bits): one lookup in a map, nothing to verify.
// Adaptive tickets keep their compact form (resource, epoch, sequence, which
// the tracker needs) and carry a MAC over it: the first 128 bits of
// HMAC-SHA256 under a key drawn at random for each window, in base32.

// newRandomID returns kind, '-', and 128 random bits as base32 text.
func newRandomID(kind byte) string {
	return string(kind) + "-" + rand.Text()
}

// ticketKey is the key a window signs its tickets with.
type ticketKey [32]byte

func newTicketKey() *ticketKey {
	var k ticketKey
	_, _ = rand.Read(k[:]) // crypto/rand.Read never fails (it panics when the system has no randomness)
	return &k
}

// ticketMACLen is the length of a ticket's MAC in base32 characters (16
// bytes).
var ticketMACLen = b32.EncodedLen(16)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// appendMAC appends the MAC of msg under k to b.
func (k *ticketKey) appendMAC(b, msg []byte) []byte {
	m := hmac.New(sha256.New, k[:])
	m.Write(msg)
	var sum [sha256.Size]byte
	return b32.AppendEncode(b, m.Sum(sum[:0])[:16])
}

// verify reports whether mac is the MAC of msg under k, in constant time.
func (k *ticketKey) verify(msg []byte, mac string) bool {
	if len(mac) != ticketMACLen {
		return false
	}
	var buf [32]byte
	want := k.appendMAC(buf[:0], msg)
	return hmac.Equal(want, []byte(mac))
}
