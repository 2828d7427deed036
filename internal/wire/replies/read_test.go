package replies

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// TestRoundTrip writes each reply in both formats (the same keys in the
// same order) and reads the JSON back: what was written is what is read.
func TestRoundTrip(t *testing.T) {
	jw, mw := NewWriter(JSON), NewWriter(Msgpack)
	for _, tc := range []struct {
		name  string
		write func(w Writer) []byte
		keys  []string
		read  func(b []byte) (any, error)
		want  any
	}{
		{name: "reservation, granted, in groups",
			write: func(w Writer) []byte {
				return AppendReservation(w, nil, &Reservation{Granted: 2, Hold: "h-é1", DomainLimit: 5, GlobalLimit: 100,
					DomainHolds: 2, GlobalHolds: 3, Groups: []GroupHolds{{Name: "partners", Limit: 20, Holds: 2}, {Name: "open", Limit: NoLimit, Holds: 1}},
					Shadow: true, Lenient: true})
			},
			keys: []string{"granted", "hold", "domain_limit", "global_limit", "domain_holds", "global_holds", "groups", "shadow", "lenient"},
			read: func(b []byte) (any, error) { var r Reservation; err := ReadReservation(b, &r); return r, err },
			want: Reservation{Granted: 2, Hold: "h-é1", DomainLimit: 5, GlobalLimit: 100, DomainHolds: 2, GlobalHolds: 3,
				Groups: []GroupHolds{{Name: "partners", Limit: 20, Holds: 2}, {Name: "open", Limit: NoLimit, Holds: 1}}, Shadow: true, Lenient: true}},
		{name: "reservation, rejected, no limits, no groups",
			write: func(w Writer) []byte {
				return AppendReservation(w, nil, &Reservation{DomainLimit: NoLimit, GlobalLimit: NoLimit, DomainHolds: 4, Groups: []GroupHolds{}})
			},
			keys: []string{"granted", "domain_holds", "global_holds", "groups"},
			read: func(b []byte) (any, error) { var r Reservation; err := ReadReservation(b, &r); return r, err },
			want: Reservation{DomainLimit: NoLimit, GlobalLimit: NoLimit, DomainHolds: 4}},
		{name: "seized",
			write: func(w Writer) []byte {
				return AppendSeized(w, nil, &Seized{Hold: "h-1", Resource: "t/c", Domain: `a"b`, Groups: []string{"g1", "g2"}, Copies: 2})
			},
			keys: []string{"hold", "resource", "domain", "groups", "copies"},
			read: func(b []byte) (any, error) { var r Seized; err := ReadSeized(b, &r); return r, err },
			want: Seized{Hold: "h-1", Resource: "t/c", Domain: `a"b`, Groups: []string{"g1", "g2"}, Copies: 2}},
		{name: "released",
			write: func(w Writer) []byte { return AppendReleased(w, nil, 1, 4) },
			keys:  []string{"released", "held"},
			read: func(b []byte) (any, error) {
				r, h, err := ReadReleased(b)
				return [2]int64{r, h}, err
			},
			want: [2]int64{1, 4}},
		{name: "transfer",
			write: func(w Writer) []byte { return AppendTransfer(w, nil, "x-9") },
			keys:  []string{"transfer"},
			read:  func(b []byte) (any, error) { return ReadTransfer(b) },
			want:  "x-9"},
		{name: "session",
			write: func(w Writer) []byte { return AppendSession(w, nil, "s-1", 60000) },
			keys:  []string{"session", "ttl_ms"},
			read:  func(b []byte) (any, error) { return ReadSession(b) },
			want:  "s-1"},
		{name: "refund",
			write: func(w Writer) []byte { return AppendInt(w, nil, KeyRemaining, 300) },
			keys:  []string{"remaining"},
			read:  func(b []byte) (any, error) { return ReadInt(b, NameRemaining) },
			want:  int64(300)},
		{name: "session ended",
			write: func(w Writer) []byte { return AppendInt(w, nil, KeyReleased, 3) },
			keys:  []string{"released"},
			read: func(b []byte) (any, error) {
				r, h, err := ReadReleased(b)
				return [2]int64{r, h}, err
			},
			want: [2]int64{3, 0}},
		{name: "error",
			write: func(w Writer) []byte { return AppendError(w, nil, "wrong_kind", `"t/c" is a copies resource😀`) },
			keys:  []string{"error"},
			read: func(b []byte) (any, error) {
				code, msg, ok := ReadError(b)
				if !ok {
					return nil, ErrMalformed
				}
				return [2]string{code, msg}, nil
			},
			want: [2]string{"wrong_kind", `"t/c" is a copies resource😀`}},
		{name: "decision",
			write: func(w Writer) []byte { return AppendDecision(w, nil, &benchDecision) },
			keys: []string{"granted", "remaining", "retry_after_ms", "reset_after_ms", "tier", "tier_limit", "tier_hits", "burst",
				"hard_limit", "domain_hits_last_second", "global_hits_last_second", "limited_by_hard", "limited_by_global", "shadow"},
			read: func(b []byte) (any, error) { var d Decision; err := ReadDecision(b, &d); return d, err },
			want: func() Decision { d := benchDecision; d.Tiers = false; return d }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jb, mb := tc.write(jw), tc.write(mw)
			jk, _ := jsonKeys(t, jb)
			mk, _ := mpKeys(t, mb)
			if !reflect.DeepEqual(jk, tc.keys) || !reflect.DeepEqual(mk, tc.keys) {
				t.Fatalf("keys: JSON %v, MessagePack %v, want %v", jk, mk, tc.keys)
			}
			got, err := tc.read(jb)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("read %s:\n got %+v, %v\nwant %+v", jb, got, err, tc.want)
			}
		})
	}
}

func TestReadDecision(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Decision
		bad  bool
	}{
		{name: "gcra", in: `{"granted":1,"remaining":19,"retry_after_ms":0,"reset_after_ms":50,"shadow":false}`,
			want: Decision{Granted: 1, Remaining: 19, ResetAfterMs: 50, HardLimit: NoLimit, GlobalLimit: NoLimit}},
		{name: "never", in: `{"granted":0,"retry_after_ms":-1}`, want: Decision{RetryAfterMs: -1, HardLimit: NoLimit, GlobalLimit: NoLimit}},
		{name: "unknown fields skipped, the last duplicate counts", in: ` { "future": {"a": [1, 2.5e3, "x\"y", null, true]}, "granted" : 2 , "granted":3, "z":-0.5 } `,
			want: Decision{Granted: 3, HardLimit: NoLimit, GlobalLimit: NoLimit}},
		{name: "not a decision", in: `{"remaining":1}`, bad: true},
		{name: "a fraction", in: `{"granted":1.5}`, bad: true},
		{name: "trailing data", in: `{"granted":1} x`, bad: true},
		{name: "truncated", in: `{"granted":1,`, bad: true},
		{name: "empty", in: ``, bad: true},
		{name: "array", in: `[1]`, bad: true},
		{name: "bool as int", in: `{"granted":true}`, bad: true},
		{name: "int as bool", in: `{"granted":1,"shadow":1}`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d Decision
			err := ReadDecision([]byte(tc.in), &d)
			if (err != nil) != tc.bad || (err != nil && !errors.Is(err, ErrMalformed)) {
				t.Fatalf("ReadDecision(%s) = %v, want bad %v", tc.in, err, tc.bad)
			}
			if !tc.bad && d != tc.want {
				t.Fatalf("ReadDecision(%s) =\n %+v\nwant\n %+v", tc.in, d, tc.want)
			}
		})
	}
}

