package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/memstore"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/audit"
)

// partitionThreads returns two threads in each of n partitions.
func partitionThreads(n int) []string {
	var out []string
	per := make([]int, n)
	for i := 0; len(out) < 2*n; i++ {
		th := fmt.Sprintf("pt%d", i)
		if p := events.Partition(th, n); per[p] < 2 {
			per[p]++
			out = append(out, th)
		}
	}
	return out
}

// A runner on a partitioned store follows every partition's stream and
// answers the posts of threads in each, fenced on their partition's claim
// subjects (the audit checks the fence headers against them).
func TestRunner_partitioned(t *testing.T) {
	const n = 4
	run := func(t *testing.T, s events.Store, work runner.WorkSource) {
		r := startRunner(t, runner.Config{Store: s, ClaimTTL: 2 * time.Second, Work: work})
		threads := partitionThreads(n)
		for i := range 2 {
			for _, th := range threads {
				post(t, s, th, fmt.Sprintf("%s-%d", th, i))
			}
		}
		testkit.WaitFor(t, 20*time.Second, "every message answered in every partition", settled(t, s, threads...))
		if err := r.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		a := audit.NewWithOptions(audit.Options{Subjects: s.Subjects()})
		for _, th := range threads {
			v := fold(t, s, th)
			if len(v.Runs) != 2 || v.Runs[1].Status != projections.RunCompleted {
				t.Fatalf("%s (partition %d): runs %+v", th, events.Partition(th, n), v.Runs)
			}
			envs, err := s.Load(context.Background(), th, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range envs {
				a.Add(e)
			}
		}
		if rep := a.Report(); !rep.OK() || rep.Checks["FenceNewestClaim"] == 0 {
			t.Fatalf("audit: %+v (checks %v)", rep.Violations, rep.Checks)
		}
	}
	t.Run("memstore", func(t *testing.T) {
		run(t, memstore.New(memstore.Config{Subjects: events.Subjects{Partitions: n}}), nil)
	})
	t.Run("natsstore", func(t *testing.T) {
		srv := natsembedtest.RunForTest(t)
		s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL(), Partitions: n})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		q, err := s.WorkQueue(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		run(t, s, q)
	})
}

// gatedFollow is a partitioned memstore whose first read of one
// partition's last sequence, which a follow of it starts with, waits for
// gate: the follow is slow to open.
type gatedFollow struct {
	*memstore.Store
	p    int
	gate chan struct{}
}

func (g *gatedFollow) LastPartitionSeq(ctx context.Context, p int) (uint64, error) {
	if p == g.p {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return g.Store.LastPartitionSeq(ctx, p)
}

// A runner that owns a partition claims its threads only once the
// partition's follow is open: a claim made before would miss the events
// between its history and the start of the follow, its own run_started
// among them, and wait for it forever.
func TestRunner_partitionClaimsWaitForFollow(t *testing.T) {
	const n = 2
	s := &gatedFollow{Store: memstore.New(memstore.Config{Subjects: events.Subjects{Partitions: n}}), p: 1, gate: make(chan struct{})}
	th := partitionThreads(n)[2] // in partition 1
	if events.Partition(th, n) != s.p {
		t.Fatalf("%s is in partition %d", th, events.Partition(th, n))
	}
	post(t, s, th, "early")
	r := startRunner(t, runner.Config{Store: s, ClaimTTL: 2 * time.Second, ShutdownGrace: time.Second})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Stop(ctx)
	}()
	testkit.WaitFor(t, 10*time.Second, "the runner to own both partitions", func() (bool, string) {
		owned, _ := r.Partitions()
		return len(owned) == n, fmt.Sprint(owned)
	})
	r.Wake(th)
	// Either the runner leaves the thread alone while the follow is not
	// open, or it claims it and starts the run before the follow opens.
	testkit.WaitFor(t, 10*time.Second, "the wake-up taken up or left", func() (bool, string) {
		d := r.Describe(t.Context(), []string{th})[th]
		if !strings.Contains(d, "queued(") && !strings.Contains(d, "claiming(") && !strings.Contains(d, "held(") {
			return true, ""
		}
		return len(fold(t, s, th).Runs) > 0, d
	})
	close(s.gate)
	testkit.WaitFor(t, 20*time.Second, "the post answered", settled(t, s, th))
}
