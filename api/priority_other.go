//go:build !linux

package api

// lowPriorityThread does nothing where threads have no priority of their
// own to lower.
func lowPriorityThread() {}
