package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/veloq/veloq/reactor"
)

// httpConfig carries the flags HTTP mode uses.
type httpConfig struct {
	addr, network string
	loops         int
	backend       reactor.Backend
	pin           bool
	logger        *slog.Logger
}

// runHTTP serves HTTP mode. It is being written on top of package http.
func runHTTP(ctx context.Context, cfg httpConfig) error {
	return errors.New("-mode http is not available in this build yet")
}
