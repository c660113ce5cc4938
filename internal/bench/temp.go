package bench

import (
	"context"
	"log/slog"
	"os"

	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed"
)

// Temp is an embedded server in a throw-away directory, with a store on
// it, for the benchmarks.
type Temp struct {
	Dir   string
	Srv   *natsembed.Server
	Store *natsstore.Store
}

// StartTemp starts an embedded server on a random loopback port in a new
// temporary directory whose name starts with prefix. natsLog is the
// server's log, storeLog the store's (nil: natsLog; both nil: discard):
// the callers say themselves whether writes are fsynced. Close removes
// everything.
func StartTemp(ctx context.Context, prefix string, noSync bool, natsLog, storeLog *slog.Logger) (*Temp, error) {
	return StartTempPartitions(ctx, prefix, noSync, 1, natsLog, storeLog)
}

// StartTempPartitions is [StartTemp] with a store of partitions streams.
func StartTempPartitions(ctx context.Context, prefix string, noSync bool, partitions int, natsLog, storeLog *slog.Logger) (*Temp, error) {
	return startTemp(ctx, prefix, noSync, partitions, natsstore.GuardAuto, "", natsLog, storeLog)
}

// startTemp is [StartTempPartitions] with the store's guard mode and fence
// layout.
func startTemp(ctx context.Context, prefix string, noSync bool, partitions int, guard natsstore.GuardMode, fence natsstore.FenceLayout, natsLog, storeLog *slog.Logger) (*Temp, error) {
	if natsLog == nil {
		natsLog = slog.New(slog.DiscardHandler)
	}
	if storeLog == nil {
		storeLog = natsLog
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	srv, err := natsembed.Start(natsembed.Config{DataDir: dir, Listen: "127.0.0.1:-1", NoSync: noSync, Logger: natsLog})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	store, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL(), Logger: storeLog, Partitions: partitions, Guard: guard, Fence: fence})
	if err != nil {
		srv.Shutdown()
		os.RemoveAll(dir)
		return nil, err
	}
	return &Temp{Dir: dir, Srv: srv, Store: store}, nil
}

// Client opens another store on the server, for a benchmark's clients:
// they post and watch over a connection of their own, as they would from
// other processes, rather than through the runner's. The caller closes it.
func (t *Temp) Client(ctx context.Context, logger *slog.Logger) (*natsstore.Store, error) {
	return natsstore.New(ctx, natsstore.Config{URL: t.Srv.ClientURL(), Logger: logger, Partitions: t.Store.Subjects().PartitionCount()})
}

// Close closes the store, stops the server and removes its directory.
func (t *Temp) Close() {
	t.Store.Close()
	t.Srv.Shutdown()
	os.RemoveAll(t.Dir)
}
