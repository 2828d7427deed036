//go:build !linux

package api

import "syscall"

// childAttr: nothing beyond the defaults where there is no parent-death
// signal; a child ends with its simulation's time limit.
func childAttr() *syscall.SysProcAttr { return nil }
