package eventstest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/artifactr/artifactr/events"
)

func openBucket(t *testing.T, s events.ReadModelStore, name string) events.KVBucket {
	t.Helper()
	b, err := s.OpenBucket(ctxT(t), name, true)
	if err != nil {
		t.Fatalf("open bucket %s: %v", name, err)
	}
	return b
}

func put(t *testing.T, b events.KVBucket, key, value string, rev uint64) uint64 {
	t.Helper()
	r, err := b.Put(ctxT(t), key, []byte(value), rev)
	if err != nil {
		t.Fatalf("put %s at %d: %v", key, rev, err)
	}
	return r
}

func get(t *testing.T, b events.KVBucket, key string) (events.KVEntry, bool) {
	t.Helper()
	e, found, err := b.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if e.Key != key {
		t.Fatalf("get %s: entry of %q", key, e.Key)
	}
	return e, found
}

// scan returns key=value of every key on filter, sorted.
func scan(t *testing.T, b events.KVBucket, filter string) []string {
	t.Helper()
	var out []string
	if err := b.Scan(ctxT(t), filter, func(e events.KVEntry) error {
		out = append(out, e.Key+"="+string(e.Value))
		return nil
	}); err != nil {
		t.Fatalf("scan %s: %v", filter, err)
	}
	slices.Sort(out)
	return out
}

// A missing bucket is ErrNotFound unless created; once created, every open
// sees the same keys.
func testBucketOpen(t *testing.T, env ReadModelEnv) {
	s := env.Store
	_, err := s.OpenBucket(ctxT(t), "rm", false)
	wantErr(t, err, events.ErrNotFound, "open of a missing bucket")
	b := openBucket(t, s, "rm")
	put(t, b, "k", "v", 0)
	b2, err := s.OpenBucket(ctxT(t), "rm", false)
	if err != nil {
		t.Fatalf("open of an existing bucket: %v", err)
	}
	if e, found := get(t, b2, "k"); !found || string(e.Value) != "v" {
		t.Fatalf("k through another open: %+v %v", e, found)
	}
	if _, found := get(t, openBucket(t, s, "other"), "k"); found {
		t.Fatal("a key of bucket rm is in bucket other")
	}
	if _, err := s.OpenBucket(ctxT(t), "bad name", true); err == nil {
		t.Fatal("a bucket named \"bad name\" was opened")
	}
}

// A Put lands only at the key's last revision (0 for a key never written),
// and returns a newer one; a refused Put is ErrConflict and writes nothing.
func testBucketCompareAndSet(t *testing.T, env ReadModelEnv) {
	b := openBucket(t, env.Store, "rm")
	if e, found := get(t, b, "a"); found || e.Revision != 0 || e.Value != nil {
		t.Fatalf("missing key: %+v %v", e, found)
	}
	r1 := put(t, b, "a", "1", 0)
	if r1 == 0 {
		t.Fatal("a write returned revision 0")
	}
	_, err := b.Put(ctxT(t), "a", []byte("x"), 0)
	wantErr(t, err, events.ErrConflict, "create over an existing key")
	r2 := put(t, b, "a", "2", r1)
	if r2 <= r1 {
		t.Fatalf("revision %d after %d", r2, r1)
	}
	_, err = b.Put(ctxT(t), "a", []byte("stale"), r1)
	wantErr(t, err, events.ErrConflict, "put at a stale revision")
	_, err = b.Put(ctxT(t), "a", []byte("future"), r2+100)
	wantErr(t, err, events.ErrConflict, "put at a revision to come")
	if e, found := get(t, b, "a"); !found || string(e.Value) != "2" || e.Revision != r2 {
		t.Fatalf("a after refused puts: %+v %v; want 2 at %d", e, found, r2)
	}
	// A revision is the key's, not the bucket's: another key's writes do
	// not refuse it.
	put(t, b, "b", "b", 0)
	put(t, b, "a", "3", r2)
	if _, err := b.Put(ctxT(t), "bad key", nil, 0); err == nil || errors.Is(err, events.ErrConflict) {
		t.Fatalf("put of an invalid key: %v", err)
	}
}

