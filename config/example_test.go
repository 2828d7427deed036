package config_test

import (
	"errors"
	"fmt"

	"github.com/obol-dev/obol/config"
)

func ExampleParse() {
	cfg, err := config.Parse([]byte(`
resources:
  api/search:
    kind: tiers
    hard_limit: 100
    tiers: "5,1,1,0,50,5,5,15"
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := cfg.Resources["api/search"]
	fmt.Println(r.Kind, *r.HardLimit, *r.Drift)
	for _, t := range r.Tiers {
		fmt.Printf("%d per %v, active %v, cooldown %v\n", t.Limit, t.Window, t.Active, t.Cooldown)
	}
	// Output:
	// tiers 100 0.05
	// 5 per 1s, active 1s, cooldown 0s
	// 50 per 5s, active 5s, cooldown 15s
}

func ExampleParse_problems() {
	_, err := config.Parse([]byte(`
resources:
  api/search:
    kind: tiers
    tiers: "5,1,1,0,0,5,5,15"
    brust: 10
  api/export:
    kind: gcra
    burst: 20
    count: 20
    period: 1
`))
	var ps *config.Problems
	if errors.As(err, &ps) {
		for _, p := range *ps {
			fmt.Printf("line %d: %s\n", p.Line, p)
		}
	}
	// Output:
	// line 11: resources["api/export"].period: must be a duration string such as "1s" or "250ms", not a bare number (for seconds write "1s")
	// line 6: resources["api/search"].brust: unknown key (did you mean "burst"?)
	// line 5: resources["api/search"].tiers[1].limit: must be ≥ 1, got 0
}

func ExampleParseTiers() {
	tiers, err := config.ParseTiers("5,1,1,0,50,5,5,15")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tiers {
		fmt.Printf("%+v\n", t)
	}
	_, err = config.ParseTiers("5,1,1,0,0,0.5,1")
	fmt.Println(err)
	_, err = config.ParseTiers("0,1,1,0")
	fmt.Println(err)
	// Output:
	// {Limit:5 Window:1s Active:1s Cooldown:0s Skippable:false}
	// {Limit:50 Window:5s Active:5s Cooldown:15s Skippable:false}
	// tiers: the compact form is groups of 4 numbers (limit, window s, active s, cooldown s), got 7 number(s) in "5,1,1,0,0,0.5,1"
	// tiers[0].limit: must be ≥ 1, got 0
}
