package client

import (
	"errors"
	"strconv"

	"github.com/obol-dev/obol/internal/wire/jsonwire"
	"github.com/obol-dev/obol/internal/wire/replies"
)

// The wire format is the agent's JSON (its wire contract). Bodies
// are appended by hand into pooled buffers and replies read by the wire
// layer's readers (internal/wire/replies), the same package whose writers
// hold the replies' fields, over the agent's own lexer, so that a decision
// costs no allocation for encoding or decoding. Unknown reply fields are
// skipped (the contract lets the agent add fields), a field given twice
// counts as its last value, and integers must be written as integers. The
// functions below turn the wire's replies into the client's types.

// errMalformed is a 2xx reply the client cannot read: the agent (or
// whatever answered) is broken, so the client fails open.
var errMalformed = errors.New("client: malformed reply from the agent")

// appendString appends s as a JSON string. Control characters, '"' and '\'
// are escaped; bytes that are not valid UTF-8 are sent as they are and the
// agent refuses them, naming the field (bad_request).
func appendString(b []byte, s string) []byte { return jsonwire.AppendStringAsIs(b, s) }

// appendStringField appends ,"name":"value" (no comma after '{').
func appendStringField(b []byte, name, v string) []byte {
	return appendString(appendKey(b, name), v)
}

func appendIntField(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, name), v, 10)
}

