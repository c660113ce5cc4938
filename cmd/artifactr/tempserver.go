package main

import (
	"context"
	"log/slog"

	"github.com/artifactr/artifactr/internal/bench"
)

// startTempServer starts an embedded server on a random loopback port in a
// new temporary directory, for bench. Its own log shows errors only: the
// callers say themselves whether writes are fsynced. Close removes
// everything.
func (a *app) startTempServer(ctx context.Context, prefix string, noSync bool, storeLog *slog.Logger) (*bench.Temp, error) {
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	return bench.StartTemp(ctx, prefix, noSync, quiet, storeLog)
}
