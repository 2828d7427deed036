package config

import (
	_ "embed"
	"fmt"
)

//go:embed default.yaml
var defaultYAML []byte

// Default returns the built-in configuration the agent runs on when it is
// given no file: namespace demo (allow_unconfigured off) with one resource of
// each kind, demo/search (tiers), demo/export (gcra), demo/jobs (copies),
// demo/login (adaptive) and demo/upstream (pacer). Its source, default.yaml in this package, is the
// commented example a new user reads first. Each call returns a new,
// validated and normalized Config that the caller may change. It panics if
// the embedded file is invalid, which a test rules out. Safe for concurrent
// use.
func Default() *Config {
	c, err := Parse(defaultYAML)
	if err != nil {
		panic(fmt.Sprintf("config: the embedded default.yaml is invalid: %v", err))
	}
	return c
}

// DefaultYAML returns the source of Default: the commented default.yaml. The
// caller may change the returned slice.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }
