package replies

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// The replies are written in MessagePack by the appenders of package mpwire
// rather than by github.com/vmihailenco/msgpack/v5, the library the agent
// uses for its gossip. BenchmarkDecisionMsgpack measures why: the decision
// reply written by a Writer, by the library's Encoder called member by
// member (its fastest use: no reflection), and by the library encoding a
// tagged struct. TestLibraryWritesTheSameBytes holds the three to the same
// bytes, so that the benchmark compares like with like.

// sliceWriter lets the library's Encoder append to a byte slice, as a
// Writer does: the reply is not copied out of the encoder.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *sliceWriter) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }

// encodeDecision writes d's reply with the library's Encoder, the members
// and their presence as AppendDecision writes them.
func encodeDecision(e *msgpack.Encoder, d *Decision) error {
	n := 5
	if d.Tiers {
		n += 8 + btoi(d.HardLimit != NoLimit) + btoi(d.GlobalLimit != NoLimit)
	}
	n += btoi(d.Lenient)
	if err := e.EncodeMapLen(n); err != nil {
		return err
	}
	type member struct {
		k    Key
		i    int64
		b    bool
		isB  bool
		omit bool
	}
	ms := [...]member{
		{k: kGranted, i: d.Granted},
		{k: kRemaining, i: d.Remaining},
		{k: kRetryAfterMs, i: d.RetryAfterMs},
		{k: kResetAfterMs, i: d.ResetAfterMs},
		{k: kTier, i: d.Tier, omit: !d.Tiers},
		{k: kTierLimit, i: d.TierLimit, omit: !d.Tiers},
		{k: kTierHits, i: d.TierHits, omit: !d.Tiers},
		{k: kBurst, b: d.Burst, isB: true, omit: !d.Tiers},
		{k: kHardLimit, i: d.HardLimit, omit: !d.Tiers || d.HardLimit == NoLimit},
		{k: kGlobalLimit, i: d.GlobalLimit, omit: !d.Tiers || d.GlobalLimit == NoLimit},
		{k: kDomainHitsLastSecond, i: d.DomainHitsLastSecond, omit: !d.Tiers},
		{k: kGlobalHitsLastSecond, i: d.GlobalHitsLastSecond, omit: !d.Tiers},
		{k: kLimitedByHard, b: d.LimitedByHard, isB: true, omit: !d.Tiers},
		{k: kLimitedByGlobal, b: d.LimitedByGlobal, isB: true, omit: !d.Tiers},
		{k: kShadow, b: d.Shadow, isB: true},
		{k: kLenient, b: true, isB: true, omit: !d.Lenient},
	}
	for i := range ms {
		m := &ms[i]
		if m.omit {
			continue
		}
		if err := e.EncodeString(m.k.Name()); err != nil {
			return err
		}
		var err error
		if m.isB {
			err = e.EncodeBool(m.b)
		} else {
			err = e.EncodeInt(m.i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// taggedDecision is the decision reply as a struct the library encodes by
// reflection (with UseCompactInts): a field left out is a nil pointer or a
// false lenient.
type taggedDecision struct {
	_msgpack             struct{} `msgpack:",as_array=false"`
	Granted              int64    `msgpack:"granted"`
	Remaining            int64    `msgpack:"remaining"`
	RetryAfterMs         int64    `msgpack:"retry_after_ms"`
	ResetAfterMs         int64    `msgpack:"reset_after_ms"`
	Tier                 *int64   `msgpack:"tier,omitempty"`
	TierLimit            *int64   `msgpack:"tier_limit,omitempty"`
	TierHits             *int64   `msgpack:"tier_hits,omitempty"`
	Burst                *bool    `msgpack:"burst,omitempty"`
	HardLimit            *int64   `msgpack:"hard_limit,omitempty"`
	GlobalLimit          *int64   `msgpack:"global_limit,omitempty"`
	DomainHitsLastSecond *int64   `msgpack:"domain_hits_last_second,omitempty"`
	GlobalHitsLastSecond *int64   `msgpack:"global_hits_last_second,omitempty"`
	LimitedByHard        *bool    `msgpack:"limited_by_hard,omitempty"`
	LimitedByGlobal      *bool    `msgpack:"limited_by_global,omitempty"`
	Shadow               bool     `msgpack:"shadow"`
	Lenient              bool     `msgpack:"lenient,omitempty"`
}

func tagged(d *Decision) taggedDecision {
	t := taggedDecision{Granted: d.Granted, Remaining: d.Remaining, RetryAfterMs: d.RetryAfterMs,
		ResetAfterMs: d.ResetAfterMs, Shadow: d.Shadow, Lenient: d.Lenient}
	if d.Tiers {
		t.Tier, t.TierLimit, t.TierHits, t.Burst = &d.Tier, &d.TierLimit, &d.TierHits, &d.Burst
		if d.HardLimit != NoLimit {
			t.HardLimit = &d.HardLimit
		}
		if d.GlobalLimit != NoLimit {
			t.GlobalLimit = &d.GlobalLimit
		}
		t.DomainHitsLastSecond, t.GlobalHitsLastSecond = &d.DomainHitsLastSecond, &d.GlobalHitsLastSecond
		t.LimitedByHard, t.LimitedByGlobal = &d.LimitedByHard, &d.LimitedByGlobal
	}
	return t
}

var libraryDecisions = []Decision{
	benchDecision,
	{Granted: 1, Remaining: 19, ResetAfterMs: 50, HardLimit: NoLimit, GlobalLimit: NoLimit},
	{Granted: 0, Remaining: 0, RetryAfterMs: -1, ResetAfterMs: 70000, Tiers: true, Tier: 2, TierLimit: 300,
		TierHits: 300, HardLimit: 1000, GlobalLimit: 5000, DomainHitsLastSecond: 1000, GlobalHitsLastSecond: 70000,
		LimitedByHard: true, LimitedByGlobal: true, Shadow: true, Lenient: true},
}

func TestLibraryWritesTheSameBytes(t *testing.T) {
	w := NewWriter(Msgpack)
	for i := range libraryDecisions {
		d := &libraryDecisions[i]
		want := AppendDecision(w, nil, d)
		var sw sliceWriter
		if err := encodeDecision(msgpack.NewEncoder(&sw), d); err != nil || !bytes.Equal(sw.b, want) {
			t.Errorf("decision %d by the Encoder: %x, %v\nwant %x", i, sw.b, err, want)
		}
		sw.b = nil
		e := msgpack.NewEncoder(&sw)
		e.UseCompactInts(true)
		td := tagged(d)
		if err := e.Encode(&td); err != nil || !bytes.Equal(sw.b, want) {
			t.Errorf("decision %d as a tagged struct: %x, %v\nwant %x", i, sw.b, err, want)
		}
	}
}

// BenchmarkDecisionMsgpack writes the decision reply of a tiers resource
// in MessagePack into a reused buffer: by a Writer (the appenders), by the
// library's Encoder member by member, by the library from a tagged struct.
func BenchmarkDecisionMsgpack(b *testing.B) {
	d := &benchDecision
	b.Run("appenders", func(b *testing.B) {
		w := NewWriter(Msgpack)
		buf := make([]byte, 0, 512)
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendDecision(w, buf[:0], d)
		}
	})
	b.Run("encoder", func(b *testing.B) {
		sw := &sliceWriter{b: make([]byte, 0, 512)}
		e := msgpack.NewEncoder(sw)
		b.ReportAllocs()
		for b.Loop() {
			sw.b = sw.b[:0]
			if err := encodeDecision(e, d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("struct", func(b *testing.B) {
		sw := &sliceWriter{b: make([]byte, 0, 512)}
		e := msgpack.NewEncoder(sw)
		e.UseCompactInts(true) // an int64 field is written in its shortest form, as the reply is
		b.ReportAllocs()
		for b.Loop() {
			sw.b = sw.b[:0]
			td := tagged(d)
			if err := e.Encode(&td); err != nil {
				b.Fatal(err)
			}
		}
	})
}