// PutMany makes each put with its own compare-and-set, in order, and
// returns each one's revision or error.
func testBucketPutMany(t *testing.T, env ReadModelEnv) {
	b := openBucket(t, env.Store, "rm")
	r1 := put(t, b, "a", "1", 0)
	revs, errs := b.PutMany(ctxT(t), []events.KVPut{
		{Key: "a", Value: []byte("2"), Revision: r1},
		{Key: "b", Value: []byte("b1")},
		{Key: "_meta.x", Value: []byte("m")},
		{Key: "a", Value: []byte("stale"), Revision: r1},
		{Key: "bad key"},
	})
	if len(revs) != 5 || len(errs) != 5 {
		t.Fatalf("PutMany of 5: %d revisions, %d errors", len(revs), len(errs))
	}
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], events.ErrConflict) || errs[4] == nil || errors.Is(errs[4], events.ErrConflict) {
		t.Fatalf("PutMany: %v", errs)
	}
	for i, key := range []string{"a", "b", "_meta.x"} {
		if e, found := get(t, b, key); !found || e.Revision != revs[i] {
			t.Fatalf("%s: %+v %v; want revision %d", key, e, found, revs[i])
		}
	}
	if e, _ := get(t, b, "a"); string(e.Value) != "2" {
		t.Fatalf("a after PutMany: %q", e.Value)
	}
}

// GetMany returns the keys' entries in order, and whether each has a value.
func testBucketGetMany(t *testing.T, env ReadModelEnv) {
	b := openBucket(t, env.Store, "rm")
	ra := put(t, b, "a", "A", 0)
	rc := put(t, b, "c", "C", 0)
	es, found, err := b.GetMany(ctxT(t), []string{"c", "b", "a"})
	if err != nil || len(es) != 3 || len(found) != 3 {
		t.Fatalf("GetMany: %d entries, %d found flags, %v", len(es), len(found), err)
	}
	got := fmt.Sprintf("%s=%s@%d %v %s@%d %v %s=%s@%d %v", es[0].Key, es[0].Value, es[0].Revision, found[0],
		es[1].Key, es[1].Revision, found[1], es[2].Key, es[2].Value, es[2].Revision, found[2])
	want := fmt.Sprintf("c=C@%d true b@0 false a=A@%d true", rc, ra)
	if got != want {
		t.Fatalf("GetMany: %s, want %s", got, want)
	}
}

// Scan returns the last value of every key on its filter: "*" the keys of
// one token, ">" every key.
func testBucketScan(t *testing.T, env ReadModelEnv) {
	b := openBucket(t, env.Store, "rm")
	if got := scan(t, b, ">"); len(got) != 0 {
		t.Fatalf("scan of an empty bucket: %v", got)
	}
	ra := put(t, b, "a", "1", 0)
	put(t, b, "a", "2", ra)
	put(t, b, "b", "b", 0)
	put(t, b, "_meta.x", "m", 0)
	put(t, b, "t.T1", "t1", 0)
	if got := fmt.Sprint(scan(t, b, "*")); got != "[a=2 b=b]" {
		t.Fatalf("scan of *: %s", got)
	}
	if got := fmt.Sprint(scan(t, b, ">")); got != "[_meta.x=m a=2 b=b t.T1=t1]" {
		t.Fatalf("scan of >: %s", got)
	}
	if got := fmt.Sprint(scan(t, b, "t.*")); got != "[t.T1=t1]" {
		t.Fatalf("scan of t.*: %s", got)
	}
	stop := errors.New("stop")
	if err := b.Scan(ctxT(t), ">", func(events.KVEntry) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("scan whose callback fails: %v", err)
	}
}

// Purge removes the keys on its filter and leaves them as never written:
// the next Put expects revision 0.
func testBucketPurge(t *testing.T, env ReadModelEnv) {
	b := openBucket(t, env.Store, "rm")
	put(t, b, "a", "1", 0)
	put(t, b, "b", "1", 0)
	put(t, b, "_meta.x", "m", 0)
	if err := b.Purge(ctxT(t), "*"); err != nil {
		t.Fatal(err)
	}
	if e, found := get(t, b, "a"); found || e.Revision != 0 {
		t.Fatalf("purged key: %+v %v", e, found)
	}
	if _, found := get(t, b, "_meta.x"); !found {
		t.Fatal("purge of * removed a two-token key")
	}
	if got := fmt.Sprint(scan(t, b, ">")); got != "[_meta.x=m]" {
		t.Fatalf("scan after the purge: %s", got)
	}
	put(t, b, "a", "again", 0)
}
