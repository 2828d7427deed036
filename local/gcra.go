package local

import "time"

// gcra.go is Boulder's generic cell rate algorithm, pure: no clock, no locks.
// A bucket is one integer, its theoretical arrival time (TAT) in Unix
// nanoseconds; a TAT at or before now (0 included) is a full bucket.

// gcraParams are a bucket's fixed numbers, all in nanoseconds.
type gcraParams struct {
	burst  int64
	ei     int64 // emission interval: period/count, integer division
	b      int64 // burst offset: ei·burst
	period time.Duration
}

// newGCRAParams returns the numbers of a bucket of burst, refilled by
// count per period. Precondition: count ≥ 1 and period/count ≥ 1 ns, which
// config's validation checks of every gcra resource and override; with a
// zero emission interval gcraDecide would divide by zero.
func newGCRAParams(burst, count int, period time.Duration) gcraParams {
	ei := int64(period) / int64(count)
	return gcraParams{burst: int64(burst), ei: ei, b: ei * int64(burst), period: period}
}

// gcraOutcome is the result of one gcra decision.
type gcraOutcome struct {
	tat                    int64 // the new TAT
	granted, remaining     int64
	retryAfter, resetAfter int64 // ns
	changed                bool
}

// gcraDecide decides a request of q tokens, at least m (0 ≤ m ≤ q ≤ burst),
// at t for a bucket whose TAT is tat. It returns the new TAT and the reply
// numbers of docs/semantics.md:
//
//	base = max(tat, t); fit = floor((t + B − base) / EI)
//	granted = min(q, fit); reject if granted < m or granted = 0
//	commit: tat = base + granted·EI
func gcraDecide(p *gcraParams, tat, t, q, m int64) gcraOutcome {
	base := max(tat, t)
	fit := floorDiv(t+p.b-base, p.ei)
	granted := min(q, fit)
	o := gcraOutcome{tat: tat}
	if q > 0 && granted >= m && granted > 0 {
		o.tat = base + granted*p.ei
		o.granted = granted
		o.changed = true
	}
	// After the decision, max(tat, t) = base + granted·EI, so remaining =
	// floor((t + B − base − granted·EI)/EI) = fit − granted: no second division.
	o.remaining = max(0, fit-o.granted)
	o.retryAfter = max(0, base+(o.granted+max(m, 1))*p.ei-p.b-t)
	o.resetAfter = max(0, o.tat-t)
	return o
}

// gcraReport fills remaining, retryAfter and resetAfter for the TAT in o.
func gcraReport(p *gcraParams, o *gcraOutcome, t, m int64) {
	base := max(o.tat, t)
	o.remaining = max(0, floorDiv(t+p.b-base, p.ei))
	// retry_after: least wait until max(m,1) tokens fit.
	o.retryAfter = max(0, base+max(m, 1)*p.ei-p.b-t)
	o.resetAfter = max(0, o.tat-t)
}

// gcraRefund gives q tokens back: tat = max(tat − q·EI, t). Refunding a full
// bucket changes nothing. It returns the new TAT and what remains.
func gcraRefund(p *gcraParams, tat, t, q int64) (int64, int64) {
	if tat > t {
		// q·EI may overflow for huge q: compare in tokens first.
		if q >= (tat-t+p.ei-1)/p.ei {
			tat = t
		} else {
			tat -= q * p.ei
		}
	}
	o := gcraOutcome{tat: tat}
	gcraReport(p, &o, t, 0)
	return tat, o.remaining
}

// gcraRefill is the wait from t until the bucket holds one more token than
// o.remaining: it holds floor(x/EI) tokens (at least 0) for x = t + B −
// max(tat, t), and x grows with time.
func gcraRefill(p *gcraParams, o *gcraOutcome, t int64) int64 {
	x := t + p.b - max(o.tat, t)
	return (o.remaining+1)*p.ei - x
}

// floorDiv is a/b rounded toward negative infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
