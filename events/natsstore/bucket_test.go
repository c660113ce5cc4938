package natsstore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// A key rewritten while a scan runs is still returned: each rewrite
// deletes the key's old revision (history 1), which the scan's consumer
// counts out of its pending at once but counts the new revision in only
// later, so a scan trusting the pending count stopped early and missed the
// key. The writer rewrites every key in turn, as the projector does its
// summaries and then its checkpoint; every key has a value throughout.
func TestBucket_scanReturnsKeysRewrittenDuringIt(t *testing.T) {
	scans := 300
	if v, err := strconv.Atoi(os.Getenv("ARTIFACTR_SCAN_ROUNDS")); err == nil && v > 0 {
		scans = v
	}
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	b, err := s.openBucket(ctxT(t), "rm", true)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"k0", "k1", "k2", "k3", "z"}
	revs := make([]uint64, len(keys))
	for i, k := range keys {
		if revs[i], err = b.Put(ctxT(t), k, []byte("0"), 0); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	writerDone := make(chan error, 1)
	go func() {
		for n := 1; ctx.Err() == nil; n++ {
			for i, k := range keys {
				r, err := b.Put(ctx, k, []byte(strconv.Itoa(n)), revs[i])
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					writerDone <- fmt.Errorf("rewrite %s: %w", k, err)
					return
				}
				revs[i] = r
			}
		}
		writerDone <- nil
	}()
	missed := 0
	for i := range scans {
		got := map[string]bool{}
		if err := b.Scan(ctxT(t), "*", func(e events.KVEntry) error { got[e.Key] = true; return nil }); err != nil {
			cancel()
			t.Fatal(err)
		}
		if len(got) != len(keys) {
			missed++
			t.Errorf("scan %d of %d returned %v, not all of %v", i+1, scans, got, keys)
		}
	}
	cancel()
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d scans during rewrites, %d missed a key", scans, missed)
}
