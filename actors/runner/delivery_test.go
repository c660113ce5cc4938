package runner_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/internal/testkit"
)

// deliveries are the server's counters at one moment.
type deliveries struct {
	outMsgs   int64             // Varz out_msgs: every message sent to a client
	consumers map[string]uint64 // per consumer of the partition streams: messages delivered
	work      map[string]bool   // which of them are the work queue's
	stored    uint64            // events stored, over every partition
	caughtUp  int               // follows that delivered their stream's last event
}

// readDeliveries reads the server's own counters: Varz, and the info of
// every consumer of the partition streams (the runners' follows are
// ordered consumers there, the work queue a durable one per stream).
func readDeliveries(t *testing.T, ns *server.Server, s *natsstore.Store) deliveries {
	t.Helper()
	v, err := ns.Varz(&server.VarzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := deliveries{outMsgs: v.OutMsgs, consumers: map[string]uint64{}, work: map[string]bool{}}
	js, err := jetstream.New(s.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, name := range s.StreamNames() {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d.stored += info.State.LastSeq
		cl := st.ListConsumers(ctx)
		for ci := range cl.Info() {
			key := name + "/" + ci.Name
			d.consumers[key] = ci.Delivered.Consumer
			if ci.Config.Durable != "" {
				d.work[key] = true
			} else if ci.Delivered.Stream >= info.State.LastSeq {
				d.caughtUp++ // a follow stopped on a move lingers, behind
			}
		}
		if err := cl.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// DeliveryFigures is what TestRunner_deliveriesPerEvent measures for one
// layout and runner count, per event stored.
type DeliveryFigures struct {
	Partitions int     `json:"partitions"`
	Runners    int     `json:"runners"`
	Events     uint64  `json:"events"`
	Follow     float64 `json:"follow_deliveries_per_event"` // to the runners' follows
	Work       float64 `json:"work_deliveries_per_event"`   // to the work queue (posts only)
	// Deliveries is every consumer delivery of the partition streams:
	// follows plus work queue, what the runners read.
	Deliveries float64 `json:"deliveries_per_event"`
	// OutMsgs is the server's out_msgs: it also counts publish acks, API
	// replies, direct gets and the lease watch, which are no delivery.
	OutMsgs float64 `json:"out_msgs_per_event"`
}

// measureDeliveries floods threads×msgs posts at R runners on a store of
// P partitions and returns the server's deliveries per event stored.
func measureDeliveries(t *testing.T, parts, runners, threads, msgs int) DeliveryFigures {
	srv := natsembedtest.RunForTest(t)
	s, err := natsstore.New(t.Context(), natsstore.Config{URL: srv.ClientURL(), Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rs []*runner.Runner
	for i := range runners {
		q, err := s.WorkQueue(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		r := startRunner(t, runner.Config{Store: s, ID: fmt.Sprintf("r%d", i), ClaimTTL: 2 * time.Second, Work: q})
		defer r.Kill()
		rs = append(rs, r)
	}
	if parts > 1 {
		testkit.WaitFor(t, 30*time.Second, "ownership settled", ownershipSettled(parts, rs...))
	} else {
		waitPeers(t, rs...)
	}
	before := readDeliveries(t, srv.NATS(), s)
	var ths []string
	for i := range threads {
		ths = append(ths, fmt.Sprintf("d%d", i))
	}
	for m := range msgs {
		for _, th := range ths {
			post(t, s, th, fmt.Sprintf("%s-%d", th, m))
		}
	}
	testkit.WaitFor(t, 60*time.Second, "every message answered", settled(t, s, ths...))
	var after deliveries
	follows := parts // one follow per partition, its owner's
	if parts == 1 {
		follows = runners // every runner follows the one stream
	}
	testkit.WaitFor(t, 10*time.Second, "every follow caught up", func() (bool, string) {
		after = readDeliveries(t, srv.NATS(), s)
		return after.caughtUp >= follows, fmt.Sprintf("%d of %d follows caught up", after.caughtUp, follows)
	})
	f := DeliveryFigures{Partitions: parts, Runners: runners, Events: after.stored - before.stored}
	var follow, work uint64
	for k, n := range after.consumers {
		if after.work[k] {
			work += n - before.consumers[k]
		} else {
			follow += n - before.consumers[k]
		}
	}
	ev := float64(f.Events)
	f.Follow, f.Work = float64(follow)/ev, float64(work)/ev
	f.Deliveries = f.Follow + f.Work
	f.OutMsgs = float64(after.outMsgs-before.outMsgs) / ev
	return f
}

// The runners read each event once, whatever their number, when they own
// partitions: only the owner of an event's partition follows its stream
// (issue 29 item 4). With one partition every runner follows it all.
// Figures are from the server's own counters: consumer info (delivered
// per consumer, split into follows and work queue) and Varz out_msgs.
func TestRunner_deliveriesPerEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("floods several embedded servers")
	}
	var rows []string
	for _, parts := range []int{1, 8} {
		for _, runners := range []int{1, 2, 4} {
			f := measureDeliveries(t, parts, runners, 32, 4)
			b, _ := json.Marshal(f)
			rows = append(rows, string(b))
			t.Logf("P=%d R=%d: %d events; follow %.2f + work %.2f = %.2f deliveries per event; out_msgs %.2f per event",
				parts, runners, f.Events, f.Follow, f.Work, f.Deliveries, f.OutMsgs)
			if parts > 1 && f.Follow > 1.0 {
				t.Errorf("P=%d R=%d: %.2f follow deliveries per event, want at most 1", parts, runners, f.Follow)
			}
			if parts == 1 && f.Follow < float64(runners) {
				t.Errorf("P=1 R=%d: %.2f follow deliveries per event, want %d (every runner follows all)", runners, f.Follow, runners)
			}
		}
	}
	t.Logf("figures:\n%s", strings.Join(rows, "\n"))
}
