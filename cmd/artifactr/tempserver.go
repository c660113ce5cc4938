package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed"
)

// tempServer is an embedded server in a throw-away directory, with a store
// on it, for demo and bench.
type tempServer struct {
	dir   string
	srv   *natsembed.Server
	store *natsstore.Store
}

// startTempServer starts an embedded server on a random loopback port in a
// new temporary directory. Its own log shows errors only: the callers say
// themselves whether writes are fsynced. Close removes everything.
func (a *app) startTempServer(ctx context.Context, prefix string, noSync bool, storeLog *slog.Logger) (*tempServer, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if storeLog == nil {
		storeLog = quiet
	}
	srv, err := natsembed.Start(natsembed.Config{DataDir: dir, Listen: "127.0.0.1:-1", NoSync: noSync, Logger: quiet})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	store, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL(), Logger: storeLog})
	if err != nil {
		srv.Shutdown()
		os.RemoveAll(dir)
		return nil, err
	}
	return &tempServer{dir: dir, srv: srv, store: store}, nil
}

// client opens another store on the server, for the bench's clients: they
// post and watch over a connection of their own, as they would from other
// processes, rather than through the runner's. The caller closes it.
func (t *tempServer) client(ctx context.Context, logger *slog.Logger) (*natsstore.Store, error) {
	return natsstore.New(ctx, natsstore.Config{URL: t.srv.ClientURL(), Logger: logger})
}

// Close closes the store, stops the server and removes its directory.
func (t *tempServer) Close() {
	t.store.Close()
	t.srv.Shutdown()
	os.RemoveAll(t.dir)
}
