package runner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/testkit"
)

// A released thread leaves a snapshot of its fold; the next claim starts
// from it and replays only the events after it. A snapshot that does not
// verify is ignored, and the claim replays everything.
func TestRunner_snapshots(t *testing.T) {
	srv := natsembed.RunForTest(t)
	ctx := context.Background()
	s, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := runner.Config{Store: s, ID: "snap", IdleTimeout: 200 * time.Millisecond, SnapshotEvery: 4}
	r := startRunner(t, cfg)
	for i := range 5 {
		post(t, s, "long", fmt.Sprintf("m%d", i))
	}
	testkit.WaitFor(t, 10*time.Second, "the first turns", settled(t, s, "long"))
	testkit.WaitFor(t, 10*time.Second, "an idle release with a snapshot", func() (bool, string) {
		st := r.Stats()
		return st.Held == 0 && st.SnapshotsSaved >= 1, fmt.Sprintf("%+v", st)
	})
	data, err := s.LoadSnapshot(ctx, "long")
	if err != nil || data == nil {
		t.Fatalf("no snapshot stored: %v", err)
	}
	post(t, s, "long", "after the snapshot")
	testkit.WaitFor(t, 10*time.Second, "the turn after the snapshot", settled(t, s, "long"))
	if st := r.Stats(); st.SnapshotsLoaded != 1 || st.SnapshotsBad != 0 {
		t.Fatalf("stats %+v: want the claim to start from the snapshot", st)
	}
	testkit.WaitFor(t, 10*time.Second, "the second release", func() (bool, string) {
		return r.Stats().Held == 0, fmt.Sprintf("%+v", r.Stats())
	})

	// A damaged snapshot is reported and ignored.
	if err := s.SaveSnapshot(ctx, "long", []byte(`{"v":1,"thread":"long","seq":3,"state":{},"sha256":"00"}`)); err != nil {
		t.Fatal(err)
	}
	post(t, s, "long", "after the damage")
	testkit.WaitFor(t, 10*time.Second, "the turn after the damage", settled(t, s, "long"))
	if st := r.Stats(); st.SnapshotsBad != 1 || st.SnapshotsLoaded != 1 {
		t.Fatalf("stats %+v: want the bad snapshot ignored", st)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	v := fold(t, s, "long")
	if len(v.Runs) != 7 || len(v.Pending()) != 0 {
		t.Fatalf("%d runs, %d pending; want 7 and 0", len(v.Runs), len(v.Pending()))
	}
	auditClean(t, s, "long")
}
