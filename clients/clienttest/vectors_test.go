package clienttest

import (
	"os"
	"path/filepath"
)

// vectorsEnv is the environment entry that hands the clients' suites the
// agent contract's conformance vectors (POST /v1/simulate cases) when
// they are present, as the Go tests find them (local's conformance test):
// a folder beside the repository's root. Without them it is empty, and
// each suite skips its conformance test, saying so.
func vectorsEnv() []string {
	p, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "conformance", "vectors.json"))
	if err != nil {
		return nil
	}
	if _, err := os.Stat(p); err != nil {
		return nil
	}
	return []string{"OBOL_CONFORMANCE_VECTORS=" + p}
}
