package replies

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// jsonKeys returns the keys of the JSON object b, in order, with its values.
func jsonKeys(t *testing.T, b []byte) ([]string, map[string]any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object (%v)", b, err)
	}
	var keys []string
	vals := map[string]any{}
	for d.More() {
		k, _ := d.Token()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		keys = append(keys, k.(string))
		vals[k.(string)] = v
	}
	return keys, vals
}

// mpKeys returns the keys of the MessagePack map b, in order, with its
// values.
func mpKeys(t *testing.T, b []byte) ([]string, map[string]any) {
	t.Helper()
	d := msgpack.NewDecoder(bytes.NewReader(b))
	n, err := d.DecodeMapLen()
	if err != nil {
		t.Fatalf("%x: %v", b, err)
	}
	var keys []string
	vals := map[string]any{}
	for range n {
		k, err := d.DecodeString()
		if err != nil {
			t.Fatal(err)
		}
		v, err := d.DecodeInterface()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		vals[k] = v
	}
	return keys, vals
}

func TestAppendDecision(t *testing.T) {
	all := []string{"granted", "remaining", "retry_after_ms", "reset_after_ms", "tier", "tier_limit", "tier_hits", "burst",
		"hard_limit", "global_limit", "domain_hits_last_second", "global_hits_last_second", "limited_by_hard",
		"limited_by_global", "shadow", "lenient"}
	full := Decision{Granted: 2, Remaining: 3, RetryAfterMs: -1, ResetAfterMs: 1501, Tiers: true, Tier: 2,
		TierLimit: 50, TierHits: 7, Burst: true, HardLimit: 100, GlobalLimit: 1000, DomainHitsLastSecond: 9,
		GlobalHitsLastSecond: 90, LimitedByHard: true, Shadow: true, Lenient: true}
	for _, tc := range []struct {
		name string
		d    Decision
		keys []string
		read Decision // what a reader makes of the reply (absent limits: NoLimit)
	}{
		{name: "tiers, every field", d: full, keys: all, read: full},
		{name: "tiers without limits", d: Decision{Tiers: true, HardLimit: NoLimit, GlobalLimit: NoLimit},
			keys: []string{"granted", "remaining", "retry_after_ms", "reset_after_ms", "tier", "tier_limit", "tier_hits", "burst",
				"domain_hits_last_second", "global_hits_last_second", "limited_by_hard", "limited_by_global", "shadow"},
			read: Decision{Tiers: true, HardLimit: NoLimit, GlobalLimit: NoLimit}},
		{name: "gcra", d: Decision{Granted: 1, Remaining: 19, ResetAfterMs: 50, HardLimit: 7, Tier: 3},
			keys: []string{"granted", "remaining", "retry_after_ms", "reset_after_ms", "shadow"},
			read: Decision{Granted: 1, Remaining: 19, ResetAfterMs: 50, HardLimit: NoLimit, GlobalLimit: NoLimit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jk, jv := jsonKeys(t, AppendDecision(NewWriter(JSON), nil, &tc.d))
			mk, mv := mpKeys(t, AppendDecision(NewWriter(Msgpack), nil, &tc.d))
			if !reflect.DeepEqual(jk, tc.keys) || !reflect.DeepEqual(mk, tc.keys) {
				t.Fatalf("keys: JSON %v, MessagePack %v, want %v", jk, mk, tc.keys)
			}
			back := Decision{Tiers: tc.d.Tiers, HardLimit: NoLimit, GlobalLimit: NoLimit}
			for _, k := range jk {
				i, b := back.Field([]byte(k))
				switch v := jv[k].(type) {
				case float64:
					if i == nil || reflect.ValueOf(mv[k]).Convert(reflect.TypeOf(int64(0))).Int() != int64(v) {
						t.Fatalf("%s: %v in JSON, %v in MessagePack", k, v, mv[k])
					}
					*i = int64(v)
				case bool:
					if b == nil || mv[k] != v {
						t.Fatalf("%s: %v in JSON, %v in MessagePack", k, v, mv[k])
					}
					*b = v
				}
			}
			if back != tc.read {
				t.Fatalf("read back %+v, want %+v", back, tc.read)
			}
		})
	}
	if i, b := new(Decision).Field([]byte("tiers")); i != nil || b != nil {
		t.Fatal("Tiers is a field")
	}
}

func TestWriterValues(t *testing.T) {
	write := func(w Writer) []byte {
		b := w.Object(nil, 4)
		b = w.String(w.First(b, `,"s":`), "a\"\x01\xff\xfeé")
		b = w.Float(w.Key(b, `,"f":`), 2.0/3)
		b = w.Array(w.Key(b, `,"a":`), 3)
		for i, v := range []int64{7, -1, 1 << 40} {
			b = w.Int(w.Next(b, i), v)
		}
		b = w.EndArray(b)
		b = w.StringBytes(w.Key(b, `,"b":`), []byte("x"))
		return w.End(b)
	}
	if got, want := string(write(NewWriter(JSON))), `{"s":"a\"\u0001\ufffd\ufffdé","f":0.666667,"a":[7,-1,1099511627776],"b":"x"}`; got != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(write(NewWriter(Msgpack)), &m); err != nil {
		t.Fatal(err)
	}
	if m["s"] != "a\"\x01\uFFFDé" || m["f"] != 0.666667 || m["b"] != "x" || fmt.Sprint(m["a"]) != "[7 -1 1099511627776]" {
		t.Errorf("MessagePack: %#v", m)
	}
}

func TestRound6(t *testing.T) {
	for _, v := range []float64{0, 1, 2.0 / 3, 1234567, 0.000123456789, -98765.4321, math.MaxFloat64} {
		want, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
		if got := Round6(v); got != want || strconv.FormatFloat(got, 'g', -1, 64) != strconv.FormatFloat(v, 'g', 6, 64) {
			t.Errorf("Round6(%v) = %v, want %v", v, got, want)
		}
	}
}
