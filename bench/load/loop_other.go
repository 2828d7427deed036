//go:build !linux

package main

import (
	"context"
	"errors"
	"time"
)

// The load's event loop uses epoll: Linux only, as is reading /proc.

type evloop struct{}

func newEventLoop(*worker, loadSpec, [][]byte, []int, time.Time, time.Time, time.Time) (*evloop, error) {
	return nil, errors.New("the load generator runs on Linux only")
}

func (*evloop) run(context.Context) {}
func (*evloop) closeAll()           {}
