package natsstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// A durable delivers in order from the first event, keeps its position
// across readers, redelivers a nak'd event, and resets to a sequence.
func TestDurable_fetchAckNakReset(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	for i := range 10 {
		post(t, s, "T", fmt.Sprint(i))
	}
	d, err := s.openDurable(ctxT(t), events.DurableConfig{Name: "rm"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := d.Fetch(ctxT(t), 4, time.Second)
	if err != nil || len(ds) != 4 || ds[0].Env.Seq != 1 || ds[3].Env.Seq != 4 || ds[0].Delivered != 1 {
		t.Fatalf("first fetch: %d deliveries, %v", len(ds), err)
	}
	if err := d.Ack(ctxT(t), ds[2]); err != nil { // acks 1..3
		t.Fatal(err)
	}
	if err := d.nak(ds[3]); err != nil {
		t.Fatal(err)
	}
	// The nak is not confirmed: newer events may come before the
	// redelivery, which comes by the deadline.
	var redelivered *events.Delivery
	var newer []uint64
	for deadline := time.Now().Add(10 * time.Second); redelivered == nil; {
		ds, err = d.Fetch(ctxT(t), 1, time.Second)
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("waiting for the redelivery of 4: %v", err)
		}
		for i := range ds {
			if ds[i].Env.Seq == 4 {
				redelivered = &ds[i]
			} else {
				newer = append(newer, ds[i].Env.Seq)
			}
		}
	}
	if redelivered.Delivered != 2 {
		t.Fatalf("redelivery of 4 counted %d deliveries", redelivered.Delivered)
	}
	info, err := s.DurableState(ctxT(t), "rm")
	if err != nil || info.AckFloor != 3 || info.NumPending != uint64(6-len(newer)) {
		t.Fatalf("info %+v, %v (newer deliveries %v)", info, err, newer)
	}
	// Another reader of the same durable resumes where it is.
	d2, err := s.openDurable(ctxT(t), events.DurableConfig{Name: "rm"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err = d2.Fetch(ctxT(t), 100, time.Second)
	if err != nil || len(ds) != 6-len(newer) || ds[0].Env.Seq != 10-uint64(len(ds))+1 {
		t.Fatalf("second reader: %d deliveries, %v (newer before %v)", len(ds), err, newer)
	}
	if err := d2.Reset(ctxT(t), 2); err != nil {
		t.Fatal(err)
	}
	ds, err = d2.Fetch(ctxT(t), 100, time.Second)
	if err != nil || len(ds) != 9 || ds[0].Env.Seq != 2 || ds[8].Env.Seq != 10 {
		t.Fatalf("after reset to 2: %d deliveries, %v", len(ds), err)
	}
	if err := d2.Ack(ctxT(t), ds[8]); err != nil {
		t.Fatal(err)
	}
	ds, err = d2.Fetch(ctxT(t), 100, 50*time.Millisecond)
	if err != nil || len(ds) != 0 {
		t.Fatalf("idle fetch: %d deliveries, %v", len(ds), err)
	}
	if err := s.DeleteDurable(ctxT(t), "rm"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDurable(ctxT(t), "rm"); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	if _, err := s.DurableState(ctxT(t), "rm"); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("info of a deleted durable: %v", err)
	}
}

// A bucket's writes are compare-and-set on the key's revision; Scan sees
// the last value of each key; Purge leaves keys as never written.
func TestBucket_casScanPurge(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
	s := open(t, srv)
	if _, err := s.openBucket(ctxT(t), "rm", false); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("open of a missing bucket: %v", err)
	}
	if _, err := s.openBucket(ctxT(t), DefaultBucket, true); err == nil {
		t.Fatal("the lease bucket was accepted as a read model")
	}
	b, err := s.openBucket(ctxT(t), "rm", true)
	if err != nil {
		t.Fatal(err)
	}
	e, found, err := b.Get(ctxT(t), "a")
	if err != nil || found || e.Revision != 0 {
		t.Fatalf("missing key: %+v %v %v", e, found, err)
	}
	r1, err := b.Put(ctxT(t), "a", []byte("1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctxT(t), "a", []byte("x"), 0); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("create over an existing key: %v", err)
	}
	revs, errs := b.PutMany(ctxT(t), []events.KVPut{{Key: "a", Value: []byte("2"), Revision: r1}, {Key: "b", Value: []byte("b1")},
		{Key: "_meta.x", Value: []byte("m")}, {Key: "a", Value: []byte("stale"), Revision: r1}, {Key: "bad key"}})
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], events.ErrConflict) || errs[4] == nil {
		t.Fatalf("PutMany: %v", errs)
	}
	e, found, err = b.Get(ctxT(t), "a")
	if err != nil || !found || string(e.Value) != "2" || e.Revision != revs[0] {
		t.Fatalf("a: %+v %v %v", e, found, err)
	}
	keys := map[string]string{}
	if err := b.Scan(ctxT(t), "*", func(e events.KVEntry) error { keys[e.Key] = string(e.Value); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keys) != "map[a:2 b:b1]" {
		t.Fatalf("scan of one-token keys: %v", keys)
	}
	if err := b.Purge(ctxT(t), "*"); err != nil {
		t.Fatal(err)
	}
	if e, found, _ := b.Get(ctxT(t), "a"); found || e.Revision != 0 {
		t.Fatalf("purged key: %+v", e)
	}
	if _, found, _ := b.Get(ctxT(t), "_meta.x"); !found {
		t.Fatal("purge of * removed a two-token key")
	}
	if _, err := b.Put(ctxT(t), "a", []byte("again"), 0); err != nil {
		t.Fatalf("create after purge: %v", err)
	}
	if err := s.DeleteBucket(ctxT(t), "rm"); err != nil {
		t.Fatal(err)
	}
}