func TestReadRefusals(t *testing.T) {
	var r Reservation
	var s Seized
	for name, err := range map[string]error{
		"a grant without a hold":        ReadReservation([]byte(`{"granted":2,"groups":[]}`), &r),
		"a reservation sans grant":      ReadReservation([]byte(`{"hold":"h"}`), &r),
		"a group that is no object":     ReadReservation([]byte(`{"granted":0,"groups":[1]}`), &r),
		"a seize without a hold":        ReadSeized([]byte(`{"resource":"r","copies":1}`), &s),
		"groups of numbers":             ReadSeized([]byte(`{"hold":"h","groups":[1]}`), &s),
		"a release without released":    func() error { _, _, err := ReadReleased([]byte(`{"held":1}`)); return err }(),
		"an empty transfer id":          func() error { _, err := ReadTransfer([]byte(`{"transfer":""}`)); return err }(),
		"a session id that is a number": func() error { _, err := ReadSession([]byte(`{"session":1}`)); return err }(),
		"no such integer":               func() error { _, err := ReadInt([]byte(`{"wait":1}`), NameWaitMs); return err }(),
	} {
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, _, ok := ReadError([]byte(`{"error":{"message":"no code"}}`)); ok {
		t.Error("an error without a code was read")
	}
	if v, err := ReadInt([]byte(`{"wait_ms":250,"mode":"x"}`), NameWaitMs); err != nil || v != 250 {
		t.Errorf("ReadInt = %d, %v", v, err)
	}
}

func TestReadBatch(t *testing.T) {
	type item struct {
		isErr     bool
		code, msg string
		granted   int64
	}
	read := func(in string, n int) ([]item, error) {
		var got []item
		var d Decision
		err := ReadBatch([]byte(in), n, &d, func(i int, isErr bool, code, msg string) {
			if i != len(got) {
				t.Fatalf("item %d after %d", i, len(got))
			}
			got = append(got, item{isErr, code, msg, d.Granted})
		})
		return got, err
	}
	got, err := read(`{"responses":[{"error":{"code":"unknown_resource","message":"m"}},{"granted":1}],"x":1}`, 2)
	if want := []item{{true, "unknown_resource", "m", 0}, {false, "", "", 1}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	for name, in := range map[string]string{
		"too few":            `{"responses":[{"granted":1}]}`,
		"too many":           `{"responses":[{"granted":1},{"granted":1},{"granted":1}]}`,
		"no responses":       `{}`,
		"an item not object": `{"responses":[1,{"granted":1}]}`,
		"a bad error item":   `{"responses":[{"error":{"message":"m"}},{"granted":1}]}`,
		"a bad decision":     `{"responses":[{"granted":"1"},{"granted":1}]}`,
	} {
		if _, err := read(in, 2); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"granted":1,"remaining":19,"retry_after_ms":0,"reset_after_ms":50,"shadow":false}`,
		`{"error":{"code":"wrong_kind","message":"m"}}`,
		`{"granted":2,"hold":"h","groups":[{"name":"g","limit":1,"holds":1}]}`,
		`{"hold":"h","resource":"r","domain":"d","groups":["g"],"copies":1}`,
		`{"responses":[{"granted":1},{"error":{"code":"x","message":"y"}}]}`,
		`{"released":1,"held":0}`, `{"session":"s","ttl_ms":1}`, `[`, `{"a":`, `"\ud800"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Decision
		if ReadDecision(b, &d) == nil {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("accepted %q, which encoding/json refuses: %v", b, err)
			}
			if g, ok := m["granted"].(float64); !ok || int64(g) != d.Granted {
				t.Fatalf("granted = %d, encoding/json reads %v", d.Granted, m["granted"])
			}
		}
		var r Reservation
		if ReadReservation(b, &r) == nil && r.Granted > 0 && r.Hold == "" {
			t.Fatalf("%q: a grant without a hold", b)
		}
		var s Seized
		_ = ReadSeized(b, &s)
		_, _, _ = ReadError(b)
		_, _, _ = ReadReleased(b)
		_, _ = ReadTransfer(b)
		_, _ = ReadSession(b)
		_, _ = ReadInt(b, NameRemaining)
		_ = ReadBatch(b, 2, &d, func(int, bool, string, string) {})
	})
}

func BenchmarkReadDecision(b *testing.B) {
	body := AppendDecision(NewWriter(JSON), nil, &benchDecision)
	var d Decision
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := ReadDecision(body, &d); err != nil {
			b.Fatal(err)
		}
	}
}
