//go:build !linux

package lowprio

import "errors"

// lowerThread does nothing where threads have no priority of their own.
func lowerThread() {}

func threadNice() (int, error) { return 0, errors.ErrUnsupported }

// LowerProcess does nothing where threads have no priority of their own.
func LowerProcess() {}
