package local

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// e is an exact gap.
func e(from, to int64) idleGap { return idleGap{from, to, to - from} }

func TestIdleLogTake(t *testing.T) {
	tests := []struct {
		name      string
		gaps      []idleGap
		at, need  int64
		want      int64
		wantAfter []idleGap
	}{
		{name: "none", gaps: nil, at: 0, need: 50, want: 0, wantAfter: nil},
		{name: "gap before at", gaps: []idleGap{e(0, 10)}, at: 10, need: 50, want: 0, wantAfter: []idleGap{e(0, 10)}},
		{name: "whole gap", gaps: []idleGap{e(10, 20)}, at: 0, need: 50, want: 10, wantAfter: nil},
		{name: "head", gaps: []idleGap{e(10, 20)}, at: 5, need: 4, want: 4, wantAfter: []idleGap{e(14, 20)}},
		{name: "tail from at", gaps: []idleGap{e(10, 20)}, at: 15, need: 50, want: 5, wantAfter: []idleGap{e(10, 15)}},
		{name: "middle splits", gaps: []idleGap{e(10, 20)}, at: 12, need: 3, want: 3, wantAfter: []idleGap{e(10, 12), e(15, 20)}},
		{name: "earliest first", gaps: []idleGap{e(10, 20), e(30, 40)}, at: 0, need: 15, want: 15, wantAfter: []idleGap{e(35, 40)}},
		{name: "across gaps", gaps: []idleGap{e(10, 20), e(30, 40), e(50, 60)}, at: 35, need: 100, want: 15, wantAfter: []idleGap{e(10, 20), e(30, 35)}},
		{name: "middle when full: merged", gaps: []idleGap{e(10, 20), e(30, 40), e(50, 60), e(70, 80)}, at: 12, need: 3, want: 3,
			wantAfter: []idleGap{{10, 20, 7}, e(30, 40), e(50, 60), e(70, 80)}},
		{name: "merged, at before its span", gaps: []idleGap{{10, 40, 12}}, at: 0, need: 5, want: 5, wantAfter: []idleGap{{10, 40, 7}}},
		{name: "merged, at inside: idle taken as early as it can lie", gaps: []idleGap{{10, 40, 12}}, at: 15, need: 50, want: 7, wantAfter: []idleGap{{10, 40, 5}}},
		{name: "merged, at past its idle", gaps: []idleGap{{10, 40, 12}}, at: 30, need: 50, want: 0, wantAfter: []idleGap{{10, 40, 12}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l idleLog
			l.n = copy(l.gaps[:], tt.gaps)
			if got := l.take(tt.at, tt.need); got != tt.want {
				t.Errorf("take(%d, %d) = %d, want %d", tt.at, tt.need, got, tt.want)
			}
			if got := l.gaps[:l.n]; !slices.Equal(got, tt.wantAfter) && !(len(got) == 0 && len(tt.wantAfter) == 0) {
				t.Errorf("gaps after = %v, want %v", got, tt.wantAfter)
			}
		})
	}
}

func TestIdleLogNoteMergesOldest(t *testing.T) {
	var l idleLog
	for i := int64(0); i < idleLen+2; i++ {
		l.note(i*10, i*10+5)
	}
	// Six gaps of 5 in four entries: the oldest three merged.
	want := []idleGap{{0, 25, 15}, e(30, 35), e(40, 45), e(50, 55)}
	if got := l.gaps[:l.n]; !slices.Equal(got, want) {
		t.Fatalf("log = %v, want %v", got, want)
	}
	l.note(7, 7)   // empty: ignored
	l.note(55, 60) // adjoining the newest exact gap: extends it
	if l.n != idleLen || l.last() != 60 || l.gaps[l.n-1] != e(50, 60) {
		t.Fatalf("log = %v", l.gaps[:l.n])
	}
}

// The case: a spends 5 at t0, b spends 5 at t0+50ms; each applies
// the other's spend late. Both must end on the exact bucket's TAT.
func TestGCRAApplySpendLate(t *testing.T) {
	p := newGCRAParams(10, 10, time.Second) // EI 100 ms, B 1 s
	const ms = int64(time.Millisecond)
	t0 := int64(1e12)
	exact := gcraDecide(&p, 0, t0, 5, 5).tat
	exact = gcraDecide(&p, exact, t0+50*ms, 5, 5).tat

	// b: its own spend first, a's applied after.
	var lb idleLog
	tb := gcraDecide(&p, 0, t0+50*ms, 5, 5).tat
	lb.note(0, t0+50*ms)
	tb = gcraApplySpend(&p, tb, t0, 5, &lb)
	// a: its own spend first, b's applied after (no gap after b's instant).
	var la idleLog
	ta := gcraDecide(&p, 0, t0, 5, 5).tat
	la.note(0, t0)
	ta = gcraApplySpend(&p, ta, t0+50*ms, 5, &la)
	if ta != exact || tb != exact {
		t.Fatalf("TAT a %d, b %d; exact %d (b without the log: %d)", ta-t0, tb-t0, exact-t0,
			gcraApplySpend(&p, gcraDecide(&p, 0, t0+50*ms, 5, 5).tat, t0, 5, nil)-t0)
	}
	if r := gcraDecide(&p, tb, t0+100*ms, 0, 0).remaining; r != 1 {
		t.Fatalf("b's remaining at t0+100ms = %d, want 1", r)
	}
}

// Random interleavings: a node decides its own spends in time order and
// gets a peer's (granted) spends late, in any order. With no more idle gaps
// than the log holds, its TAT must be the exact bucket's, fed every spend
// in time order.
func TestGCRAApplySpendMatchesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := newGCRAParams(20, 10, time.Second) // EI 100 ms, B 2 s
	checked := 0
	for trial := 0; trial < 5000; trial++ {
		type ev struct {
			at, n  int64
			remote bool
		}
		var evs []ev
		tm := int64(1e12)
		for i := 0; i < 2+rng.IntN(5); i++ {
			tm += rng.Int64N(int64(400 * time.Millisecond))
			evs = append(evs, ev{tm, 1 + rng.Int64N(3), rng.IntN(2) == 0})
		}
		// The exact bucket decides every spend in time order; only granted
		// spends happen (the peer's were granted by the peer).
		var exact int64
		var local, remote []ev
		for _, e := range evs {
			o := gcraDecide(&p, exact, e.at, e.n, e.n)
			if !o.changed {
				continue
			}
			exact = o.tat
			if e.remote {
				remote = append(remote, e)
			} else {
				local = append(local, e)
			}
		}
		var l idleLog
		var tat int64
		notes := len(remote) // each remote spend adds at most one gap (a note or a split)
		for _, e := range local {
			if tat < e.at {
				l.note(tat, e.at)
				notes++
			}
			tat = max(tat, e.at) + e.n*p.ei
		}
		rng.Shuffle(len(remote), func(i, j int) { remote[i], remote[j] = remote[j], remote[i] })
		for _, e := range remote {
			tat = gcraApplySpend(&p, tat, e.at, e.n, &l)
		}
		if notes > idleLen {
			// The log dropped gaps: the TAT may run late (toward denial),
			// never early.
			if tat < exact {
				t.Fatalf("trial %d: TAT %d before the exact %d with an overflowing log", trial, tat, exact)
			}
			continue
		}
		checked++
		if tat != exact {
			t.Fatalf("trial %d: TAT %d, exact %d; local %v remote (arrival order) %v", trial, tat, exact, local, remote)
		}
	}
	t.Logf("%d trials fit the log", checked)
	if checked < 2000 {
		t.Fatalf("only %d of 5000 trials fit the log", checked)
	}
}

func FuzzIdleLog(f *testing.F) {
	f.Add([]byte{0, 10, 5, 3, 1, 1, 9, 9, 2, 2}, int64(12), int64(7))
	f.Fuzz(func(t *testing.T, ops []byte, at, need int64) {
		var l idleLog
		tm := int64(0)
		for i := 0; i+1 < len(ops); i += 2 { // gaps in time order, as spends make them
			from := tm + int64(ops[i])
			tm = from + int64(ops[i+1]) + 1
			l.note(from, tm)
		}
		idle := func() int64 {
			sum := int64(0)
			for i, g := range l.gaps[:l.n] {
				if g.from >= g.to || g.idle <= 0 || g.idle > g.to-g.from || (i > 0 && g.from < l.gaps[i-1].to) {
					t.Fatalf("gaps %v not ordered, disjoint and non-empty", l.gaps[:l.n])
				}
				sum += g.idle
			}
			return sum
		}
		for range 2 {
			before := idle()
			need = max(need, -need, 0)
			got := l.take(at, need)
			if after := idle(); got < 0 || got > need || before-after != got {
				t.Fatalf("take(%d, %d) = %d; idle %d → %d", at, need, got, before, after)
			}
			at /= 2
		}
	})
}
