package runner_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// A released thread leaves a snapshot of its fold; the next claim starts
// from it and replays only the events after it. A snapshot that does not
// verify is ignored, and the claim replays everything.
func TestRunner_snapshots(t *testing.T) {
	srv := natsembedtest.RunForTest(t)
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

// failingSnapshots is a store whose snapshots cannot be saved.
type failingSnapshots struct{ *natsstore.Store }

func (failingSnapshots) SaveSnapshot(context.Context, string, []byte) error {
	return errors.New("snapshot bucket unreachable (injected)")
}

// Every released thread leaves a snapshot, however few its events; one
// the store cannot save is counted (a WARN and a metric), not lost
// silently.
func TestRunner_snapshots_everyReleaseAndFailures(t *testing.T) {
	ctx := context.Background()
	for _, failing := range []bool{false, true} {
		t.Run(fmt.Sprintf("failing=%v", failing), func(t *testing.T) {
			srv := natsembedtest.RunForTest(t)
			s, err := natsstore.New(ctx, natsstore.Config{URL: srv.ClientURL()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var store events.Store = s
			if failing {
				store = failingSnapshots{s}
			}
			r := startRunner(t, runner.Config{Store: store, ID: fmt.Sprintf("snap-%v", failing), IdleTimeout: 200 * time.Millisecond, SnapshotEvery: 1000})
			th := fmt.Sprintf("few-%v", failing)
			for i := range 3 {
				post(t, s, th, fmt.Sprintf("m%d", i))
			}
			testkit.WaitFor(t, 10*time.Second, "the turns", settled(t, s, th))
			testkit.WaitFor(t, 10*time.Second, "an idle release", func() (bool, string) {
				st := r.Stats()
				return st.Held == 0 && st.SnapshotsSaved >= 1 && (st.SnapshotsFailed >= 1) == failing, fmt.Sprintf("%+v", st)
			})
			if err := r.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			data, err := s.LoadSnapshot(ctx, th)
			if err != nil || (data == nil) != failing {
				t.Fatalf("snapshot stored %v, err %v; failing %v", data != nil, err, failing)
			}
		})
	}
}
