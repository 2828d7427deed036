package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseTiers(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name string
		in   string
		want []Tier
	}{
		{name: "simulator preset", in: "5,1,1,0,50,5,5,15", want: []Tier{
			{Limit: 5, Window: s, Active: s},
			{Limit: 50, Window: 5 * s, Active: 5 * s, Cooldown: 15 * s},
		}},
		{name: "one tier", in: "50,15,15,30", want: []Tier{{Limit: 50, Window: 15 * s, Active: 15 * s, Cooldown: 30 * s}}},
		{name: "decimals are exact", in: "1,0.5,0.1,0.001", want: []Tier{{Limit: 1, Window: 500 * time.Millisecond, Active: 100 * time.Millisecond, Cooldown: time.Millisecond}}},
		{name: "spaces and signs", in: " +3 , 2. , .5 ,0 ", want: []Tier{{Limit: 3, Window: 2 * s, Active: 500 * time.Millisecond}}},
		{name: "whole-number limit with a fraction of zeros", in: "7.00,1,1,0", want: []Tier{{Limit: 7, Window: s, Active: s}}},
		{name: "not normalized: window > active kept", in: "1,10,3,0", want: []Tier{{Limit: 1, Window: 10 * s, Active: 3 * s}}},
		{name: "active 0 kept (normalization removes it)", in: "1,1,0,0", want: []Tier{{Limit: 1, Window: s}}},
		{name: "empty", in: "", want: nil},
		{name: "blank", in: "   ", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTiers(tt.in)
			if err != nil {
				t.Fatalf("ParseTiers(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseTiers(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseTiersInvalid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // every problem, "path: fragment"
	}{
		{name: "three numbers", in: "5,1,1", want: []string{"tiers: the compact form is groups of 4 numbers"}},
		{name: "trailing comma", in: "5,1,1,0,", want: []string{"tiers: the compact form is groups of 4 numbers (limit, window s, active s, cooldown s), got 5"}},
		{name: "a word", in: "a,1,1,0", want: []string{`tiers[0].limit: must be a number, got "a"`}},
		{name: "a unit", in: "1,1s,1,0", want: []string{`tiers[0].window: must be a number, got "1s"`}},
		{name: "no number between commas", in: "1,,1,0", want: []string{"tiers[0].window: missing number"}},
		{name: "limit 0", in: "0,1,1,0", want: []string{"tiers[0].limit: must be ≥ 1, got 0"}},
		{name: "negative limit", in: "-5,1,1,0", want: []string{"tiers[0].limit: must be ≥ 1, got -5"}},
		{name: "negative window", in: "5,-1,1,0", want: []string{"tiers[0].window: must be > 0, got -1s"}},
		{name: "negative active and cooldown", in: "5,1,-1,-0.5", want: []string{
			"tiers[0].active: must be ≥ 0, got -1s",
			"tiers[0].cooldown: must be ≥ 0, got -500ms",
		}},
		{name: "zero window", in: "5,0,1,0", want: []string{"tiers[0].window: must be > 0, got 0s"}},
		{name: "fractional limit", in: "5.5,1,1,0", want: []string{"tiers[0].limit: must be a whole number, got 5.5"}},
		{name: "limit too large", in: "99999999999999999999,1,1,0", want: []string{"tiers[0].limit: must be ≤ 1000000000"}},
		{name: "duration too large", in: "1,1,1,9999999999999", want: []string{"tiers[0].cooldown: must be ≤ 876000h0m0s (100 years)"}},
		{name: "exponent", in: "1,1e3,1,0", want: []string{`tiers[0].window: must be a number, got "1e3"`}},
		// Counted before anything is parsed, and a long list is quoted
		// short.
		{name: "100,000 tiers", in: strings.Repeat("1,1,1,0,", 99_999) + "1,1,1,0", want: []string{"tiers: at most 64 tiers, got 100000"}},
		{name: "a long list not in groups of 4", in: strings.Repeat("1,", 400) + "1", want: []string{
			`tiers: the compact form is groups of 4 numbers (limit, window s, active s, cooldown s), got 401 number(s) in "1,1,1,1,1,1,1,1,"… (801 bytes)`}},
		{name: "every problem listed", in: "0,1,1,0,5,x,1,0,2,1,1,-1", want: []string{
			"tiers[0].limit: must be ≥ 1",
			`tiers[1].window: must be a number, got "x"`,
			"tiers[2].cooldown: must be ≥ 0, got -1s",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := ParseTiers(tt.in)
			if err == nil {
				t.Fatalf("ParseTiers(%q) = %+v, want an error", tt.in, ts)
			}
			ps := problemsOf(t, err)
			if len(ps) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tt.want), err)
			}
			for i, p := range ps {
				if !strings.HasPrefix(p.String(), tt.want[i]) {
					t.Errorf("problem %d = %q, want prefix %q", i, p.String(), tt.want[i])
				}
			}
		})
	}
}