func appendKey(b []byte, name string) []byte {
	if len(b) > 0 && b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendRequest appends the body of /v1/request (and of a batch item).
func appendRequest(b []byte, resource, domain string, copies, minCopies int, l Limit) []byte {
	b = append(b, '{')
	b = appendStringField(b, "resource", resource)
	b = appendStringField(b, "domain", domain)
	b = appendIntField(b, "copies", int64(copies))
	b = appendIntField(b, "min_copies", int64(minCopies))
	b = appendLimit(b, l)
	return append(b, '}')
}

// appendSettleRequest is appendRequest asking for a settle ticket.
func appendSettleRequest(b []byte, resource, domain string, copies, minCopies int, l Limit) []byte {
	b = appendRequest(b, resource, domain, copies, minCopies, l)
	return append(b[:len(b)-1], `,"settle":true}`...)
}

// appendLimit appends the field limit of l to an object being written;
// nothing for no limit.
func appendLimit(b []byte, l Limit) []byte {
	if l.json == "" {
		return b
	}
	return append(appendKey(b, "limit"), l.json...)
}

// ceilMs returns d in whole milliseconds, rounded up; 0 for d ≤ 0.
func ceilMs(d int64) int64 {
	if d <= 0 {
		return 0
	}
	return (d + 999_999) / 1_000_000
}

// decodeDecision reads the reply of /v1/request (or a batch item that is a
// decision) into r, which it overwrites whole.
func decodeDecision(b []byte, r *Reply) error {
	var d replies.Decision
	err := replies.ReadDecision(b, &d)
	*r = replyOf(&d)
	if err != nil {
		return errMalformed
	}
	return nil
}

// replyOf returns the client's Reply of decision d: a limit the reply left
// out is NoLimit.
func replyOf(d *replies.Decision) Reply {
	return Reply{
		Granted: int(d.Granted), Remaining: int(d.Remaining), RetryAfterMs: d.RetryAfterMs, ResetAfterMs: d.ResetAfterMs,
		Tier: int(d.Tier), TierLimit: int(d.TierLimit), TierHits: int(d.TierHits), Burst: d.Burst,
		HardLimit: int(d.HardLimit), GlobalLimit: int(d.GlobalLimit),
		DomainHitsLastSecond: int(d.DomainHitsLastSecond), GlobalHitsLastSecond: int(d.GlobalHitsLastSecond),
		LimitedByHard: d.LimitedByHard, LimitedByGlobal: d.LimitedByGlobal, Shadow: d.Shadow, Lenient: d.Lenient,
		Ticket: d.Ticket,
	}
}

// The replies' NoLimit is the client's.
var _ [0]struct{} = [NoLimit - replies.NoLimit]struct{}{}

// decodeError reads an error reply {"error": {"code", "message"}}; ok is
// false when b is not one.
func decodeError(b []byte) (code, msg string, ok bool) { return replies.ReadError(b) }

// decodeReservation reads the reply of /v1/reserve into r, which it
// overwrites whole.
func decodeReservation(b []byte, r *ReserveReply) error {
	var w replies.Reservation
	if err := replies.ReadReservation(b, &w); err != nil {
		*r = ReserveReply{}
		return errMalformed
	}
	*r = ReserveReply{
		Granted: int(w.Granted), Hold: w.Hold, DomainLimit: int(w.DomainLimit), GlobalLimit: int(w.GlobalLimit),
		DomainHolds: int(w.DomainHolds), GlobalHolds: int(w.GlobalHolds), Shadow: w.Shadow, Lenient: w.Lenient,
	}
	if w.Groups != nil {
		r.Groups = make([]GroupHolds, len(w.Groups))
		for i, g := range w.Groups {
			r.Groups[i] = GroupHolds{Name: g.Name, Limit: int(g.Limit), Holds: int(g.Holds)}
		}
	}
	return nil
}

// seized is the reply of /v1/seize.
type seized struct {
	hold, resource, domain string
	groups                 []string
	copies                 int
}

func decodeSeized(b []byte) (seized, error) {
	var w replies.Seized
	err := replies.ReadSeized(b, &w)
	r := seized{hold: w.Hold, resource: w.Resource, domain: w.Domain, groups: w.Groups, copies: int(w.Copies)}
	if err != nil {
		return r, errMalformed
	}
	return r, nil
}

// decodeReleased reads the reply of /v1/release.
func decodeReleased(b []byte) (released, held int64, err error) {
	if released, held, err = replies.ReadReleased(b); err != nil {
		return 0, 0, errMalformed
	}
	return released, held, nil
}

// decodeTransfer reads the reply of /v1/transfer: the transfer id.
func decodeTransfer(b []byte) (string, error) { return orMalformed(replies.ReadTransfer(b)) }

// decodeSession reads the reply of POST /v1/sessions: the session id.
func decodeSession(b []byte) (string, error) { return orMalformed(replies.ReadSession(b)) }

// decodeRemaining reads the reply of /v1/refund: what the bucket has left.
func decodeRemaining(b []byte) (int64, error) {
	return orMalformed(replies.ReadInt(b, replies.NameRemaining))
}

// decodeWait reads the wait of a pacing reply (/v1/pace), in ms.
func decodeWait(b []byte) (int64, error) { return orMalformed(replies.ReadInt(b, replies.NameWaitMs)) }

// orMalformed returns v, or errMalformed for any error.
func orMalformed[T any](v T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, errMalformed
	}
	return v, nil
}

// decodeBatch reads the reply of /v1/batch into out, one result per item
// (len(out) items are expected). An item that is an error becomes an
// *APIError.
func decodeBatch(b []byte, out []BatchResult) error {
	var d replies.Decision
	err := replies.ReadBatch(b, len(out), &d, func(i int, isErr bool, code, msg string) {
		if isErr {
			out[i].Err = &APIError{Status: codeStatus(code), Code: code, Message: msg}
			return
		}
		out[i].Decision.Reply = replyOf(&d)
	})
	if err != nil {
		return errMalformed
	}
	return nil
}

// codeStatus returns the HTTP status the contract gives an error code, for
// the errors of batch items, which carry no status of their own.
func codeStatus(code string) int {
	switch code {
	case "unknown_resource", "unknown_hold", "unknown_session", "unknown_transfer", "not_found":
		return 404
	case "wrong_kind", "over_release":
		return 409
	case "too_large":
		return 413
	}
	return 400
}
